"""The ``add_packages`` tool with the official MCP client over stdio, on a project .venv."""

from __future__ import annotations

import json
import os

import pytest

from tests.environments.envs import make_venv
from tests.mcp_server.harness import (
    McpSession,
    envelope,
    make_project,
    shutdown_daemon,
    stdio_params,
    text_of,
)

# environments are laid out as on POSIX (bin/python), as discovery expects them
pytestmark = [pytest.mark.kernel, pytest.mark.posix]


def test_add_packages_tool_installs_and_errors_with_the_envelope(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    make_venv(root / ".venv", "ipykernel")
    params = stdio_params(root)
    # the host's own environment reaches the server: here, where to find TLS certificates
    assert params.env is not None
    params.env.update({k: v for k, v in os.environ.items() if k.startswith("SSL_CERT_")})
    mcp = McpSession(params).start()
    try:
        created = mcp.tool("create_kernel", {})
        assert not created.is_error, text_of(created)
        kernel = created.structured_content
        assert kernel["environment"]["kind"] == "project_venv"
        kid = kernel["kernel_id"]
        added = mcp.tool("add_packages", {"kernel_id": kid, "packages": ["tabulate"]})
        assert not added.is_error, text_of(added)
        res = json.loads(text_of(added))
        assert [c["name"] for c in res["changed"]] == ["tabulate"] and res["changed"][0]["after"]
        ran = mcp.tool("ipython", {"kernel_id": kid, "code": "import tabulate; print('ok')"})
        assert ran.structured_content["state"] == "ok", text_of(ran)
        bad = mcp.tool("add_packages", {"kernel_id": kid, "packages": ["ipykeep-no-such-4b1c"]})
        assert bad.is_error
        env = envelope(bad)
        assert env["code"] == "install_failed" and "ipykeep-no-such-4b1c" in env["message"]
        assert env["hint"]
    finally:
        mcp.close()
        shutdown_daemon(root)
