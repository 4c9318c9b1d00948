"""The tool catalog: schemas, argument mapping, size of tools/list (no kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ipykeep.core.config import Config
from ipykeep.mcp_server.catalog import BY_NAME, TOOLS, compact_schema, engine_params
from ipykeep.mcp_server.server import IpykeepMcp

CATALOG = {
    "create_kernel", "list_kernels", "close_kernel", "ipython", "read_cell", "interrupt", "list_cells",
    "markdown", "run_stale", "run_cells", "inspect", "namespace", "watch_file", "publish",
}


def test_catalog_names() -> None:
    assert {t.name for t in TOOLS} == CATALOG


def test_schemas_are_compact_and_complete() -> None:
    schema = compact_schema(BY_NAME["ipython"].args)
    assert "title" not in json.dumps(schema)
    assert schema["required"] == ["kernel_id", "code"]
    assert schema["properties"]["yield_time_ms"] == {
        "default": 5000, "description": "wait this long; 0 returns the handle at once", "maximum": 30000, "minimum": 0, "type": "integer",
    }
    # optional strings are plain strings, not anyOf [string, null]
    assert compact_schema(BY_NAME["create_kernel"].args)["properties"]["notebook"]["type"] == "string"
    assert compact_schema(BY_NAME["list_kernels"].args) == {"type": "object"}


def test_tools_list_under_budget(tmp_path: Path) -> None:
    app = IpykeepMcp(tmp_path, Config())
    payload = json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in app.tools]})
    assert len(payload.encode()) < 12_000
    assert all("outputSchema" not in t for t in json.loads(payload)["tools"])


def test_engine_params_mapping() -> None:
    spec = BY_NAME["read_cell"]
    args = spec.args.model_validate({"kernel_id": "k1", "cell_id": "c3", "yield_time_ms": 10})
    assert engine_params(spec, args) == {"kernel_id": "k1", "handle": "c3", "yield_time_ms": 10}
    spec = BY_NAME["run_cells"]
    assert engine_params(spec, spec.args.model_validate({"kernel_id": "k1", "cells": [0, "abc"]}))["cells"] == ["0", "abc"]
    spec = BY_NAME["interrupt"]
    assert engine_params(spec, spec.args.model_validate({"kernel_id": "k1"})) == {"kernel_id": "k1"}


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
