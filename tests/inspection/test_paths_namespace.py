"""Safe dotted paths, unknown names, and the namespace listing."""

from __future__ import annotations

import json
import time
import types

import numpy as np
import pandas as pd
import pytest

from ipykeep.inspection import probe
from ipykeep.inspection.errors import BadPathError, UnknownVariableError


class Model:
    def __init__(self):
        self.coef_ = np.array([0.5, 1.5])
        self.params = {"alpha": 0.1}


def _ns():
    return {
        "model": Model(),
        "df": pd.DataFrame({"col": [1, 2], "other": [3, 4]}),
        "items": [10, 20, 30],
    }


@pytest.mark.parametrize(
    ("expr", "kind", "check"),
    [
        ("model.coef_", "ndarray", lambda s: s["shape"] == [2]),
        ('df["col"]', "series", lambda s: s["shape"] == [2]),
        ('model.params["alpha"]', "scalar", lambda s: s["value"] == 0.1),
        ("items[-1]", "scalar", lambda s: s["value"] == 30),
        ("items[1:]", "container", lambda s: s["length"] == 2),
        (" df.shape ", "container", lambda s: s["preview"] == [2, 2]),
    ],
)
def test_safe_paths(ik, summary_dict, expr, kind, check):
    s = summary_dict(ik, expr, _ns(), cell_of={"model": "c1", "df": "c2"})
    assert s["kind"] == kind and check(s), s
    assert s["name"] == expr.strip()


@pytest.mark.parametrize(
    "expr",
    [
        "model.fit()",
        "df[df.col > 1]",
        "items[i]",
        "__import__('os')",
        "a + b",
        "lambda: 1",
        "x = 1",
        "df[[",
    ],
)
def test_unsafe_expressions_are_refused_without_evaluation(ik, expr):
    calls = []
    ns = {
        "model": types.SimpleNamespace(fit=lambda: calls.append(1)),
        "df": None,
        "items": [],
        "i": 0,
    }
    text = ik.inspect_json(expr, 1.0, [], {}, ns=ns)
    with pytest.raises(BadPathError):
        probe.parse_inspect_reply(text)
    assert calls == []


def test_unknown_name_lists_close_matches(ik):
    text = ik.inspect_json("modle", 1.0, [], {}, ns=_ns())
    with pytest.raises(UnknownVariableError) as info:
        probe.parse_inspect_reply(text)
    assert info.value.details["matches"] == ["model"] and "model" in info.value.hint


def test_unknown_attribute_and_key_list_close_matches(ik):
    with pytest.raises(UnknownVariableError) as info:
        probe.parse_inspect_reply(ik.inspect_json("model.coef", 1.0, [], {}, ns=_ns()))
    assert "coef_" in info.value.details["matches"]
    with pytest.raises(UnknownVariableError) as info:
        probe.parse_inspect_reply(ik.inspect_json('df["cols"]', 1.0, [], {}, ns=_ns()))
    assert "col" in info.value.details["matches"]


def test_namespace_excludes_internals_and_helpers(ik, installed):
    ns = {
        "In": [],
        "Out": {},
        "exit": object(),
        "quit": object(),
        "get_ipython": lambda: None,
        "_ih": [],
        "_oh": {},
        "_dh": [],
        "_": 1,
        "__": 2,
        "_private": 3,
        "summarizer": installed.summarizer,
        "_ipykeep_inspect": installed,
        "ipk": probe,
        "keep": 1,
    }
    exec("made_by_exec = 42", ns)  # adds __builtins__ too
    ns["made_by_globals"] = "g"
    listing = json.loads(ik.namespace_json(1.0, {"keep": "cell-9"}, ns=ns))["namespace"]
    names = [e["name"] for e in listing["entries"]]
    assert names == ["keep", "made_by_exec", "made_by_globals"]
    assert listing["entries"][0] == {
        "name": "keep",
        "type": "int",
        "kind": "scalar",
        "memory_bytes": 28,
        "value": 1,
        "cell": "cell-9",
    }


def test_namespace_of_200_variables(ik):
    ns = {}
    for i in range(200):
        kind = i % 5
        ns[f"v{i:03d}"] = (
            i
            if kind == 0
            else f"text {i}"
            if kind == 1
            else list(range(i))
            if kind == 2
            else np.zeros((i, 2))
            if kind == 3
            else pd.DataFrame({"a": range(i)})
        )
    start = time.monotonic()
    text = ik.namespace_json(5.0, {}, ns=ns)
    elapsed = time.monotonic() - start
    listing = probe.parse_namespace_reply(text)
    assert listing.count == 200 and len(listing.entries) == 200 and not listing.degraded
    by_name = {e.name: e for e in listing.entries}
    assert by_name["v003"].shape == [3, 2] and by_name["v004"].shape == [4, 1]
    assert by_name["v002"].length == 2 and by_name["v001"].value == "text 1"
    assert all(e.memory_bytes is not None for e in listing.entries)
    assert elapsed < 3.0  # measured ~0.02 s; only catches a per-variable blow-up


def test_namespace_cap(ik):
    listing = json.loads(ik.namespace_json(1.0, {}, ns={f"x{i}": i for i in range(30)}, limit=10))[
        "namespace"
    ]
    assert listing["count"] == 30 and len(listing["entries"]) == 10
    assert "20 more variables" in listing["notes"][0]
