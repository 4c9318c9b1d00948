"""Manifests an SSH kernel sends back are stored only when the daemon asked for them."""

from __future__ import annotations

from pathlib import Path

from ipykeep.checkpoints import remote
from ipykeep.checkpoints.state import KernelCheckpoints
from ipykeep.checkpoints.store import CheckpointStore


def signed(store: CheckpointStore, seq: int | None, **extra: object) -> dict:
    return store.sign({"v": 1, "kind": "cell", "seq": seq, "values": {}, **extra})


def test_only_the_newest_issued_manifest_signed_with_the_key_is_written(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    st = KernelCheckpoints()
    path = store.cell_manifest_path(tmp_path / "n.ipynb", "c1")
    remote.issue(st, path, 1)
    remote.issue(st, path, 2)  # the cell ran again: the first snapshot is superseded
    elsewhere = tmp_path / "elsewhere.json"
    forged = signed(store, 2)
    forged["mac"] = "0" * 64
    sent = [
        [str(path), signed(store, 1)],
        [str(elsewhere), signed(store, 2)],
        [str(path), forged],
        ["bad"],
        None,
    ]
    assert remote.deliver(store, st, sent) == 0
    assert not path.exists() and not elsewhere.exists()
    assert remote.deliver(store, st, [[str(path), signed(store, 2, note="newest")]]) == 1
    assert store.read_manifest(path)["note"] == "newest"
    remote.withdraw(st, path)  # the cell failed: a snapshot still on its way is dropped
    assert remote.deliver(store, st, [[str(path), signed(store, 2, note="late")]]) == 0
    assert store.read_manifest(path)["note"] == "newest"


def test_named_checkpoints_have_no_seq(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    st = KernelCheckpoints()
    path = store.named_manifest_path(tmp_path / "n.ipynb", "before")
    remote.issue(st, path, None)
    assert (
        remote.deliver(
            store,
            st,
            [[str(path), store.sign({"v": 1, "kind": "named", "name": "before", "values": {}})]],
        )
        == 1
    )
    assert store.read_manifest(path)["name"] == "before"
