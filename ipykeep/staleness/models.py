"""Plain records the staleness engine consumes and produces.

Everything here is a frozen dataclass: the tracker hands these out and keeps them, so nobody
may change one after the fact. ``Plan.to_json()`` is the shape transports show to users.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

CellType = Literal["code", "markdown", "raw"]
Outcome = Literal["ok", "failed", "interrupted"]
CellVerdict = Literal["ok", "failed", "stale", "never_run"]

ReasonKind = Literal[
    "never_run",
    "source_changed",
    "failed",
    "file_changed",
    "upstream",
    "state_changed",
    "restores",
    "moved",
    "kernel_restarted",
    "missing_producer",
]

#: The cell tag (nbval/nbsphinx convention) that makes a cell's error its expected outcome.
EXPECTED_FAILURE_TAG = "raises-exception"

#: Reasons that put a cell in the plan by themselves, in the order they are reported.
REASON_ORDER: tuple[ReasonKind, ...] = (
    "never_run",
    "kernel_restarted",
    "source_changed",
    "failed",
    "file_changed",
    "moved",
    "upstream",
    "state_changed",
    "restores",
    "missing_producer",
)


@dataclass(frozen=True)
class NotebookCell:
    """One cell of the notebook as it is on disk now; ``index`` counts all cells from 0."""

    cell_id: str
    index: int
    cell_type: CellType
    source: str
    #: ``metadata.tags``; ``raises-exception`` accepts the cell's failure as its expected outcome
    tags: tuple[str, ...] = ()

    @property
    def expects_failure(self) -> bool:
        return EXPECTED_FAILURE_TAG in self.tags


@dataclass(frozen=True)
class FileStamp:
    """What a file looked like: ``mtime_ns``/``size`` are None when the file does not exist."""

    path: str
    mtime_ns: int | None
    size: int | None

    @classmethod
    def missing(cls, path: str) -> FileStamp:
        return cls(path=path, mtime_ns=None, size=None)

    @property
    def exists(self) -> bool:
        return self.mtime_ns is not None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "mtime_ns": self.mtime_ns, "size": self.size}


@dataclass(frozen=True)
class DynamicCellInfo:
    """What a runtime tracer (ipyflow) saw for one execution of a cell.

    Names are top-level symbol names (``df`` for ``df.col`` or ``df[0]``). ``parents`` maps a
    parent cell id to the names this cell read from it.
    """

    cell_id: str
    defined: frozenset[str] = frozenset()
    used: frozenset[str] = frozenset()
    mutated: frozenset[str] = frozenset()
    parents: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Observed:
    """What one execution was seen to do to the kernel's namespace (runtime evidence).

    Taken in the kernel right after the code ran, by comparing every global name with what it
    held before: its object identity and a bounded content fingerprint (containers, arrays,
    frames, random generator state, object attributes). Names shared by several globals (aliases)
    change together, so a mutation through an alias or inside a library call shows on every name
    that reaches the object.
    """

    #: names that did not exist before, or now hold a different value
    bound: frozenset[str] = frozenset()
    #: names still holding the same object, whose content changed (in place)
    mutated: frozenset[str] = frozenset()
    deleted: frozenset[str] = frozenset()
    #: names whose content is fingerprinted only in part (sampled) or not at all (identity): a
    #: mutation of them may go unseen, so static guesses about them stand
    opaque: frozenset[str] = frozenset()
    #: for hidden state (``<numpy.random>``, ``<numpy.printoptions>``): a digest of the state
    #: after the run, so a reseed to the same seed gives the same value as before
    states: Mapping[str, str] = field(default_factory=dict)
    #: process-wide settings (pseudo-names, ``<numpy.printoptions>``) the code used: inputs
    read: frozenset[str] = frozenset()
    #: bound names whose new value the fingerprints cannot compare with the old one (an object
    #: fingerprinted by its attributes, a fitted model): not proven equal, nor different
    uncompared: frozenset[str] = frozenset()
    #: bound name -> the names the code mentioned whose objects its new value holds a reference
    #: to (``holder = {'data': rows}``, a model fitted on ``df``); None: not known, any may be
    captured: Mapping[str, frozenset[str]] | None = field(default_factory=dict)

    def holds(self, name: str) -> tuple[str, ...]:
        """The bound names whose values hold the object ``name`` referred to when this ran."""
        if self.captured is None:
            return tuple(sorted(self.bound))
        return tuple(sorted(b for b, held in self.captured.items() if name in held))

    @property
    def changed(self) -> frozenset[str]:
        return self.bound | self.mutated | self.deleted


def captured_names(raw: object) -> dict[str, frozenset[str]] | None:
    """``Observed.captured`` from its JSON form (None: the probe could not tell)."""
    if not isinstance(raw, Mapping):
        return None
    return {str(k): frozenset(map(str, v)) for k, v in raw.items() if isinstance(v, list)}


@dataclass(frozen=True)
class Reason:
    """Why a cell is in the plan, with its evidence: the cells, symbols or file behind it."""

    kind: ReasonKind
    message: str
    cells: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    path: str | None = None
    #: no re-run in this kernel can do what the reason asks (a restore of an object a module
    #: owns): the cell is reported with the blocked ones, and only a fresh run makes it right
    needs_fresh: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.cells:
            out["cells"] = list(self.cells)
        if self.symbols:
            out["symbols"] = list(self.symbols)
        if self.path is not None:
            out["path"] = self.path
        if self.needs_fresh:
            out["needs_fresh"] = True
        return out


@dataclass(frozen=True)
class PlanEntry:
    """A cell to run (or, in ``Plan.blocked``, one that would fail), with its reasons."""

    cell_id: str
    index: int
    reasons: tuple[Reason, ...]
    produces: tuple[str, ...] = ()
    #: for a conditional entry (``Plan.conditional``): what must happen for it to run
    condition: str | None = None

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(r.kind for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cell_id": self.cell_id,
            "index": self.index,
            "reasons": [r.to_json() for r in self.reasons],
            "produces": list(self.produces),
        }
        if self.condition is not None:
            out["condition"] = self.condition
        return out


@dataclass(frozen=True)
class FreshCell:
    cell_id: str
    index: int

    def to_json(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "index": self.index}


@dataclass(frozen=True)
class Plan:
    """The cells to run, in notebook order, and the code cells that are already right.

    ``stale`` holds the cells that will run. ``conditional`` holds the cells that run only if
    a value they read changes when the cells above re-run (the readers of ``total`` after a
    print-only edit of its cell): executing re-plans before each of them and runs it only
    then. ``blocked`` holds cells that read a name no cell above them defines any more (its
    producer was deleted or moved below): a fresh run would fail there, and running them in
    this kernel would only succeed on a leftover value, so they are reported, not planned.
    """

    stale: tuple[PlanEntry, ...]
    fresh: tuple[FreshCell, ...]
    blocked: tuple[PlanEntry, ...] = ()
    conditional: tuple[PlanEntry, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.stale and not self.conditional

    @property
    def cell_ids(self) -> tuple[str, ...]:
        """The cells that will run, in notebook order."""
        return tuple(e.cell_id for e in self.stale)

    @property
    def runnable_ids(self) -> tuple[str, ...]:
        """The cells that will run and the conditional ones, in notebook order."""
        entries = sorted(self.stale + self.conditional, key=lambda e: e.index)
        return tuple(e.cell_id for e in entries)

    def entry(self, cell_id: str) -> PlanEntry | None:
        for e in self.stale + self.conditional + self.blocked:
            if e.cell_id == cell_id:
                return e
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "stale": [e.to_json() for e in self.stale],
            "conditional": [e.to_json() for e in self.conditional],
            "fresh": [f.to_json() for f in self.fresh],
            "blocked": [e.to_json() for e in self.blocked],
        }
