"""The in-kernel loader: blobs authenticated ahead of a restore (``prefetch``, ``verify``) are
the bytes it unpickles, and a refused blob stays refused (pure, no kernel)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ipykeep.checkpoints.store import CheckpointStore
from tests.checkpoints.test_store import _inkernel_module


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / ".ipykeep")


def _saved(store: CheckpointStore, mod, ns: dict, name: str) -> str:  # type: ignore[no-untyped-def]
    meta = {"path": str(store.root / f"{name}.json"), "manifest": {}}
    json.loads(mod.snapshot(json.dumps(meta), [name]))
    assert json.loads(mod.flush(10))
    return str(store.read_manifest(store.root / f"{name}.json")["values"][name]["blob"])


def _replace(store: CheckpointStore, blob: str, data: bytes) -> None:
    """Put other bytes under a blob's name the way files change on disk (a new file renamed over
    it)."""
    path = store.blob_path(blob)
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("ahead", ["prefetch", "verify"])
def test_restore_unpickles_the_bytes_authenticated_ahead_of_it(
    store: CheckpointStore, ahead: str
) -> None:
    ns: dict = {"rows": list(range(1000))}
    mod = _inkernel_module(store, ns)
    blob = _saved(store, mod, ns, "rows")
    ns.clear()
    if ahead == "prefetch":
        assert json.loads(mod.loader.prefetch([blob])) == 1
    else:
        assert json.loads(mod.loader.verify([blob])) == {}
    # the file changes after it was authenticated: what loads is what was checked
    _replace(store, blob, b"\x80\x05N.")
    out = json.loads(mod.loader.restore([["rows", blob]], 10))["results"]
    assert out == {"rows": "ok"} and ns["rows"] == list(range(1000))
    # nothing is kept for a second restore: the changed file is read again, and refused
    out = json.loads(mod.loader.restore([["rows", blob]], 10))["results"]
    assert out["rows"].startswith("tampered")


def test_a_prefetched_tampered_blob_is_refused(store: CheckpointStore) -> None:
    ns: dict = {"a": {"k": 1}, "b": [2]}
    mod = _inkernel_module(store, ns)
    a, b = _saved(store, mod, ns, "a"), _saved(store, mod, ns, "b")
    _replace(store, a, b"\x80\x05N.")  # a valid pickle, not written under this project's key
    ns.clear()
    mod.loader.prefetch([a, b])
    out = json.loads(mod.loader.restore([["a", a], ["b", b], ["c", "0" * 64]], 10))["results"]
    assert out["a"].startswith("tampered") and "a" not in ns
    assert out["b"] == "ok" and ns["b"] == [2]
    assert out["c"].startswith("missing")


def test_discarded_prefetch_is_not_used(store: CheckpointStore) -> None:
    ns: dict = {"x": 41}
    mod = _inkernel_module(store, ns)
    blob = _saved(store, mod, ns, "x")
    mod.loader.prefetch([blob])
    mod.loader.discard()
    _replace(store, blob, b"\x80\x05N.")
    out = json.loads(mod.loader.restore([["x", blob]], 10))["results"]
    assert out["x"].startswith("tampered")


def test_a_value_changed_after_its_snapshot_is_saved_as_it_was(store: CheckpointStore) -> None:
    """Arrays are not copied by the snapshot step: the writer reads them from the live objects.
    Before user code runs again (``pre_run_cell``) ``freeze_live`` copies what is not written
    yet, so a change made right after the snapshot never reaches the blob."""
    import threading

    import numpy as np

    ns: dict = {"arr": np.arange(100_000, dtype="float64")}  # 800 KB: within the test limit
    mod = _inkernel_module(store, ns)
    gate = threading.Event()

    class HoldTheWriter:  # a job ahead of the snapshot keeps the writer from reading it yet
        def __iter__(self):  # type: ignore[no-untyped-def]
            gate.wait(10)
            return iter(())

    mod._jobs.put(
        ({"path": str(store.root / "ahead.json"), "manifest": {}}, HoldTheWriter(), {}, 0, None)
    )
    meta = {"path": str(store.root / "arr.json"), "manifest": {}}
    json.loads(mod.snapshot(json.dumps(meta), ["arr"]))
    mod.freeze_live()  # what the next cell's pre_run_cell does
    ns["arr"][:] = -1.0  # the next cell changes the array in place
    gate.set()
    assert json.loads(mod.flush(30))
    blob = str(store.read_manifest(store.root / "arr.json")["values"]["arr"]["blob"])
    ns.clear()
    assert json.loads(mod.loader.restore([["arr", blob]], 10))["results"] == {"arr": "ok"}
    assert (ns["arr"] == np.arange(100_000, dtype="float64")).all()


@pytest.mark.posix
def test_a_fifo_in_place_of_a_blob_is_refused_without_blocking(store: CheckpointStore) -> None:
    ns: dict = {"rows": list(range(1000))}
    mod = _inkernel_module(store, ns)
    blob = _saved(store, mod, ns, "rows")
    path = store.blob_path(blob)
    path.unlink()
    os.mkfifo(path, 0o600)  # opened for reading, it would wait for a writer forever
    ns.clear()
    out = json.loads(mod.loader.restore([["rows", blob]], 30.0))["results"]
    assert out["rows"].startswith("tampered: ") and "is not a regular file" in out["rows"]
    assert "rows" not in ns
