from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_server.harness import McpSession, make_project, shutdown_daemon, stdio_params


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = make_project(tmp_path_factory.mktemp("mcp") / "proj")
    yield root
    shutdown_daemon(root)


@pytest.fixture(scope="module")
def mcp(project: Path) -> Iterator[McpSession]:
    """One stdio MCP server per module, launched as an agent host would."""
    session = McpSession(stdio_params(project)).start()
    try:
        yield session
    finally:
        session.close()
        shutdown_daemon(project)
