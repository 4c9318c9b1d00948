"""The probe expressions as the engine sends them, evaluated like user_expressions do."""

from __future__ import annotations

import ast
import builtins
import json
import sys
import types

import pytest

from ipykeep.api.summaries import NamespaceEntry, NamespaceListing, Summary
from ipykeep.client.summaries import render_namespace, render_summary
from ipykeep.inspection import probe
from ipykeep.inspection.errors import InspectionError
from ipykeep.kernel.inkernel import DIGEST_ATTR, INSPECT, install_expression


@pytest.fixture
def clean_module(monkeypatch):
    monkeypatch.delitem(sys.modules, INSPECT.name, raising=False)
    yield
    sys.modules.pop(INSPECT.name, None)


def _user_expression(expr: str, user_ns: dict) -> dict:
    """What ipykernel puts in a reply: eval in the user namespace, repr as text/plain."""
    try:
        return {"status": "ok", "data": {"text/plain": repr(eval(expr, user_ns, user_ns))}}
    except Exception as exc:
        return {"status": "error", "ename": type(exc).__name__, "evalue": str(exc)}


def test_install_then_inspect_leaves_user_globals_untouched(clean_module, monkeypatch):
    user_ns = {"x": [1, 2, 3]}
    shell = types.SimpleNamespace(user_ns=user_ns, user_ns_hidden={})
    monkeypatch.setattr(builtins, "get_ipython", lambda: shell, raising=False)
    before = dict(user_ns)
    missing = probe.decode_user_expression(_user_expression(probe.inspect_expression("x"), user_ns))
    assert probe.needs_install(missing)
    with pytest.raises(InspectionError):
        probe.parse_inspect_reply(missing)
    version = _user_expression(install_expression(INSPECT), user_ns)
    assert json.loads(ast.literal_eval(version["data"]["text/plain"])) == {
        INSPECT.name: INSPECT.protocol
    }
    module = sys.modules[INSPECT.name]
    # A second install with the same source keeps the module (and its registry).
    _user_expression(install_expression(INSPECT), user_ns)
    assert sys.modules[INSPECT.name] is module
    text = probe.decode_user_expression(
        _user_expression(probe.inspect_expression("x", 2.0, [], {"x": "c1"}), user_ns)
    )
    summary = probe.parse_inspect_reply(text)
    assert summary.length == 3 and summary.cell == "c1"
    listing = probe.parse_namespace_reply(
        probe.decode_user_expression(_user_expression(probe.namespace_expression(2.0), user_ns))
    )
    assert [e.name for e in listing.entries] == ["x"]
    user_ns.pop("__builtins__", None)  # eval adds it, as IPython's namespace already has it
    assert user_ns == before


def test_reinstall_of_changed_source_keeps_registrations(clean_module, monkeypatch):
    user_ns: dict = {}
    _user_expression(install_expression(INSPECT), user_ns)
    sys.modules[INSPECT.name].summarizer(match=int, name="kept")(lambda v: {"k": 1})
    setattr(sys.modules[INSPECT.name], DIGEST_ATTR, "an older copy")
    _user_expression(install_expression(INSPECT), user_ns)
    labels = [e.label for e in sys.modules[INSPECT.name]._USER_SUMMARIZERS]
    assert labels == ["kept"]


def test_decode_reports_kernel_errors():
    with pytest.raises(InspectionError, match="NameError"):
        probe.decode_user_expression({"status": "error", "ename": "NameError", "evalue": "x"})


def test_protocol_mismatch_is_an_error():
    with pytest.raises(InspectionError, match="protocol mismatch"):
        probe.parse_inspect_reply('{"protocol": 999, "ok": true, "summary": {}}')


def test_models_dump_compactly():
    s = Summary(name="x", type="int", kind="scalar", value=3)
    assert s.compact() == {"name": "x", "type": "int", "kind": "scalar", "value": 3}
    assert s.compact_json() == '{"name":"x","type":"int","kind":"scalar","value":3}'


def test_render_summary_and_namespace(ik):
    import pandas as pd

    text = ik.inspect_json("df", 2.0, [], {"df": "c3"}, ns={"df": pd.DataFrame({"a": [1.0, None]})})
    rendered = render_summary(probe.parse_inspect_reply(text))
    assert rendered.splitlines()[0].startswith("df: pandas.DataFrame (dataframe) 2×1")
    assert "cell c3" in rendered and "a: float64 nulls=1 min=1.0 max=1.0" in rendered
    listing = NamespaceListing(
        entries=[
            NamespaceEntry(
                name="df",
                type="pandas.DataFrame",
                kind="dataframe",
                shape=[2, 1],
                memory_bytes=2048,
                cell="c3",
            ),
            NamespaceEntry(name="h", type="H", kind="object", degraded=True),
        ],
        count=2,
        degraded=True,
    )
    table = render_namespace(listing).splitlines()
    assert table[0].split() == ["name", "type", "shape/len", "memory", "cell"]
    assert table[1].split() == ["df", "pandas.DataFrame", "2×1", "2.0", "KB", "c3"]
    assert "(degraded)" in table[2] and "degraded" in table[-1]
    degraded = render_summary(
        Summary(
            name="h",
            type="H",
            kind="object",
            degraded=True,
            degraded_reason="time budget of 1s ran out in object",
        )
    )
    assert "degraded: time budget of 1s ran out" in degraded
