"""The memo index's cache of stored runs: bounded, and still right after letting runs go."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ipykeep.checkpoints.memo_runs import MemoIndex
from ipykeep.checkpoints.store import CheckpointStore
from ipykeep.staleness.hashing import source_hash


def _store_runs(store: CheckpointStore, source: str, runs: int) -> str:
    hashed = source_hash(source)
    for seq in range(runs):
        key = hashlib.sha256(f"{source}/{seq}".encode()).hexdigest()
        manifest = {
            "cell_id": "c1",
            "seq": seq,
            "source": source,
            "restorable": True,
            "memo": {"key": key, "source_hash": hashed, "reads": {}, "out": {}, "outputs": []},
        }
        store.write_manifest(store.memo_manifest_path(hashed, key), manifest)
    return hashed


def test_the_index_holds_at_most_its_budget_of_runs_and_rereads_the_rest(tmp_path: Path):
    store = CheckpointStore(tmp_path)
    sources = [_store_runs(store, f"y = data[:{i}]", 3) for i in range(40)]
    index = MemoIndex(store, cached_runs=10)
    for hashed in sources:
        assert len(index.lookup(hashed)) == 3
        assert index.cached <= 10
    # the first sources were let go; asking again reads them from the store, unchanged
    assert [e.source_hash for e in index.lookup(sources[0])] == [sources[0]] * 3
    assert index.cached <= 10
    # one source with more runs than the budget is still answered whole (and held alone)
    many = _store_runs(store, "total = sum(y)", 25)
    assert len(index.lookup(many)) == 25 and index.cached == 25
    assert len(index.lookup(sources[1])) == 3 and index.cached == 3


def test_a_looked_up_source_stays_while_others_come_and_go(tmp_path: Path):
    store = CheckpointStore(tmp_path)
    hot = _store_runs(store, "a = 1", 2)
    index = MemoIndex(store, cached_runs=6)
    for i in range(20):
        index.lookup(_store_runs(store, f"b = {i}", 2))
        index.lookup(hot)  # most recently used: never the one let go
        assert hot in index._kept
