"""One kernel as the engine owns it: its process and archive, its scheduler, and the typed state
each collaborator keeps about it (staleness, plan measurements, hosting).

Every piece of per-kernel state has a named, typed field here; collaborators read and write
their own part (``session.staleness`` belongs to the staleness service, ``session.hosting`` to
the serving service) and reach the rest through the engine's public methods.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ipykeep.api.records import WarmProgress
from ipykeep.engine.archive import KernelArchive
from ipykeep.kernel.driver import KernelProcess
from ipykeep.kernel.execution import Execution
from ipykeep.project.config import Config
from ipykeep.staleness import StalenessTracker

SessionState = Literal["starting", "warming", "idle", "dead"]


@dataclass
class CellRun:
    """What the registry remembers of a notebook cell's latest execution."""

    handle: str
    source: str
    state: str
    execution_count: int | None
    index: int


@dataclass
class Scheduler:
    """Who may use the kernel's main shell: notebook batches and stale plans take ``main_lock``
    in order; scratch code waiting for it is counted in ``queued`` (bounded by ``max_queue``);
    ``tasks`` keeps background scratch runs alive until they end."""

    main_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    queued: int = 0
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task


@dataclass
class StalenessState:
    """The staleness service's part: the tracker and the directory watcher."""

    tracker: StalenessTracker = field(default_factory=StalenessTracker)
    watch_task: asyncio.Task[Any] | None = None
    #: a remote kernel's stat poll (``core/remote_stat.py``), in place of watched directories
    poll_task: asyncio.Task[Any] | None = None
    #: set to restart the watcher with a directory it does not watch yet
    watch_restart: asyncio.Event | None = None
    #: directories of the files cells read (watched besides the notebook's directory)
    read_dirs: set[str] = field(default_factory=set)
    #: a remote kernel's file stamps as last stat'ed through it, by the path asked for
    remote_stamps: dict[str, Any] = field(default_factory=dict)
    #: warm-up runs untraced under ipyflow (``warm_tracing = false``)
    untraced: bool = False


@dataclass(frozen=True)
class PlanProgress:
    """The batch being executed by ``run_stale`` (``plan_progress`` reads it)."""

    progress: WarmProgress
    cell_ids: tuple[str, ...]
    #: the durations the remaining-time estimate uses
    durations: dict[str, float]
    started: float


@dataclass
class PlanMeasurements:
    """What running the notebook costs in this kernel (see ``core.plan_runs``)."""

    #: seconds the last kernel start took, probes included
    restart_s: float | None = None
    #: each cell's duration in the last top-to-bottom run from a new kernel
    fresh_durations: dict[str, float] = field(default_factory=dict)
    #: a ``run_stale(fresh=True)`` batch is running
    fresh_run: bool = False
    progress: PlanProgress | None = None


@dataclass
class HostingState:
    """The serving service's part: what a Jupyter server shows of this kernel."""

    served_url: str | None = None
    published: bool = False
    #: executions other clients (a browser) run, by the msg_id of their request
    browser_runs: dict[str, Execution] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.served_url is not None or self.published


@dataclass
class WriteBackState:
    """Outputs waiting to be merged into the notebook (``core.writeback``): the latest of each
    cell, a timer that writes them within ``write_delay_ms``, and the lock that keeps writes of
    one notebook in order."""

    #: cell id -> CellOutputs (``core.notebook``); a newer run of a cell replaces its entry
    pending: dict[str, Any] = field(default_factory=dict)
    timer: asyncio.Task[Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class KernelSession:
    kernel_id: str
    process: KernelProcess
    notebook: Path | None
    cwd: Path
    config: Config
    archive: KernelArchive
    created_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    state: SessionState = "starting"
    closed: bool = False
    executions: dict[str, Execution] = field(default_factory=dict)
    cell_runs: dict[str, CellRun] = field(default_factory=dict)
    #: request_id -> (code, handle), so a retried call returns the first execution
    request_ids: dict[str, tuple[str, str]] = field(default_factory=dict)
    scheduler: Scheduler = field(default_factory=Scheduler)
    notices: list[str] = field(default_factory=list)
    warm: WarmProgress | None = None
    warm_task: asyncio.Task[Any] | None = None
    #: content hashes of the notebook as ipykeep wrote it (the watcher ignores those)
    own_writes: set[str] = field(default_factory=set)
    staleness: StalenessState = field(default_factory=StalenessState)
    plan: PlanMeasurements = field(default_factory=PlanMeasurements)
    hosting: HostingState = field(default_factory=HostingState)
    writes: WriteBackState = field(default_factory=WriteBackState)

    def touch(self) -> None:
        self.last_activity = time.time()

    def running(self) -> list[str]:
        return [h for h, ex in self.executions.items() if ex.state in ("running", "queued")]

    def take_notices(self) -> list[str] | None:
        if not self.notices:
            return None
        out, self.notices = self.notices, []
        return out

    def notice_once(self, note: str) -> None:
        if note not in self.notices:
            self.notices.append(note)
