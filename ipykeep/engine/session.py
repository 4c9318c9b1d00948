"""One kernel as the engine owns it: its process and archive, its scheduler, its cell records,
and a typed slot for each feature's own per-kernel state.

The engine's state has named, typed fields here. A feature's state is a dataclass of the
feature's package, reached as ``session.features.of(StateClass)``: one pattern for every
feature, and no import from the engine into a feature.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

from ipykeep.api.errors import KernelBusyError
from ipykeep.api.records import EnvironmentInfo, WarmProgress
from ipykeep.engine.archive import KernelArchive
from ipykeep.engine.retention import OutputRetention, restored
from ipykeep.kernel.driver import KernelProcess
from ipykeep.kernel.execution import Execution
from ipykeep.project.config import Config

SessionState = Literal["starting", "warming", "idle", "dead"]

#: ipykeep's latest notebook writes whose content the watcher takes as its own: it reads the
#: file moments after a write, so a few are enough, and a session writes the notebook on most
#: calls (one hash each, kept for the kernel's life before)
OWN_WRITES_KEPT = 64

#: request ids a kernel answers a retry for: the latest ones (a retry follows its call closely),
#: each kept with a digest of its code rather than the code
REQUEST_IDS_KEPT = 1000
FeatureState = TypeVar("FeatureState")


class FeatureStates:
    """Each feature's own state about one kernel, keyed by the feature's state class.

    A feature (staleness, checkpoints, serving) declares a dataclass for what it keeps per
    kernel and reaches it with ``session.features.of(ThatClass)``, made on first use; the
    session knows none of those classes, so the engine imports no feature.
    """

    def __init__(self) -> None:
        self._parts: dict[type[Any], Any] = {}

    def of(self, kind: type[FeatureState]) -> FeatureState:
        part = self._parts.get(kind)
        if part is None:
            part = self._parts[kind] = kind()
        return cast(FeatureState, part)


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


class LiveDocument(Protocol):
    """The served notebook as the Jupyter server's shared document (``serve/document.py``):
    what the browsers and ipykeep both edit, saved to the file by the server."""

    async def read_cells(self) -> list[dict[str, Any]]:
        """The live cells: ``id``, ``cell_type``, ``source``, ``tags`` (unsaved typing in), and
        ``conflict`` on a note cell of a file write the server could not merge."""
        ...

    async def edit(self, edit: dict[str, Any]) -> dict[str, Any]:
        """Apply one versioned cell edit (``project/cell_edits.py: CellEdit`` fields)."""
        ...

    async def write_outputs(self, updates: dict[str, Any]) -> dict[str, list[str]]:
        """Outputs by cell id (``CellOutputs``): ``updated`` and ``skipped_edited`` cell ids."""
        ...


@dataclass
class HostingState:
    """Whether a Jupyter server shows this kernel (the serving service sets it): idle expiry
    spares a hosted kernel, and the kernel's record carries its URL. ``document`` is set while
    the served notebook is a shared document of the server: ipykeep's edits and outputs go
    there instead of the file."""

    served_url: str | None = None
    published: bool = False
    document: LiveDocument | None = None
    #: note cells of merge conflicts in the shared document the agent has been told about
    conflicts_told: set[str] = field(default_factory=set)

    @property
    def active(self) -> bool:
        return self.served_url is not None or self.published


@dataclass
class WriteBackState:
    """Outputs waiting to be merged into the notebook (``engine/writeback.py``): the latest of each
    cell, a timer that writes them within ``write_delay_ms``, and the lock that keeps writes of
    one notebook in order."""

    #: cell id -> CellOutputs (``project/notebook.py``); a newer run of a cell replaces its entry
    pending: dict[str, Any] = field(default_factory=dict)
    timer: asyncio.Task[Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def code_digest(code: str) -> bytes:
    """What a retry's code is compared by (``KernelSession.request_ids``)."""
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).digest()


@dataclass
class KernelSession:
    kernel_id: str
    process: KernelProcess
    notebook: Path | None
    cwd: Path
    config: Config
    archive: KernelArchive
    #: the environment the kernel runs in, and which rule chose it
    environment: EnvironmentInfo | None = None
    created_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    state: SessionState = "starting"
    closed: bool = False
    executions: dict[str, Execution] = field(default_factory=dict)
    #: which finished executions still hold their outputs in memory (``retention.py``)
    retention: OutputRetention = field(default_factory=OutputRetention)
    cell_runs: dict[str, CellRun] = field(default_factory=dict)
    #: request_id -> (digest of its code, handle), so a retried call returns the first
    #: execution (``remember_request``)
    request_ids: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    scheduler: Scheduler = field(default_factory=Scheduler)
    notices: list[str] = field(default_factory=list)
    #: reader -> the pending notices its kernel records already showed (see ``peek_notices``)
    notices_shown: dict[str, set[str]] = field(default_factory=dict)
    warm: WarmProgress | None = None
    warm_task: asyncio.Task[Any] | None = None
    #: content hashes of the notebook as ipykeep last wrote it (the watcher ignores those)
    own_writes: deque[str] = field(default_factory=lambda: deque(maxlen=OWN_WRITES_KEPT))
    hosting: HostingState = field(default_factory=HostingState)
    features: FeatureStates = field(default_factory=FeatureStates)
    writes: WriteBackState = field(default_factory=WriteBackState)

    def retain(self, executions: list[Execution]) -> None:
        """Finished, archived ``executions`` count against the kernel's output budget."""
        archived = [ex for ex in executions if ex.handle in self.archive.offsets]
        mb = self.config.kept_outputs_mb
        self.retention.keep(archived, self.config.kept_outputs, mb * 1_000_000)
        self.retention.forget(self.executions, lambda: {r.handle for r in self.cell_runs.values()})

    def execution(self, handle: str) -> Execution | None:
        """The execution ``handle`` of this kernel: in memory, or rebuilt from the archive when
        its record has left memory (``retention.py``); None when the kernel never ran it."""
        found = self.executions.get(handle)
        if found is None and handle in self.archive.offsets:
            found = restored(self.archive, self.kernel_id, handle)
        return found

    def remember_request(self, request_id: str, code: str, handle: str) -> None:
        """Answer a retry of ``request_id`` with ``handle``, among the latest
        ``REQUEST_IDS_KEPT`` request ids."""
        self.request_ids[request_id] = (code_digest(code), handle)
        while len(self.request_ids) > REQUEST_IDS_KEPT:
            del self.request_ids[next(iter(self.request_ids))]

    def touch(self) -> None:
        self.last_activity = time.time()

    def running(self) -> list[str]:
        return [h for h, ex in self.executions.items() if ex.state in ("running", "queued")]

    async def side_subshell(self) -> str | None:
        """A subshell for a short side call (inspection, the debugger) while the main shell is
        taken or anything runs; None when the main shell is free. The caller releases it."""
        if not (self.scheduler.main_lock.locked() or self.running()):
            return None
        subshell = await self.process.acquire_subshell(self.config.max_subshells)
        if subshell is None:
            raise KernelBusyError(
                f"kernel {self.kernel_id} is busy and every subshell is in use",
                hint="retry when a running execution finishes",
            )
        return subshell

    def take_notices(self, reader: str | None = None) -> list[str] | None:
        """The pending notices, now taken; a ``reader`` is not told again what its kernel
        records already showed it."""
        if not self.notices:
            return None
        shown = self.notices_shown.get(reader, set()) if reader is not None else set()
        out = [n for n in self.notices if n not in shown] or None
        self.notices = []
        # Taken: nothing is pending, so an identical later notice is a new event for everyone.
        self.notices_shown.clear()
        return out

    def peek_notices(self, reader: str | None = None) -> list[str] | None:
        """The pending notices, left pending; a ``reader`` gets each one once (a person
        polling ``status`` is not told the same thing on every call)."""
        if reader is None:
            return list(self.notices) or None
        shown = self.notices_shown.setdefault(reader, set())
        fresh = [n for n in self.notices if n not in shown]
        shown.update(fresh)
        return fresh or None

    def notice_once(self, note: str) -> None:
        if note not in self.notices:
            self.notices.append(note)
