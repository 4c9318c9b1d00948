"""The tool catalog: schemas, argument mapping, size of tools/list (no kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ipykeep.mcp_server.catalog import BY_NAME, TOOLS, compact_schema, engine_params
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
}


def test_catalog_names() -> None:
    assert {t.name for t in TOOLS} == CATALOG


def test_schemas_are_compact_and_complete() -> None:
    schema = compact_schema(BY_NAME["ipython"].args)
    assert "title" not in json.dumps(schema)
    assert schema["required"] == ["kernel_id", "code"]
    assert schema["properties"]["yield_time_ms"] == {
        "default": 5000,
        "description": "ms to wait, 0-30000, default 5000; 0 returns the handle at once",
        "maximum": 30000,
        "minimum": 0,
        "type": "integer",
    }
    # optional strings are plain strings, not anyOf [string, null]
    assert (
        compact_schema(BY_NAME["create_kernel"].args)["properties"]["notebook"]["type"] == "string"
    )
    assert compact_schema(BY_NAME["list_kernels"].args) == {"type": "object"}


def _listed(tmp_path: Path) -> list[dict]:
    app = IpykeepMcp(tmp_path, Config())
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in app.tools]


def test_tools_list_under_budget(tmp_path: Path) -> None:
    payload = json.dumps({"tools": _listed(tmp_path)})
    # 25 tools at about 500 bytes each; the eight Claude Code always loads are about 5.5 KB
    assert len(payload.encode()) < 13_000, len(payload.encode())
    assert all("outputSchema" not in t for t in json.loads(payload)["tools"])


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def test_every_tool_has_a_title_and_explicit_hints(tmp_path: Path) -> None:
    """Codex refuses un-annotated tools under a never-approve policy: every hint is set."""
    for tool in _listed(tmp_path):
        assert tool.get("title"), tool["name"]
        hints = tool.get("annotations") or {}
        assert all(isinstance(hints.get(h), bool) for h in HINTS), (tool["name"], hints)
    listed = {t["name"]: t["annotations"] for t in _listed(tmp_path)}
    for name in ("list_kernels", "read_cell", "list_cells", "inspect", "namespace"):
        assert listed[name]["readOnlyHint"] is True and listed[name]["destructiveHint"] is False
    for name in (
        "ipython",
        "run_cells",
        "run_stale",
        "close_kernel",
        "restart_kernel",
        "interrupt",
    ):
        assert listed[name]["readOnlyHint"] is False and listed[name]["destructiveHint"] is True
    assert (
        listed["ipython"]["openWorldHint"] is True
        and listed["list_kernels"]["openWorldHint"] is False
    )


def test_defaults_and_ranges_are_also_in_descriptions(tmp_path: Path) -> None:
    """Codex strips default/minimum/maximum from schemas: the description must say them too."""
    for tool in _listed(tmp_path):
        for prop, schema in (tool["inputSchema"].get("properties") or {}).items():
            desc = schema.get("description", "")
            where = f"{tool['name']}.{prop}: {desc!r}"
            if "default" in schema:
                shown = str(schema["default"]).lower()
                assert "default" in desc and shown in desc.lower(), where
            for bound in ("minimum", "maximum"):
                if bound in schema:
                    assert str(schema[bound]) in desc, where
            if "minItems" in schema:
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
    """The handshake needs the SDK and the catalog only (start-up time, see launch.py); the
    API's models load on the first call."""
    import subprocess
    import sys

    code = (
        "import sys, ipykeep.mcp_server.launch, ipykeep.mcp_server.server;"
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


def test_claude_code_hints_reach_the_official_client(tmp_path: Path) -> None:
    from tests.mcp_server.harness import McpSession, make_project, stdio_params

    session = McpSession(stdio_params(make_project(tmp_path / "proj"))).start()
    try:
        listed = session.run(lambda c: c.list_tools())
    finally:
        session.close()
    metas = {t.name: t.meta or {} for t in listed.tools}
    assert set(metas) == CATALOG
    for name, meta in metas.items():
        expected: dict[str, object] = {}
        if name in ALWAYS_LOADED:
            expected["anthropic/alwaysLoad"] = True
        if name in BOUNDED_RESULTS:
            expected["anthropic/maxResultSizeChars"] = 500_000
        assert meta == expected, (name, meta)
