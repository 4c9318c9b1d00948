"""Each tool is derived from its daemon method: what it does not override is the method's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ipykeep.mcp_server.catalog import BY_NAME, SERVER_SUPPLIED, TOOLS, engine_params


def test_descriptions_are_the_methods_unless_the_tool_says_otherwise() -> None:
    for spec in TOOLS:
        expected = spec.about if spec.about is not None else spec.method.doc
        assert spec.description == expected and expected, spec.name


def test_arguments_are_the_methods_params_but_for_declared_differences() -> None:
    for spec in TOOLS:
        params = spec.method.params.model_fields
        for name, info in spec.args.model_fields.items():
            if name in spec.overrides or name == "kernel_id":
                continue
            assert info.description == params[name].description, (spec.name, name)
            assert info.default == params[name].default, (spec.name, name)
            assert info.metadata == params[name].metadata, (spec.name, name)
        assert not SERVER_SUPPLIED & set(spec.args.model_fields), spec.name


def test_a_path_argument_keeps_its_methods_check() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        BY_NAME["watch_file"].args.model_validate({"kernel_id": "k1", "path": "a\0b"})


@pytest.mark.parametrize(
    "tool,raw",
    [
        ("ipython", {"kernel_id": "k1", "code": "1", "yield_time_ms": 0, "request_id": "r"}),
        ("read_cell", {"kernel_id": "k1", "cell_id": "c3", "cursor": 2}),
        ("run_cells", {"kernel_id": "k1", "cells": [0, "abc", True]}),
        ("create_kernel", {"notebook": "a.ipynb", "warm": False}),
        ("publish", {"kernel_id": "k1", "cells": {"0": "x"}, "tunnel": True}),
        ("run_stale", {"kernel_id": "k1", "execute": True, "fresh": True}),
    ],
)
def test_params_built_without_revalidation_equal_validated_ones(tool: str, raw: dict) -> None:
    spec = BY_NAME[tool]
    built = engine_params(spec, spec.args.model_validate(raw))
    validated = spec.method.validate(built.model_dump(exclude_unset=True))
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
