"""Hosts with and without MCP Apps, side by side on one kernel: the model's side is the same.

A client that advertises the extension sees the view's own tool and resource; one that does
not sees the catalog it always saw, with the ``_meta.ui`` links as the only addition, and every
result is the same bytes for both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.extension import advertise

from ipykeep.mcp_server import notebook_app
from ipykeep.mcp_server.server import _tools
from ipykeep.project.config import Config
from tests.mcp_server.harness import McpSession, make_project, shutdown_daemon, stdio_params

pytestmark = pytest.mark.kernel

APPS = advertise(notebook_app.EXTENSION_ID, {"mimeTypes": [notebook_app.APP_MIME_TYPE]})


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpSession, McpSession]]:
    root = make_project(tmp_path_factory.mktemp("apps") / "proj")
    plain = McpSession(stdio_params(root)).start()
    apps = McpSession(stdio_params(root), extensions=[APPS]).start()
    try:
        yield plain, apps
    finally:
        plain.close()
        apps.close()
        shutdown_daemon(root)


def _dump(value: Any) -> str:
    return json.dumps(value.model_dump(mode="json", by_alias=True, exclude_none=True))


def _tools_of(session: McpSession) -> list[dict[str, Any]]:
    listed = session.run(lambda c: c.list_tools())
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


def test_tools_list_grows_only_by_the_links(sessions: tuple[McpSession, McpSession]) -> None:
    plain, apps = sessions
    seen_plain, seen_apps = _tools_of(plain), _tools_of(apps)
    assert seen_apps[:-1] == seen_plain
    assert seen_apps[-1]["name"] == notebook_app.STATE_TOOL
    assert seen_apps[-1]["_meta"]["ui"]["visibility"] == ["app"]
    linked = {t["name"] for t in seen_plain if "ui" in (t.get("_meta") or {})}
    assert linked == notebook_app.LINKED_TOOLS
    unlinked = []
    for tool in seen_plain:
        meta = {k: v for k, v in (tool.pop("_meta", None) or {}).items() if k != "ui"}
        unlinked.append({**tool, **({"_meta": meta} if meta else {})})
    assert unlinked == [
        t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in _tools(Config())
    ]


def test_only_an_apps_host_is_offered_the_view(sessions: tuple[McpSession, McpSession]) -> None:
    plain, apps = sessions
    assert plain.run(lambda c: c.list_resources()).resources == []
    offered = apps.run(lambda c: c.list_resources()).resources
    assert [str(r.uri) for r in offered] == [notebook_app.VIEW_URI]
    assert offered[0].mime_type == notebook_app.APP_MIME_TYPE


def test_results_are_the_same_bytes_with_and_without_the_extension(
    sessions: tuple[McpSession, McpSession],
) -> None:
    plain, apps = sessions
    created = plain.tool("create_kernel", {"notebook": "analysis.ipynb"}, timeout=300)
    assert not created.is_error
    kid = created.structured_content["kernel_id"]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_cells", {"kernel_id": kid}),
        ("run_stale", {"kernel_id": kid}),
        ("list_kernels", {}),
        ("run_stale", {"kernel_id": "k999"}),  # an error envelope too
    ]
    for name, args in calls:
        assert _dump(plain.tool(name, args)) == _dump(apps.tool(name, args)), name
    # the view's own state of the same kernel, through the host that has it
    view = apps.tool(notebook_app.STATE_TOOL, {"kernel_id": kid})
    assert not view.is_error
    snapshot = view.structured_content
    assert [c["cell_id"] for c in snapshot["cells"]] == ["load", "total", "note", "double"]
    assert snapshot["outputs"]["total"]["text"] == "9\n"
    assert snapshot["plan"]["order"] == []
