"""Shared by the checkpoint service's modules: how to call the in-kernel writer and loader, and
what the service keeps per kernel."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipykeep.api.checkpoints import CellCheckpointInfo, RestoreReport
from ipykeep.checkpoints.cost import CheapCell
from ipykeep.checkpoints.limits import CollectSchedule
from ipykeep.engine.session import CellRun
from ipykeep.kernel.inkernel import CHECKPOINT, CHECKPOINT_LOAD

HIDDEN = ("<numpy.random>", "<random>")
SMALL_VALUE = 1 << 20
#: seconds a closing kernel waits for its checkpoint writer
FLUSH_ON_CLOSE_S = 15.0


def call(function: str, *args: Any) -> str:
    """An expression calling the in-kernel writer (``_inkernel/snapshot.py``)."""
    return CHECKPOINT.call(function, *args)


def call_loader(function: str, *args: Any) -> str:
    """An expression calling the in-kernel loader (``_inkernel/loading.py``)."""
    return CHECKPOINT_LOAD.call(function, *args)


@dataclass
class KernelCheckpoints:
    """Per kernel: whether checkpoints work there, and what the last ones did."""

    available: bool = False
    reason: str = ""
    cells: dict[str, CellCheckpointInfo] = field(default_factory=dict)
    last_restore: RestoreReport | None = None
    #: name -> (kernel generation, staleness tracker copy, cell runs copy) at checkpoint time
    named: dict[str, tuple[int, Any, dict[str, CellRun]]] = field(default_factory=dict)
    #: when the next snapshot calls for a collection of the store
    collect_schedule: CollectSchedule = field(default_factory=CollectSchedule)
    #: cells not checkpointed on purpose (see ``cost``), by id
    cheap: dict[str, CheapCell] = field(default_factory=dict)
    #: cell id -> seconds the kernel was held the last time its values were saved
    snapshot_s: dict[str, float] = field(default_factory=dict)
    #: cheap cells re-running during a restore -> the run order (``seq``) of the run they
    #: repeat: their new manifests keep it, so the next restore replays runs in the order they
    #: first happened (a re-run cheap cell is not "after" the cells restored from its values)
    keep_seq: dict[str, int] = field(default_factory=dict)
    #: the writer of cheap cells' manifests while it runs (it writes ``manifest_queue`` in order)
    manifest_write: asyncio.Task[None] | None = None
    #: the last cell's snapshot whose answer is awaited (``CheckpointService.batch_finished``)
    snapshot_reply: asyncio.Task[None] | None = None
    #: (path, manifest) waiting for the writer, oldest first
    manifest_queue: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    #: SSH kernels: the store directory on the host (None: the kernel shares the project's disk)
    remote_root: str | None = None
    #: SSH kernels: manifest path -> ``seq`` of the newest manifest asked of the kernel there
    remote_issued: dict[str, int | None] = field(default_factory=dict)
    pending_notice: str | None = None
    #: cell runs are memoized in this kernel (a local kernel with checkpoints)
    memo: bool = False
    #: (name, seq of the write in the staleness tracker) -> the version of the value it left
    #: (``memo.py``); a write absent here has none
    versions: dict[tuple[str, int], str] = field(default_factory=dict)
    #: cell id -> why its last run here got no memo key
    unkeyed: dict[str, str] = field(default_factory=dict)
    #: the tracker's writers when the running notebook cell started (its inputs' writes)
    before: dict[str, Any] | None = None
