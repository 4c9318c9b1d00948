"""Custom summarizers: decorator registry, configured module:callable, fallbacks."""

from __future__ import annotations

import json
import sys
import textwrap

import pandas as pd

from ipykeep.kernel.inkernel import DIGEST_ATTR, INSPECT


class Model:
    coef_ = [0.5, 1.5]


class Sub(Model):
    pass


def test_decorated_summarizer_wins_over_builtin(ik, summary_dict):
    @ik.summarizer(match=pd.DataFrame)
    def frame_brief(df):
        return {"kind": "table", "rows": len(df)}

    s = summary_dict(ik, "df", {"df": pd.DataFrame({"a": [1, 2]})})
    assert s["kind"] == "table" and s["custom"] == {"rows": 2}
    assert s["summarizer"].endswith("frame_brief")


def test_match_forms(ik, summary_dict):
    ik.summarizer(match=f"{Model.__module__}.Model", name="by-name")(lambda m: {"via": "name"})
    ns = {"m": Sub(), "n": 5, "t": (1, 2)}
    assert summary_dict(ik, "m", ns)["custom"] == {"via": "name"}  # MRO match
    ik.summarizer(match=(int, float), name="numbers")(lambda v: {"via": "tuple"})
    assert summary_dict(ik, "n", ns)["custom"] == {"via": "tuple"}
    ik.summarizer(match=lambda v: isinstance(v, tuple) and len(v) == 2, name="pairs")(
        lambda v: {"via": "pred"}
    )
    assert summary_dict(ik, "t", ns)["custom"] == {"via": "pred"}


def test_first_match_wins_and_reregistering_replaces(ik, summary_dict):
    ik.summarizer(match=int, name="first")(lambda v: {"n": 1})
    ik.summarizer(match=int, name="second")(lambda v: {"n": 2})
    assert summary_dict(ik, "x", {"x": 1})["custom"] == {"n": 1}
    ik.summarizer(match=int, name="first")(lambda v: {"n": 3})
    assert summary_dict(ik, "x", {"x": 1})["custom"] == {"n": 3}
    assert len(ik._USER_SUMMARIZERS) == 2


def test_raising_summarizer_falls_back_with_a_note(ik, summary_dict):
    @ik.summarizer(match=list)
    def broken(v):
        raise ValueError("bad day")

    ik.summarizer(match=list, name="passes")(lambda v: None)
    s = summary_dict(ik, "x", {"x": [1, 2]})
    assert s["kind"] == "container" and s["length"] == 2
    assert any("broken failed: ValueError: bad day" in n for n in s["notes"])


def test_configured_module_callable(ik, summary_dict, tmp_path, monkeypatch):
    (tmp_path / "my_summaries.py").write_text(
        textwrap.dedent("""
        def describe_dict(obj):
            if not isinstance(obj, dict):
                return None
            return {"keys": sorted(obj)}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    conf = ["my_summaries:describe_dict", "missing_module_xyz:fn"]
    s = summary_dict(ik, "d", {"d": {"b": 1, "a": 2}}, summarizers=conf)
    assert s["custom"] == {"keys": ["a", "b"]} and s["summarizer"] == "my_summaries:describe_dict"
    assert any("missing_module_xyz:fn could not be loaded" in n for n in s["notes"])
    other = summary_dict(ik, "x", {"x": 3}, summarizers=conf)
    assert other["kind"] == "scalar"  # the configured callable passed with None
    sys.modules.pop("my_summaries", None)


def test_import_from_installed_module_name(installed, summary_dict):
    exec(
        "from _ipykeep_inspect import summarizer\n"
        "@summarizer(match=str)\n"
        "def shout(s):\n"
        "    return {'upper': s.upper()}\n",
        {},
    )
    assert summary_dict(installed, "s", {"s": "hi"})["custom"] == {"upper": "HI"}


def test_package_decorator_registers_into_the_inkernel_registry(installed, summary_dict):
    from ipykeep.inspection import summarizer

    @summarizer(match=bytes, name="bytes-len")
    def blen(b):
        return {"n": len(b)}

    assert any(e.label == "bytes-len" for e in installed._USER_SUMMARIZERS)
    assert summary_dict(installed, "b", {"b": b"abc"})["custom"] == {"n": 3}


def test_package_decorator_installs_the_module_when_missing(monkeypatch):
    monkeypatch.delitem(sys.modules, INSPECT.name, raising=False)
    from ipykeep.inspection import summarizer

    summarizer(match=complex, name="cplx")(lambda c: {"re": c.real})
    module = sys.modules[INSPECT.name]
    assert getattr(module, DIGEST_ATTR) == INSPECT.digest
    payload = json.loads(module.inspect_json("c", 2.0, [], {}, ns={"c": 1 + 2j}))
    assert payload["summary"]["custom"] == {"re": 1.0}
    sys.modules.pop(INSPECT.name)
