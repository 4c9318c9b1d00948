"""Fixtures that run the in-kernel source in this process, as the kernel would."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator

import pytest

from ipykeep.kernel.inkernel import INSPECT


def load_inkernel() -> types.ModuleType:
    module = types.ModuleType(INSPECT.name)
    exec(compile(INSPECT.source, "<ipykeep-inspect>", "exec"), module.__dict__)
    return module


@pytest.fixture
def ik() -> types.ModuleType:
    """A fresh copy of the in-kernel module (its own summarizer registry)."""
    return load_inkernel()


@pytest.fixture
def installed(ik: types.ModuleType) -> Iterator[types.ModuleType]:
    """The fresh copy installed as sys.modules["_ipykeep_inspect"], removed afterwards."""
    previous = sys.modules.get(INSPECT.name)
    sys.modules[INSPECT.name] = ik
    try:
        yield ik
    finally:
        if previous is None:
            sys.modules.pop(INSPECT.name, None)
        else:
            sys.modules[INSPECT.name] = previous


def _summary_dict(ik: types.ModuleType, expr: str, ns: dict, **kw) -> dict:
    payload = json.loads(
        ik.inspect_json(
            expr,
            kw.pop("budget_s", 5.0),
            kw.pop("summarizers", []),
            kw.pop("cell_of", {}),
            ns=ns,
            **kw,
        )
    )
    assert payload["ok"], payload
    return payload["summary"]


@pytest.fixture
def summary_dict():
    """``summary_dict(ik, expr, ns, **kw)``: the summary dict of a successful inspection."""
    return _summary_dict
