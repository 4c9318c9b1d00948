"""The tool catalog: schemas, argument mapping, size of tools/list (no kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_types import ListToolsResult
from pydantic import ValidationError

from ipykeep.mcp_server.catalog import (
    BY_NAME,
    TOOLS,
    TOOLS_LIST_BUDGET,
    compact_schema,
    engine_params,
)
from ipykeep.mcp_server.notebook_app import LINKED_TOOLS, VIEW_URI
from ipykeep.mcp_server.server import IpykeepMcp
from ipykeep.project.config import Config

CATALOG = {
    "create_kernel",
    "list_kernels",
    "close_kernel",
    "restart_kernel",
    "ipython",
    "read_cell",
    "interrupt",
    "list_cells",
    "markdown",
    "run_stale",
    "run_cells",
    "inspect",
    "namespace",
    "watch_file",
    "add_packages",
    "publish",
    "checkpoint",
    "restore",
    "debug",
    "edit_cell",
    "fork_kernel",
}


def test_catalog_names() -> None:
    assert {t.name for t in TOOLS} == CATALOG


def test_schemas_are_compact_and_complete() -> None:
    schema = compact_schema(BY_NAME["ipython"].args)
    assert "title" not in json.dumps(schema)
    assert schema["required"] == ["kernel_id", "code"]
    # defaults and bounds are in the description, which the tool's model enforces
    assert schema["properties"]["yield_time_ms"] == {
        "description": "ms to wait, 0-30000, default 5000; 0 returns the handle at once",
        "type": "integer",
    }
    assert schema["properties"]["kernel_id"] == {"type": "string"}
    # a cell is an id or an index: one type list, not a branch per type
    cells = compact_schema(BY_NAME["run_cells"].args)["properties"]["cells"]
    assert cells["items"] == {"type": ["string", "integer"]}
    # optional strings are plain strings, not anyOf [string, null]
    assert (
        compact_schema(BY_NAME["create_kernel"].args)["properties"]["notebook"]["type"] == "string"
    )
    assert compact_schema(BY_NAME["list_kernels"].args) == {"type": "object"}


def _listed(tmp_path: Path, config: Config | None = None) -> list[dict]:
    app = IpykeepMcp(tmp_path, config or Config())
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in app.tools]


def tools_list_bytes(tmp_path: Path, config: Config | None = None) -> int:
    """Bytes of the ``tools/list`` result as the SDK writes it on the wire."""
    app = IpykeepMcp(tmp_path, config or Config())
    result = ListToolsResult(tools=app.tools)
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def test_tools_list_under_budget(tmp_path: Path) -> None:
    size = tools_list_bytes(tmp_path)
    assert size <= TOOLS_LIST_BUDGET, size
    assert all("outputSchema" not in t and "title" not in t for t in _listed(tmp_path))


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
#: The protocol's value for a hint a tool leaves out.
HINT_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


def _hints(tool: dict) -> dict[str, bool]:
    """A tool's hints as a host reads them: the published ones over the protocol's defaults."""
    return {**HINT_DEFAULTS, **(tool.get("annotations") or {})}


def test_hints_carry_only_what_differs_from_the_protocol_defaults(tmp_path: Path) -> None:
    for tool in _listed(tmp_path):
        published = tool.get("annotations") or {}
        assert all(published[h] != HINT_DEFAULTS[h] for h in published), tool
    listed = {t["name"]: _hints(t) for t in _listed(tmp_path)}
    for name in ("list_kernels", "read_cell", "list_cells", "inspect", "namespace"):
        assert listed[name]["readOnlyHint"] is True and listed[name]["openWorldHint"] is False
    for name in (
        "ipython",
        "run_cells",
        "run_stale",
        "close_kernel",
        "restart_kernel",
        "interrupt",
        "edit_cell",
        "debug",
    ):
        assert listed[name]["readOnlyHint"] is False and listed[name]["destructiveHint"] is True
    assert listed["ipython"]["openWorldHint"] is True
    assert listed["ipython"]["idempotentHint"] is False
    assert listed["watch_file"]["destructiveHint"] is False
    assert listed["watch_file"]["idempotentHint"] is True
    # what each tool declares, as hosts read it
    for spec in TOOLS:
        hints = listed[spec.name]
        assert hints["readOnlyHint"] is spec.hints.read_only, spec.name
        assert hints["openWorldHint"] is spec.hints.open_world, spec.name
        if not spec.hints.read_only:
            assert hints["destructiveHint"] is spec.hints.destructive, spec.name
            assert hints["idempotentHint"] is spec.hints.idempotent, spec.name


def test_defaults_and_ranges_are_in_descriptions() -> None:
    """Schemas carry no defaults or bounds (Codex strips them anyway): the description says
    them, and the tool's model enforces them."""
    for spec in TOOLS:
        for name, info in spec.args.model_fields.items():
            desc = info.description or ""
            where = f"{spec.name}.{name}: {desc!r}"
            default = info.get_default()
            if default is not None and not info.is_required():
                assert "default" in desc and str(default).lower() in desc.lower(), where
            for meta in info.metadata:
                for bound in ("ge", "le"):
                    value = getattr(meta, bound, None)
                    if value is not None and value != 0:
                        assert str(value) in desc, where
                if getattr(meta, "min_length", None) == 1 and info.annotation is not str:
                    assert "at least one" in desc, where


def test_engine_params_mapping() -> None:
    spec = BY_NAME["read_cell"]
    args = spec.args.model_validate({"kernel_id": "k1", "handle": "c3", "yield_time_ms": 10})
    params = engine_params(spec, args, reader="mcp-x")
    assert params.model_dump(exclude_unset=True) == {
        "kernel_id": "k1",
        "handle": "c3",
        "yield_time_ms": 10,
        "reader": "mcp-x",
    }
    spec = BY_NAME["run_cells"]
    assert engine_params(
        spec, spec.args.model_validate({"kernel_id": "k1", "cells": [0, "abc"]})
    ).cells == ["0", "abc"]
    spec = BY_NAME["interrupt"]
    assert engine_params(spec, spec.args.model_validate({"kernel_id": "k1"})).model_dump(
        exclude_unset=True
    ) == {"kernel_id": "k1"}


def test_an_execution_is_a_handle_and_cell_id_is_a_deprecated_alias() -> None:
    """MCP names an execution ``handle``, as the engine does; ``cell_id`` (its old name) still
    works but is not published."""
    for name in ("read_cell", "interrupt"):
        spec = BY_NAME[name]
        props = compact_schema(spec.args)["properties"]
        assert "handle" in props and "cell_id" not in props, props
        old = spec.args.model_validate({"kernel_id": "k1", "cell_id": "c3"})
        assert engine_params(spec, old).handle == "c3"  # type: ignore[attr-defined]
    for spec in TOOLS:  # nowhere else does an argument mean a handle under another name
        assert "cell_id" not in compact_schema(spec.args).get("properties", {}), spec.name


def test_every_tool_maps_onto_a_declared_method() -> None:
    from ipykeep.api import methods as api

    for spec in TOOLS:
        assert api.BY_NAME[spec.method.name] is spec.method
        extra = set(spec.args.model_fields) - set(spec.method.params.model_fields)
        assert not extra, (spec.name, extra)  # every tool argument is a param of its method


@pytest.mark.parametrize(
    "tool,args",
    [
        ("ipython", {"kernel_id": "k1"}),
        ("ipython", {"kernel_id": "k1", "code": "1", "yield_time_ms": 30001}),
        ("ipython", {"kernel_id": "k1", "code": "1", "bogus": 1}),
        ("run_cells", {"kernel_id": "k1", "cells": []}),
    ],
)
def test_bad_arguments_rejected(tool: str, args: dict) -> None:
    with pytest.raises(ValidationError):
        BY_NAME[tool].args.model_validate(args)


def test_artifact_template_matches_the_archive() -> None:
    from ipykeep.mcp_server.server import ARTIFACT_TEMPLATE
    from ipykeep.project.stored import ARTIFACT_URI_PREFIX

    assert ARTIFACT_TEMPLATE == ARTIFACT_URI_PREFIX + "{kernel_id}/{name}"


def test_server_module_loads_without_the_daemon_client() -> None:
    """The opening of a session needs the SDK and the catalog's declarations only (start-up
    time, see launch.py); the API's models load on the first tools/list or call."""
    import subprocess
    import sys

    code = (
        "import sys, pathlib, ipykeep.mcp_server.launch, ipykeep.mcp_server.server as s;"
        "from ipykeep.project.config import Config;"
        "s.IpykeepMcp(pathlib.Path('.'), Config()).server();"
        "heavy = [m for m in ('nbformat', 'jupyter_client', 'ipykeep.client.connection', "
        "'ipykeep.engine.engine', 'typer', 'ipykeep.api.methods', 'ipykeep.api.records') if m in "
        "sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


#: Claude Code's per-tool hints, as docs/mcp-and-hosts.md tabulates them.
ALWAYS_LOADED = {
    "create_kernel",
    "interrupt",
    "ipython",
    "read_cell",
    "run_cells",
    "run_stale",
    "list_cells",
    "inspect",
}
BOUNDED_RESULTS = {
    "ipython",
    "read_cell",
    "run_cells",
    "run_stale",
    "list_cells",
    "inspect",
    "list_kernels",
    "namespace",
}


def _expected_meta(name: str, *, raised: bool) -> dict[str, object]:
    expected: dict[str, object] = {}
    if name in ALWAYS_LOADED:
        expected["anthropic/alwaysLoad"] = True
    if raised and name in BOUNDED_RESULTS:
        expected["anthropic/maxResultSizeChars"] = 500_000
    if name in LINKED_TOOLS:  # the notebook view's link (MCP Apps)
        expected["ui"] = {"resourceUri": VIEW_URI}
    return expected


def test_result_cap_declared_only_when_results_can_outgrow_claude_codes(tmp_path: Path) -> None:
    # 2,500 characters (the default): a bounded result stays under Claude Code's 50,000
    for tool in _listed(tmp_path):
        assert tool.get("_meta", {}) == _expected_meta(tool["name"], raised=False), tool
    raised = Config(max_output_chars=20_000)
    for tool in _listed(tmp_path, raised):
        assert tool.get("_meta", {}) == _expected_meta(tool["name"], raised=True), tool


def test_claude_code_hints_reach_the_official_client(tmp_path: Path) -> None:
    from tests.mcp_server.harness import McpSession, make_project, stdio_params

    project = make_project(tmp_path / "proj")
    (project / "ipykeep.toml").write_text("max_output_chars = 20000\n")
    session = McpSession(stdio_params(project)).start()
    try:
        listed = session.run(lambda c: c.list_tools())
    finally:
        session.close()
    metas = {t.name: t.meta or {} for t in listed.tools}
    assert set(metas) == CATALOG
    for name, meta in metas.items():
        assert meta == _expected_meta(name, raised=True), (name, meta)
