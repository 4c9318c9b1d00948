"""Memo keys and matches (pure logic): what a key covers, what makes a run unkeyable, and how a
plan's chain resolves in order."""

from __future__ import annotations

from typing import Any

import pytest

from ipykeep.checkpoints import memo
from ipykeep.staleness import FileStamp
from ipykeep.staleness.hashing import source_hash
from ipykeep.staleness.tracker_state import NameWrite


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("import time\nt0 = time.time()", "clock"),
        ("from datetime import datetime\nnow = datetime.now()", "clock"),
        ("import numpy as np\nrng = np.random.default_rng()", "unseeded"),
        ("import random\nrng = random.Random()", "unseeded"),
        ("import os\nkey = os.urandom(8)", "entropy"),
        ("import uuid\nu = uuid.uuid4()", "entropy"),
        ("x = eval('1 + 1')", "eval"),
        ("!ls", "shell"),
        ("%sx ls", "shell"),
    ],
)
def test_sources_the_key_cannot_cover(source: str, why: str) -> None:
    reason = memo.uncovered_in_source(source)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nrng = np.random.default_rng(42)",
        "import random\nrng = random.Random(7)",
        "df = df.eval('a + b')",
        "import time\ntime.sleep(1)\nx = 2",
        "%matplotlib inline\nx = 1",
    ],
)
def test_sources_the_key_covers(source: str) -> None:
    assert memo.uncovered_in_source(source) is None


def test_seeding_cells() -> None:
    assert memo.seeds_only(
        "import numpy as np\nnp.random.seed(0)", ["np", "<numpy.random>"], ["np"]
    )
    assert not memo.seeds_only("np.random.seed(0)\nx = np.random.rand()", ["x"], [])
    assert not memo.seeds_only("x = np.random.rand()", ["<numpy.random>"], [])


def test_key_depends_on_every_input() -> None:
    files = (FileStamp("/p/a.csv", 1, 10),)
    base = memo.run_key("x = a + 1", {"a": "v1"}, files, {"numpy": "2.0"})
    assert base == memo.run_key("x = a + 1  # comment", {"a": "v1"}, files, {"numpy": "2.0"})
    assert base != memo.run_key("x = a + 2", {"a": "v1"}, files, {"numpy": "2.0"})
    assert base != memo.run_key("x = a + 1", {"a": "v2"}, files, {"numpy": "2.0"})
    assert base != memo.run_key("x = a + 1", {"a": "v1"}, (FileStamp("/p/a.csv", 2, 10),), {})
    assert base != memo.run_key("x = a + 1", {"a": "v1"}, files, {"numpy": "2.1"})
    assert memo.out_version(base, "x") != memo.out_version(base, "y")
    assert memo.out_version(base, "<random>", "abc") == memo.out_version("other", "<random>", "abc")


def test_versions_of_writes() -> None:
    versions = {("x", 5): "vx"}
    assert memo.version_of("x", NameWrite("cell", "c1", 5, 5), versions) == "vx"
    assert memo.version_of("x", NameWrite("cell", "c1", 6, 6), versions) is None
    assert memo.version_of("x", NameWrite("scratch", None, 5, 5), versions) is None
    assert memo.version_of("len", None, versions) == memo.INITIAL
    assert memo.version_of("<numpy.random>", None, versions) is None  # unseeded at start


def _entry(source: str, reads: dict[str, str], out: dict[str, str], **kw: Any) -> memo.MemoEntry:
    key = memo.run_key(source, reads, (), {})
    manifest = {
        "cell_id": "c",
        "seq": 1,
        "source": source,
        "duration": kw.get("duration", 2.0),
        "restorable": True,
        "observed": {"bound": sorted(out)},
        "values": {
            n: {"blob": "0" * 64, "size": 10} for n in (out if kw.get("saved", True) else ())
        },
        "created": kw.get("created", 1.0),
        "dataflow": "static",
        "memo": {"key": key, "source_hash": source_hash(source), "reads": reads, "out": out},
    }
    entry = memo.MemoEntry.from_manifest(manifest)
    assert entry is not None
    return entry


def test_a_chain_resolves_in_order() -> None:
    a = _entry("k = 2", {}, {"k": "k2"}, duration=0.001)  # cheap: re-runs, but is predicted
    b = _entry("y = k * 10", {"k": "k2"}, {"y": "y2"})
    c = _entry("z = y + 1", {"y": "y2"}, {"z": "z2"})
    stale_b = _entry("y = k * 10", {"k": "k3"}, {"y": "y3"}, created=2.0)
    by_source = {e.source_hash: [e] for e in (a, c)}
    by_source[b.source_hash] = [b, stale_b]
    found = memo.resolve(
        [("a", "k = 2"), ("b", "y = k * 10"), ("c", "z = y + 1")],
        lambda h: by_source.get(h, []),
        lambda name: {"k": "k3", "y": "y3"}.get(name, memo.INITIAL),
        lambda cid, src: {"a": {"k"}, "b": {"y"}, "c": {"z"}}[cid],
        lambda path: None,
        "static",
    )
    assert set(found) == {"b", "c"}  # a re-runs (cheaper), b then matches its k = 2 run
    assert found["b"] is b


def test_an_unknown_rerun_breaks_the_chain() -> None:
    c = _entry("z = y + 1", {"y": "y2"}, {"z": "z2"})
    found = memo.resolve(
        [("b", "y = k * 10"), ("c", "z = y + 1")],
        lambda h: [c] if h == c.source_hash else [],
        lambda name: "y2" if name == "y" else memo.INITIAL,
        lambda cid, src: {"y"} if cid == "b" else {"z"},
        lambda path: None,
        "static",
    )
    assert found == {}  # b re-runs with no stored run: y's version is unknown until then


def test_unsaved_values_are_not_loaded() -> None:
    e = _entry("y = 1", {}, {"y": "v"}, saved=False)
    assert not e.loadable
    assert memo.choose([e], lambda n: memo.INITIAL, lambda p: None, "static") is None
    assert memo.choose([e], lambda n: memo.INITIAL, lambda p: None, "static", to_load=False) is e
