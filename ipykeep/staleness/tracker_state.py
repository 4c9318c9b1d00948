"""The staleness tracker's data: the record of one kernel's runs and writes, and plan drafts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ipykeep.staleness.analysis_model import FunctionInfo
from ipykeep.staleness.graph import Graph
from ipykeep.staleness.models import (
    REASON_ORDER,
    DynamicCellInfo,
    FileStamp,
    Observed,
    Outcome,
    Reason,
)
from ipykeep.staleness.process_state import GENERATORS

#: path -> the file now, or None when it does not exist. The stamp's ``path`` names the file the
#: way the run-time read hook does (absolute, normalized), whatever form the argument had.
StatFn = Callable[[str], "FileStamp | None"]
Origin = Literal["cell", "scratch", "browser"]

#: how a producer's state is described in a dependent's ``upstream`` message
_CAUSE_WORDS = {
    "never_run": "never run",
    "kernel_restarted": "lost in the kernel restart",
    "source_changed": "edited",
    "failed": "failed",
    "file_changed": "its input file changed",
    "moved": "moved",
    "upstream": "stale",
    "state_changed": "stale",
    "restores": "re-run to restore a value",
}


@dataclass(frozen=True)
class NameWrite:
    """One write of a name in the kernel: by a notebook cell's run, or by scratch code."""

    origin: Origin
    cell_id: str | None
    seq: int
    #: identifies the value written: a run that only restores a clobbered value (same source,
    #: same inputs) keeps the version of the run it repeats, so its readers stay fresh
    version: int
    #: the kernel observed what the code changed (so a value behind an alias that changed
    #: would show as a write of its own)
    evidence: bool = False


@dataclass(frozen=True)
class RunRecord:
    """A notebook cell's last run: what it ran, on which inputs, and what it left."""

    cell_id: str
    seq: int
    version: int
    index: int
    epoch: int
    source_hash: str
    outcome: Outcome
    files: Mapping[str, FileStamp]
    #: for each name read: the write it saw (None when nothing had written it)
    reads: Mapping[str, NameWrite | None]
    dynamic: DynamicCellInfo | None
    #: files the run wrote (or names as written by a call), as ``stat`` names them
    written: frozenset[str] = frozenset()
    #: what the kernel saw the run do to its namespace (None: no evidence)
    observed: Observed | None = None
    #: names bound by import statements -> what they import, in the source that ran
    imports: Mapping[str, str] = field(default_factory=dict)
    #: per name written: the version of the value (kept from the previous run when the kernel
    #: saw the name rebound to an equal value, so its readers stay fresh)
    versions: Mapping[str, int] = field(default_factory=dict)
    #: ``hashing.effect_hash`` of the source that ran: an edit keeping it only changed what
    #: the cell shows, so its readers re-run only if its values come out different
    effect_hash: str | None = None
    #: how a failed run raised (``ModuleNotFoundError: No module named 'x'``)
    error: str | None = None
    #: ``TrackerState.environment`` when it ran: packages installed since may make a failed
    #: run succeed
    environment: int = 0

    def version_of(self, name: str) -> int:
        return self.versions.get(name, self.version)


@dataclass
class TrackerState:
    """What the tracker knows of one kernel: the events write it, the plan passes read it."""

    #: counts the runs (notebook cells and scratch code) in the order they happened
    seq: int = 0
    #: counts kernel restarts: a run from an earlier epoch left nothing in the kernel
    epoch: int = 0
    #: cell id -> its last run
    runs: dict[str, RunRecord] = field(default_factory=dict)
    #: name -> the kernel's latest write of it
    writers: dict[str, NameWrite] = field(default_factory=dict)
    #: functions the kernel holds, by name, for what their calls read and mutate
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    #: files registered as inputs of the notebook -> their stamp when registered
    watched: dict[str, FileStamp] = field(default_factory=dict)
    #: (name, digest) of a hidden state (``<numpy.random>``) -> the version standing for it
    state_versions: dict[tuple[str, str], int] = field(default_factory=dict)
    #: counts the changes of the kernel's environment (packages installed)
    environment: int = 0


@dataclass
class CellDraft:
    """Reasons collected for one cell while a plan is computed."""

    reasons: list[Reason] = field(default_factory=list)
    #: reason -> the planned cell it follows from, and whether it holds only if that cell's
    #: values change (``upstream``); reasons absent here hold by themselves
    causes: dict[Reason, tuple[str, bool]] = field(default_factory=dict)
    #: its last run raised, and would again: same source, inputs and environment. Reported
    #: with the blocked cells, not run, until something it depends on changes
    failing: bool = False

    def add(self, reason: Reason, via: str | None = None, if_changed: bool = False) -> bool:
        """Add ``reason``; ``via``: the planned cell it follows from (a reader of its values,
        ``if_changed``, or the cell it restores a value for)."""
        if reason in self.reasons:
            return False
        self.reasons.append(reason)
        if via is not None:
            self.causes[reason] = (via, if_changed)
        return True

    def kinds(self) -> set[str]:
        return {r.kind for r in self.reasons}

    def changes_output(self) -> bool:
        """Whether re-running gives its names new values (restoring gives the same ones)."""
        return not self.failing and bool(self.kinds() - {"restores", "missing_producer"})

    def blocked(self) -> bool:
        """Whether the cell is not run: a fresh run cannot run it (a name it reads has no
        producer), it fails the same way it did last time, or no re-run in this kernel can do
        what it is planned for (``Reason.needs_fresh``)."""
        return (
            self.failing
            or "missing_producer" in self.kinds()
            or any(r.needs_fresh for r in self.reasons)
        )

    def cause(self) -> str:
        """The cell's state as a dependent's ``upstream`` message names it."""
        kinds = self.kinds()
        for kind in REASON_ORDER:
            if kind in kinds and kind in _CAUSE_WORDS:
                return _CAUSE_WORDS[kind]
        return "stale"


@lru_cache(maxsize=4096)
def writer_label(origin: str) -> str:
    """Who changed a value outside the notebook's cells, as reasons name it."""
    return "scratch code" if origin == "scratch" else "the browser"


def cell_label(graph: Graph, cell_id: str | None) -> str:
    """A cell as reasons name it: by its position in the notebook now."""
    if cell_id is not None and cell_id in graph.by_id:
        return f"cell {graph.by_id[cell_id].cell.index}"
    return "a deleted cell"


def same_stamp(a: FileStamp | None, b: FileStamp | None) -> bool:
    a_key = (a.mtime_ns, a.size) if a is not None else (None, None)
    b_key = (b.mtime_ns, b.size) if b is not None else (None, None)
    return a_key == b_key


def canonical_path(stat: StatFn, path: str) -> str:
    """``path`` as ``stat`` names it when the file exists (the literal otherwise)."""
    stamp = stat(path)
    return stamp.path if stamp is not None else path


def mentions(source: str, path: str) -> bool:
    """Whether ``source`` names the file at ``path`` (by its path or its base name)."""
    base = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return path in source or (bool(base) and base in source)


def mutated_below(graph: Graph, name: str, cell_id: str) -> bool:
    """Whether a cell below ``cell_id`` changes ``name`` in place: only then does it matter
    which object a value holding ``name``'s object holds (an equal copy reads the same)."""
    for gc in graph.cells[graph.position[cell_id] + 1 :]:
        if name in gc.analysis.defs:
            return False  # rebound first: what is changed below is another object
        if name in gc.mutates:
            return True
    return False


def unseeded(graph: Graph, name: str, cell_id: str) -> bool:
    """Whether ``name`` is hidden generator state (``<numpy.random>``) that no cell above
    ``cell_id`` seeds: a fresh run draws from an unpredictable state there, so no re-run can
    recreate the state the kernel had, and none is planned to. A setting
    (``<numpy.printoptions>``) is never unseeded: its reader formatted with the value its
    setter left, which a re-run of the setter changes."""
    if name not in GENERATORS:
        return False
    pos = graph.position[cell_id]
    return not any(
        graph.by_id[w].analysis.seeds
        for w in graph.writers.get(name, ())
        if graph.position[w] < pos
    )
