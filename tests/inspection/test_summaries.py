"""Built-in summarizers, run in-process on the in-kernel source."""

from __future__ import annotations

import ast
import datetime
import json
import sys

import numpy as np
import pandas as pd
import pytest

from ipykeep.api.summaries import Summary
from ipykeep.kernel.inkernel import INSPECT


def test_protocol_and_module_name_match_the_probe(ik):
    assert INSPECT.protocol == ik.PROTOCOL_VERSION
    assert INSPECT.name == ik.MODULE_NAME


def test_source_imports_only_the_standard_library():
    tree = ast.parse(INSPECT.source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    imported.discard("__future__")
    assert imported, "expected some imports"
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": [1.0, 2.0, None, 4.0],
            "n": [1, 2, 3, 4],
            "cat": ["a", "b", "a", None],
            "flag": [True, False, True, True],
        }
    )


def test_dataframe_summary(ik, summary_dict):
    s = summary_dict(ik, "df", {"df": _frame()}, cell_of={"df": "cell-a"})
    Summary.model_validate(s)
    assert s["kind"] == "dataframe" and s["type"] == "pandas.DataFrame"
    assert s["shape"] == [4, 4] and s["cell"] == "cell-a"
    cols = {c["name"]: c for c in s["columns"]}
    assert cols["x"]["nulls"] == 1 and cols["x"]["min"] == 1.0 and cols["x"]["max"] == 4.0
    assert cols["n"]["mean"] == 2.5 and cols["n"]["max"] == 4
    assert cols["cat"]["nulls"] == 1 and cols["cat"]["top"][0] == ["a", 2]
    assert cols["flag"]["top"][0] == [True, 3]
    assert len(s["sample"]) == 3 and s["sample"][0][1] == 1
    assert s["memory_bytes"] > 0
    assert "degraded" not in s


def test_wide_frame_is_trimmed_under_the_size_cap(ik):
    df = pd.DataFrame({f"a_rather_long_column_name_{i:04d}": range(3) for i in range(400)})
    text = ik.inspect_json("df", 5.0, [], {}, ns={"df": df})
    assert len(text.encode()) < 4096
    s = json.loads(text)["summary"]
    assert s["columns_omitted"] >= 388 and s["shape"] == [3, 400]


@pytest.fixture(scope="module")
def big_frame() -> pd.DataFrame:
    n = 10_000_000
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "value": rng.random(n),
            "count": rng.integers(0, 100, n),
            "label": pd.Series(rng.choice(["red", "green", "blue"], n)),
            "when": pd.date_range("2020-01-01", periods=n, freq="s"),
        }
    )


@pytest.mark.kernel  # slow: left out of the fast tier
def test_ten_million_rows_stay_small_and_sampled(ik, big_frame):
    text = ik.inspect_json("big", 5.0, [], {}, ns={"big": big_frame})
    assert len(text.encode()) < 4096
    s = json.loads(text)["summary"]
    assert s["shape"] == [10_000_000, 4]
    assert s["sample_rows"] <= 100_000
    assert any("sample" in n for n in s["notes"])
    assert "degraded" not in s
    # A bound far above the measured ~0.1 s: catches a full-frame describe(), not jitter.
    assert s["elapsed_ms"] < 3000


def test_series_summary(ik, summary_dict):
    s = summary_dict(ik, "s", {"s": pd.Series([3, 1, None], name="v")})
    assert s["kind"] == "series" and s["shape"] == [3] and s["nulls"] == 1
    assert s["stats"]["min"] == 1.0 and s["series_name"] == "v"


def test_ndarray_summary_and_sampling(ik, summary_dict):
    a = np.arange(12, dtype=float).reshape(3, 4)
    a[0, 0] = np.nan
    s = summary_dict(ik, "a", {"a": a})
    assert s["shape"] == [3, 4] and s["dtype"] == "float64" and s["memory_bytes"] == 96
    assert s["stats"]["nans"] == 1 and s["stats"]["min"] == 1.0 and s["stats"]["max"] == 11.0
    assert s["sample"][1] == 1.0
    big = summary_dict(ik, "b", {"b": np.ones((3000, 1000))})
    assert any("sample" in n for n in big["notes"]) and big["stats"]["mean"] == 1.0


def test_containers_preview_with_caps_and_cycle_guard(ik, summary_dict):
    d = {"a": [1, 2, {"deep": {"deeper": 1}}], "b": "hi", 3: None}
    d["self"] = d
    s = summary_dict(ik, "d", {"d": d})
    assert s["kind"] == "container" and s["length"] == 4
    assert s["key_types"] == {"str": 3, "int": 1}
    assert s["preview"]["self"] == "<cycle>"
    assert s["preview"]["a"][2] == "<dict len=1>"  # depth cap
    long = summary_dict(ik, "l", {"l": list(range(1000))})
    assert long["length"] == 1000 and len(long["preview"]) == 9 and "more" in long["preview"][-1]
    st = summary_dict(ik, "s", {"s": {1, 2}})
    assert st["item_types"] == {"int": 2}


def test_text_and_scalars(ik, summary_dict):
    ns = {
        "t": "line1\nline2" + "x" * 1000,
        "b": b"\x00\x01abc",
        "i": 2**70,
        "f": float("nan"),
        "n": None,
        "np_scalar": np.float32(1.5),
        "when": datetime.date(2024, 1, 2),
    }
    t = summary_dict(ik, "t", ns)
    assert t["length"] == 1011 and t["lines"] == 2 and len(t["preview"]) <= 300
    assert summary_dict(ik, "b", ns)["preview"].startswith("b'")
    assert summary_dict(ik, "i", ns)["value"] == str(2**70)
    assert summary_dict(ik, "f", ns)["value"] == "nan"
    assert summary_dict(ik, "n", ns)["kind"] == "scalar"
    npv = summary_dict(ik, "np_scalar", ns)
    assert npv["value"] == 1.5 and npv["dtype"] == "float32"
    assert summary_dict(ik, "when", ns)["value"] == "2024-01-02"


def test_modules_functions_and_classes(ik, summary_dict):
    def area(width: float, height: float = 1.0) -> float:
        """Area of a rectangle.

        More text that is not part of the head.
        """
        return width * height

    class Shape:
        """A shape."""

        def grow(self):
            return self

    ns = {"json": json, "area": area, "Shape": Shape}
    m = summary_dict(ik, "json", ns)
    assert m["kind"] == "module" and m["module"] == "json" and m["version"]
    f = summary_dict(ik, "area", ns, cell_of={"area": "c7"})
    assert f["signature"].replace("'", "") == "(width: float, height: float = 1.0) -> float"
    assert f["doc"] == "Area of a rectangle." and f["cell"] == "c7" and f["line"] > 0
    c = summary_dict(ik, "Shape", ns)
    assert c["kind"] == "class" and c["methods"] == ["grow"] and c["doc"] == "A shape."


def test_generic_fallback(ik, summary_dict):
    class Point:
        def __init__(self):
            self.x, self.y = 1, 2

        def __repr__(self):
            return "Point(1, 2)"

    s = summary_dict(ik, "p", {"p": Point()})
    assert s["kind"] == "object" and s["repr"] == "Point(1, 2)" and s["attributes"] == ["x", "y"]
    assert s["memory_bytes"] > 0


def test_optional_libraries_are_never_imported(ik, summary_dict):
    before = set(sys.modules)
    summary_dict(ik, "x", {"x": [1]})
    ik.namespace_json(1.0, {}, ns={"x": [1]})
    for lib in ("polars", "torch", "xarray", "pyarrow"):
        if lib not in before:
            assert lib not in sys.modules


def test_polars_frame(ik, summary_dict):
    pl = pytest.importorskip("polars", reason="polars is not installed")
    s = summary_dict(ik, "p", {"p": pl.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})})
    assert s["kind"] == "polars_dataframe" and s["shape"] == [3, 2]
    assert s["columns"][0]["nulls"] == 1


def test_torch_tensor(ik, summary_dict):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    s = summary_dict(ik, "t", {"t": torch.zeros(2, 3)})
    assert s["kind"] == "tensor" and s["shape"] == [2, 3] and s["device"] == "cpu"


def test_pyarrow_table(ik, summary_dict):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    s = summary_dict(ik, "t", {"t": pa.table({"a": [1, None]})})
    assert s["kind"] == "arrow_table" and s["shape"] == [2, 1] and s["columns"][0]["nulls"] == 1


def test_xarray_dataarray(ik, summary_dict):
    xr = pytest.importorskip("xarray", reason="xarray is not installed")
    s = summary_dict(ik, "x", {"x": xr.DataArray(np.zeros((2, 3)), dims=("a", "b"))})
    assert s["kind"] == "xarray" and s["dims"] == {"a": 2, "b": 3}
