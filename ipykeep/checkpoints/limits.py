"""Checkpoint limits (per value, per cell, per project, age) and the collector that keeps them.

A value over the per-value limit, or a cell whose values together exceed the per-cell limit,
is not checkpointed: that cell is marked not restorable and re-runs after a restart. The project
limit and the age limit are kept by ``collect``: manifests older than the age limit go first,
then blobs no manifest names, then, while the store is still over its limit, the least recently
used blobs (a blob's mtime is bumped whenever it is written again or loaded). A manifest naming
a collected blob is dropped with it, so a restore never plans on a value that is gone.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipykeep.checkpoints.store import CheckpointError, CheckpointStore

MB = 1024 * 1024

#: unreferenced blobs younger than this are kept: the kernel writes a cell's blobs before its
#: manifest, so a blob may briefly be named by no manifest yet
GRACE_S = 600.0


@dataclass(frozen=True)
class Limits:
    max_value_bytes: int
    max_cell_bytes: int
    max_project_bytes: int
    max_age_s: float
    #: seconds the kernel may spend pickling one cell's values (the rest is skipped)
    snapshot_budget_s: float
    #: bytes pickled but not yet written that the kernel may hold; past it a snapshot is dropped
    max_pending_bytes: int

    @classmethod
    def from_config(cls, config: Any) -> Limits:
        return cls(
            max_value_bytes=int(config.checkpoint_max_value_mb * MB),
            max_cell_bytes=int(config.checkpoint_max_cell_mb * MB),
            max_project_bytes=int(config.checkpoint_max_project_mb * MB),
            max_age_s=float(config.checkpoint_max_age_days) * 86400.0,
            snapshot_budget_s=float(config.checkpoint_snapshot_budget_s),
            max_pending_bytes=int(config.checkpoint_max_cell_mb * MB * 2),
        )


@dataclass(frozen=True)
class CollectReport:
    manifests_removed: int
    blobs_removed: int
    bytes_removed: int
    bytes_kept: int
    #: manifests the collection read (kept or removed): what the next one will cost
    manifests_read: int = 0


#: fewest manifests written between two collections of one kernel
COLLECT_EVERY = 25
#: the values saved since the last collection that call for one at once, as a fraction of the
#: project limit
COLLECT_BYTES_FRACTION = 16


@dataclass
class CollectSchedule:
    """Per kernel: when its snapshots call for a collection.

    A collection reads every manifest in the project, so one every fixed number of snapshots
    made a long notebook's run quadratic in its cells. It waits instead for as many new
    manifests as the last collection read (at least ``COLLECT_EVERY``), which keeps its cost per
    snapshot constant; values saved since the last one still call for it once they pass
    ``1/COLLECT_BYTES_FRACTION`` of the project limit, so the store's growth between two
    collections is bounded by bytes, not by a count of cells."""

    manifests: int = 0
    bytes: int = 0
    last_read: int = 0

    def note_snapshot(self, saved_bytes: int, max_project_bytes: int) -> bool:
        """Count one manifest written with ``saved_bytes`` of values; True: collect now."""
        self.manifests += 1
        self.bytes += saved_bytes
        due = self.manifests >= max(COLLECT_EVERY, self.last_read) or (
            self.bytes * COLLECT_BYTES_FRACTION >= max_project_bytes > 0
        )
        if due:
            self.manifests = self.bytes = 0
        return due

    def collected(self, report: CollectReport) -> None:
        self.last_read = report.manifests_read


def _referenced(manifest: dict[str, Any]) -> set[str]:
    return {
        v["blob"]
        for v in (manifest.get("values") or {}).values()
        if isinstance(v, dict) and "blob" in v
    }


def collect(store: CheckpointStore, limits: Limits, *, now: float | None = None) -> CollectReport:
    """Bring the store within its limits (see the module docstring for the order)."""
    now = time.time() if now is None else now
    manifests: dict[Path, set[str]] = {}
    removed_manifests = 0
    paths = list(store.all_manifest_paths())
    for path in paths:
        try:
            data = store.read_manifest(path)
        except CheckpointError:
            data = None  # unauthenticated manifests are useless: dropped
        if data is None or (
            limits.max_age_s > 0 and now - float(data.get("created", 0)) > limits.max_age_s
        ):
            with contextlib.suppress(OSError):
                path.unlink()
                removed_manifests += 1
            continue
        manifests[path] = _referenced(data)
    live = set().union(*manifests.values()) if manifests else set()
    blobs = sorted(store.iter_blobs(), key=lambda b: b.mtime)
    kept = []
    removed = removed_bytes = 0
    for b in blobs:
        if b.blob_id not in live and now - b.mtime > GRACE_S:
            with contextlib.suppress(OSError):
                b.path.unlink()
                removed += 1
                removed_bytes += b.size
            continue
        kept.append(b)
    total = sum(b.size for b in kept)
    gone: set[str] = set()
    for b in kept:  # least recently used first
        if total <= limits.max_project_bytes:
            break
        with contextlib.suppress(OSError):
            b.path.unlink()
            removed += 1
            removed_bytes += b.size
            total -= b.size
            gone.add(b.blob_id)
    if gone:
        for path, refs in manifests.items():
            if refs & gone:
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed_manifests += 1
    return CollectReport(removed_manifests, removed, removed_bytes, total, len(paths))
