"""The checkpoint store: authentication, poisoning, limits and collection (pure, no kernel)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from ipykeep.checkpoints import planning
from ipykeep.checkpoints.limits import (
    COLLECT_BYTES_FRACTION,
    COLLECT_EVERY,
    GRACE_S,
    CollectReport,
    CollectSchedule,
    Limits,
    collect,
)
from ipykeep.checkpoints.store import CheckpointError, CheckpointStore, TamperedCheckpointError
from ipykeep.staleness.models import Observed


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def store(tmp_path: Path) -> CheckpointStore:
    return CheckpointStore(tmp_path / ".ipykeep")


@pytest.mark.posix
def test_key_and_blobs_are_private(store: CheckpointStore) -> None:
    blob = store.put_blob(b"hello")
    assert mode(store.key_path) == 0o600
    assert mode(store.root) == 0o700
    assert mode(store.blob_path(blob)) == 0o600
    assert mode(store.blob_path(blob).parent) == 0o700
    assert store.get_blob(blob) == b"hello"
    assert store.put_blob(b"hello") == blob  # content-addressed: written once


def test_tampered_blob_is_refused_and_quarantined(store: CheckpointStore) -> None:
    blob = store.put_blob(b"payload")
    store.blob_path(blob).write_bytes(b"paylOad")
    with pytest.raises(
        TamperedCheckpointError, match="does not authenticate.*refusing to unpickle"
    ):
        store.get_blob(blob)
    assert not store.blob_path(blob).exists() and (store.root / "quarantine" / blob).exists()
    assert store.put_blob(b"payload") == blob  # the true bytes, written again, load
    assert store.get_blob(blob) == b"payload"


def test_poisoned_blob_is_never_loaded_again(store: CheckpointStore) -> None:
    blob = store.put_blob(b"authentic but unloadable")
    store.mark_poisoned(blob, "load_failed: ModuleNotFoundError")
    with pytest.raises(TamperedCheckpointError, match="poisoned"):
        store.get_blob(blob)


def test_blob_from_another_project_is_refused(tmp_path: Path, store: CheckpointStore) -> None:
    other = CheckpointStore(tmp_path / "other" / ".ipykeep")
    foreign = other.put_blob(b"not ours")
    target = store.blob_path(foreign)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not ours")
    with pytest.raises(TamperedCheckpointError):
        store.get_blob(foreign)


def test_bad_blob_id_and_name(store: CheckpointStore) -> None:
    with pytest.raises(TamperedCheckpointError, match="not a checkpoint blob id"):
        store.blob_path("../../etc/passwd")
    with pytest.raises(CheckpointError, match="not a checkpoint name"):
        store.named_manifest_path(Path("/nb.ipynb"), "../x")


def test_manifest_mac(store: CheckpointStore, tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    store.write_manifest(path, {"cell_id": "a", "values": {}})
    assert store.read_manifest(path)["cell_id"] == "a"
    data = json.loads(path.read_text())
    data["cell_id"] = "b"
    path.write_text(json.dumps(data))
    with pytest.raises(TamperedCheckpointError, match="does not authenticate"):
        store.read_manifest(path)
    good, bad = store.manifests(tmp_path)
    assert good == [] and len(bad) == 1


@pytest.mark.posix
def test_key_readable_by_others_is_an_error(store: CheckpointStore) -> None:
    store.put_blob(b"x")
    os.chmod(store.key_path, 0o644)
    with pytest.raises(CheckpointError, match="readable by other users"):
        _ = CheckpointStore(store.root.parent).key


def _limits(project: int = 10**9, age: float = 1e9) -> Limits:
    return Limits(
        max_value_bytes=10**9,
        max_cell_bytes=10**9,
        max_project_bytes=project,
        max_age_s=age,
        snapshot_budget_s=10,
        max_pending_bytes=10**9,
    )


def _manifest(store: CheckpointStore, name: str, blobs: dict[str, str], created: float) -> Path:
    path = store.root / "notebooks" / "nb" / "cells" / f"{name}.json"
    store.write_manifest(
        path,
        {
            "cell_id": name,
            "created": created,
            "values": {n: {"blob": b, "size": 1} for n, b in blobs.items()},
        },
    )
    return path


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_collect_age_unreferenced_and_lru(store: CheckpointStore) -> None:
    now = time.time()
    old_blob = store.put_blob(b"o" * 100)
    orphan = store.put_blob(b"u" * 100)
    young_orphan = store.put_blob(b"y" * 100)
    a = store.put_blob(b"a" * 1000)
    b = store.put_blob(b"b" * 1000)
    m_old = _manifest(store, "old", {"x": old_blob}, created=now - 100 * 86400)
    m_a = _manifest(store, "a", {"x": a}, created=now)
    m_b = _manifest(store, "b", {"y": b}, created=now)
    for blob in (old_blob, orphan):
        _age(store.blob_path(blob), GRACE_S + 10)
    _age(store.blob_path(a), 50)  # a is the least recently used of the live blobs
    rep = collect(store, _limits(project=1500, age=30 * 86400), now=now)
    assert not m_old.exists()  # too old
    assert not store.blob_path(old_blob).exists() and not store.blob_path(orphan).exists()
    assert store.blob_path(young_orphan).exists()  # may belong to a manifest being written
    assert not store.blob_path(a).exists() and not m_a.exists()  # evicted with its manifest
    assert store.blob_path(b).exists() and m_b.exists()
    assert rep.bytes_kept <= 1500
    assert rep.manifests_read == 3  # the old one too: it was read before it was dropped


def test_collections_read_each_manifest_a_bounded_number_of_times(
    store: CheckpointStore,
) -> None:
    """One kernel's snapshots of a long notebook: every snapshot adds a manifest, every
    collection reads all of them. The manifests read in all stay proportional to the
    snapshots (a collection every 25 snapshots read ~n²/50 of them: 80,000 for 2,000 cells)."""
    schedule = CollectSchedule()
    now = time.time()
    read = 0
    collected_at = []
    for i in range(1, 2001):
        _manifest(store, f"c{i:04d}", {}, created=now)
        if schedule.note_snapshot(0, 10**9):
            report = collect(store, _limits(), now=now)
            schedule.collected(report)
            read += report.manifests_read
            collected_at.append(i)
    assert read <= 2 * 2000, (collected_at, read)
    # and it keeps collecting: at least once each time the store doubles
    assert collected_at[0] == COLLECT_EVERY
    assert all(b <= 2 * a for a, b in itertools.pairwise(collected_at + [2000]))


def test_saved_values_call_for_a_collection_before_the_count_does() -> None:
    schedule = CollectSchedule()
    schedule.collected(collect_report(manifests_read=10_000))
    limit = 1600
    assert not any(schedule.note_snapshot(0, limit) for _ in range(COLLECT_EVERY * 10))
    slice_ = limit // COLLECT_BYTES_FRACTION
    assert not schedule.note_snapshot(slice_ - 1, limit)
    assert schedule.note_snapshot(1, limit)  # the values since the last collection pass 1/16
    assert not schedule.note_snapshot(slice_ - 1, limit)  # counted afresh after it


def collect_report(manifests_read: int) -> CollectReport:
    return CollectReport(0, 0, 0, 0, manifests_read)


INKERNEL = Path(__file__).resolve().parents[2] / "ipykeep" / "checkpoints" / "_inkernel"


def _load_inkernel(name: str):  # type: ignore[no-untyped-def]
    """snapshot.py as a kernel gets it (its blob and fork modules installed first under their
    kernel names), with loading.py as ``.loader``."""
    for kernel_name, file in (
        ("_ipykeep_ckpt_blob", "blobfmt.py"),
        ("_ipykeep_ckpt_fork", "forked.py"),
    ):
        if kernel_name not in sys.modules:
            spec = importlib.util.spec_from_file_location(kernel_name, INKERNEL / file)
            assert spec is not None and spec.loader is not None
            required = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(required)
            sys.modules[kernel_name] = required
    spec = importlib.util.spec_from_file_location(name, INKERNEL / "snapshot.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # the loader finds its writer module under the kernel's name, as in a kernel
    saved = sys.modules.get("_ipykeep_ckpt")
    sys.modules["_ipykeep_ckpt"] = mod
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_load", INKERNEL / "loading.py")
        assert spec is not None and spec.loader is not None
        mod.loader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod.loader)
    finally:
        if saved is None:
            del sys.modules["_ipykeep_ckpt"]
        else:
            sys.modules["_ipykeep_ckpt"] = saved
    return mod


def test_inkernel_writer_agrees_with_store(store: CheckpointStore, tmp_path: Path) -> None:
    """The in-kernel module (standard library + cloudpickle) writes what the store reads."""
    mod = _load_inkernel("_ipykeep_ckpt_test")
    import numpy as np

    arr = np.arange(300, dtype="int64").reshape(30, 10)[:, ::2]  # not contiguous: pickled in-band
    ns: dict = {
        "df": {"a": [1, 2]},
        "gen": (i for i in range(3)),
        "big": b"x" * 5000,
        "f": lambda v: v + 1,
        "arr": np.arange(400, dtype="int64"),
        "view": arr,
    }
    mod._ns = lambda: (ns, None)
    _ = store.key  # created on first use
    conf = json.loads(
        mod.configure(str(store.root), str(store.key_path), 4096, 10**6, 10**7, 10.0, [], [])
    )
    assert conf["available"]
    path = store.cell_manifest_path(Path("/p/nb.ipynb"), "c1")
    meta = {
        "path": str(path),
        "manifest": {"cell_id": "c1", "seq": 1, "source": "", "observed": {}},
    }
    reply = json.loads(mod.snapshot(json.dumps(meta), ["df", "gen", "big", "f", "arr", "view"]))
    assert set(reply["sizes"]) == {"df", "f", "arr", "view"}
    assert "cannot be pickled" in reply["failed"]["gen"]
    assert "per-value checkpoint limit" in reply["failed"]["big"]
    assert reply["seconds"] < 10
    assert json.loads(mod.flush(10))
    manifest = store.read_manifest(path)
    assert manifest["restorable"] is False and set(manifest["values"]) == {"df", "f", "arr", "view"}
    for v in manifest["values"].values():
        store.get_blob(v["blob"])  # authenticates on the host side
    ns.clear()
    out = json.loads(
        mod.loader.restore([[n, v["blob"]] for n, v in manifest["values"].items()], 10)
    )["results"]
    assert set(out.values()) == {"ok"} and ns["df"] == {"a": [1, 2]} and ns["f"](1) == 2
    assert (ns["arr"] == np.arange(400)).all() and (ns["view"] == arr).all()
    ns["arr"][0] = 7  # arrays loaded over the blob's bytes are ordinary, writable arrays
    blob = manifest["values"]["df"]["blob"]
    store.blob_path(blob).write_bytes(b"\x80\x05N.")  # a valid pickle, but not ours
    assert json.loads(mod.loader.verify([blob]))[blob].startswith("tampered")
    out = json.loads(mod.loader.restore([["df", blob]], 10))["results"]
    assert out["df"].startswith("tampered")


def _cp(
    cid: str,
    seq: int,
    values: dict[str, str],
    writes: set[str] | None = None,
    deleted: set[str] = frozenset(),
    inputs: dict[str, str] | None = None,
) -> planning.CellCheckpoint:  # type: ignore[assignment]
    return planning.CellCheckpoint(
        cell_id=cid,
        seq=seq,
        index=seq,
        source="",
        duration=1.0,
        files=(),
        written=(),
        observed=Observed(),
        writes=frozenset(writes if writes is not None else values),
        deleted=frozenset(deleted),
        values=values,
        cheap=inputs is not None,
        inputs=inputs or {},
    )


def test_final_values_and_cowriters() -> None:
    a = _cp("a", 1, {"df": "1", "n": "2"})
    b = _cp("b", 2, {"df": "3"})  # mutated df
    c = _cp("c", 3, {"m": "4"}, deleted={"n"})
    assert planning.final_values([a, b, c]) == {"df": ("b", "3"), "m": ("c", "4")}
    assert [cp.cell_id for cp in planning.drop_with_cowriters([a, b, c], {"b"})] == ["c"]
    assert [cp.cell_id for cp in planning.drop_with_cowriters([a, b, c], {"c"})] == ["a", "b"]


def test_cheap_readers_of_saved_values_rerun_after_the_loads_in_run_order() -> None:
    """``inputs`` given: a cheap cell (no values). Early cheap cells re-run before the loads;
    late ones (reading a saved value, directly or through late cells) after them."""
    imp = _cp("imp", 1, {}, {"np"}, inputs={})
    a = _cp("a", 2, {"x": "1"})
    b = _cp("b", 3, {}, {"y"}, inputs={"x": "a", "np": "imp"})
    c = _cp("c", 4, {}, {"z"}, inputs={"y": "b"})
    d = _cp("d", 5, {"w": "2"})
    cps = [imp, a, b, c, d]
    late = planning.rerun_after_loads(cps)
    assert late == {"b", "c"}
    assert planning.late_cells_out_of_order(cps, late, stale=set()) == set()
    # a late cell's writes are not loaded (its re-run after the loads makes them)
    assert planning.final_values(cps, late) == {"x": ("a", "1"), "w": ("d", "2")}
    # stale upstream: not re-run on restore, so neither are its late readers
    assert planning.late_cells_out_of_order(cps, late, stale={"a"}) == {"b", "c"}


def test_a_late_cell_that_would_not_repeat_its_run_is_left_to_the_plan() -> None:
    a = _cp("a", 1, {"x": "1"})
    b = _cp("b", 2, {}, {"y"}, inputs={"x": "a"})
    c = _cp("c", 3, {}, {"v"}, inputs={"y": "b"})
    rebinds_x = _cp("e", 4, {}, {"x"}, inputs={})  # a cheap cell, re-run before the loads
    late = planning.rerun_after_loads([a, b, c, rebinds_x])
    assert late == {"b", "c"}
    # b would read e's x, and c b's y, which b no longer makes
    assert planning.late_cells_out_of_order([a, b, c, rebinds_x], late, set()) == {"b", "c"}
    # a saved cell writing y after b: b's re-run would undo it
    overwrites_y = _cp("f", 4, {"y": "2"})
    assert planning.late_cells_out_of_order([a, b, c, overwrites_y], late, set()) == {"b", "c"}
    # a value its writer did not save (it failed to pickle) is not there to read
    unsaved = _cp("a", 1, {}, {"x"})
    assert planning.late_cells_out_of_order([unsaved, b, c], late, set()) == {"b", "c"}
    # a writer with no checkpoint at all makes its reader late, and out of order
    orphan = _cp("g", 5, {}, {"u"}, inputs={"x": "gone"})
    assert planning.rerun_after_loads([orphan]) == {"g"}
    assert planning.late_cells_out_of_order([orphan], frozenset({"g"}), set()) == {"g"}


def _inkernel_module(store: CheckpointStore, ns: dict, **conf: object):  # type: ignore[no-untyped-def]
    mod = _load_inkernel("_ipykeep_ckpt_test2")
    mod._ns = lambda: (ns, None)
    _ = store.key
    mod.configure(
        str(store.root),
        str(store.key_path),
        10**6,
        10**6,
        10**7,
        10.0,
        conf.get("names", []),
        conf.get("types", []),
    )
    return mod


def test_excluded_names_and_types_are_not_saved(store: CheckpointStore) -> None:
    import threading

    ns = {"conn": object(), "lock": threading.Lock(), "x": 1}
    mod = _inkernel_module(store, ns, names=["conn"], types=["_thread.lock"])
    meta = {"path": str(store.root / "m.json"), "manifest": {}}
    reply = json.loads(mod.snapshot(json.dumps(meta), ["conn", "lock", "x"]))
    assert set(reply["sizes"]) == {"x"}
    assert "checkpoint_exclude_names" in reply["failed"]["conn"]
    assert "checkpoint_exclude_types" in reply["failed"]["lock"]


def test_authentic_blob_that_fails_to_load_is_reported(store: CheckpointStore) -> None:
    ns: dict = {}
    mod = _inkernel_module(store, ns)
    stream = b"\x80\x05cnonexistent_module_for_test\nThing\n."  # a class that is gone
    data = mod.MAGIC + (1).to_bytes(4, "little") + len(stream).to_bytes(8, "little") + stream
    blob = store.put_blob(data)  # written with the project's key: authentic
    out = json.loads(mod.loader.restore([["thing", blob]], 10))["results"]
    assert out["thing"].startswith("load_failed: ModuleNotFoundError") and "thing" not in ns


def test_restore_stops_at_its_deadline(store: CheckpointStore) -> None:
    ns: dict = {"a": [1, 2, 3]}
    mod = _inkernel_module(store, ns)
    meta = {"path": str(store.root / "m.json"), "manifest": {}}
    json.loads(mod.snapshot(json.dumps(meta), ["a"]))
    assert json.loads(mod.flush(10))
    blob = store.read_manifest(store.root / "m.json")["values"]["a"]["blob"]
    ns.clear()
    out = json.loads(mod.loader.restore([["a", blob]], -1))["results"]
    assert out["a"].startswith("deadline:") and "a" not in ns


def test_aliases_group_names_whose_later_save_saw_them_share() -> None:
    # b = a (b saved later, saw a): one object; the latest save is the one loaded
    assert planning.aliases({"b": ["a"]}, {"a": 1, "b": 2}) == {"a": "b"}
    # a saved after b, but only b's save saw them share: a was rebound since (its save is later)
    assert planning.aliases({"b": ["a"]}, {"a": 3, "b": 2}) == {}
    # a name not being loaded is not bound to anything
    assert planning.aliases({"b": ["a", "gone"]}, {"a": 1, "b": 1}) == {"a": "b"}
    # chains make one group, loading the value saved last
    assert planning.aliases({"b": ["a"], "c": ["b"]}, {"a": 1, "b": 2, "c": 3}) == {
        "a": "c",
        "b": "c",
    }
    assert planning.aliases({}, {"a": 1}) == {}


def test_the_tracers_evidence_round_trips_through_a_manifest_and_is_replayed() -> None:
    from ipykeep.staleness import StalenessTracker
    from ipykeep.staleness.models import DynamicCellInfo

    dynamic = DynamicCellInfo(
        "c2",
        defined=frozenset({"y"}),
        used=frozenset({"x", "statsmodels"}),
        parents={"c1": frozenset({"x"})},
    )
    manifest = {
        "cell_id": "c2",
        "seq": 2,
        "index": 1,
        "source": "y = x + 1",
        "restorable": True,
        "writes": ["y"],
        "observed": planning.observed_json(Observed(bound=frozenset({"y"}))),
        "dynamic": planning.dynamic_json(dynamic),
    }
    cp = planning.CellCheckpoint.from_manifest(json.loads(json.dumps(manifest)))
    assert cp.dynamic == dynamic
    tracker = StalenessTracker()
    planning.replay(tracker, [cp])
    assert tracker.run_dynamic("c2") == dynamic
    # a manifest written without a tracer has none
    assert planning.CellCheckpoint.from_manifest({**manifest, "dynamic": None}).dynamic is None
