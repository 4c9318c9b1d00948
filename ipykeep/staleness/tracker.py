"""What the kernel holds, and which cells must run to make it match a fresh run of the notebook.

The tracker is fed events in the order they happen in one kernel (a notebook cell ran, scratch
code ran, the kernel restarted) and keeps, per notebook cell, its last run: the hash of the
source it ran, its outcome, the files it read, and for every name it read *which write* it saw
(the cell and run that last wrote the name, or scratch code). The kernel's latest writer of
each name is kept too.

``plan()`` compares that record with the notebook as it is now (sources re-read, files re-stat'ed
through the injected ``stat``) and returns the smallest set of cells whose re-run in notebook
order leaves every name as a fresh top-to-bottom run would:

* a cell whose own inputs changed (never run, edited, failed, file changed, kernel restarted,
  reads a value written by anything but the cell above that should produce it) is stale;
* a cell reading a name from a stale cell is stale (``upstream``), unless that cell only re-runs
  to restore its value, which then comes out the same;
* a value that a re-run will clobber, or that was already clobbered (scratch code, running an
  earlier definer), is restored by re-running the cell that should have the last word on it
  (``restores``); a stale cell that mutates a value in place first needs that value rebuilt, so
  its producer restores too;
* a cell reading a name no cell above it defines any more would fail in a fresh run: it is
  reported in ``Plan.blocked`` (``missing_producer``) and not planned.

Scratch code is judged conservatively: cells that read a name it rebound or mutated are stale
(``state_changed``), as it may have changed the value behind aliases too.

Pure: no I/O, no asyncio, no clocks. ``stat`` is injected by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable, Iterable, Literal, Mapping, Sequence

from .analysis import CellAnalysis, FunctionInfo, analyze_source
from .graph import Graph, GraphCell, build_graph, cell_effects
from .hashing import source_hash
from .models import (
    REASON_ORDER,
    CellState,
    DynamicCellInfo,
    FileStamp,
    FreshCell,
    NotebookCell,
    Observed,
    Outcome,
    Plan,
    PlanEntry,
    Reason,
)

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
class _Write:
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
class _Run:
    cell_id: str
    seq: int
    version: int
    index: int
    epoch: int
    source_hash: str
    outcome: Outcome
    files: Mapping[str, FileStamp]
    #: for each name read: the write it saw (None when nothing had written it)
    reads: Mapping[str, _Write | None]
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

    def version_of(self, name: str) -> int:
        return self.versions.get(name, self.version)


@lru_cache(maxsize=4096)
def _hash(source: str) -> str:
    return source_hash(source)


def _same_stamp(a: FileStamp | None, b: FileStamp | None) -> bool:
    a_key = (a.mtime_ns, a.size) if a is not None else (None, None)
    b_key = (b.mtime_ns, b.size) if b is not None else (None, None)
    return a_key == b_key


@dataclass
class _Draft:
    """Reasons collected for one cell while a plan is computed."""

    reasons: list[Reason] = field(default_factory=list)

    def add(self, reason: Reason) -> bool:
        if reason in self.reasons:
            return False
        self.reasons.append(reason)
        return True

    def kinds(self) -> set[str]:
        return {r.kind for r in self.reasons}

    def changes_output(self) -> bool:
        """Whether re-running gives its names new values (restoring gives the same ones)."""
        return bool(self.kinds() - {"restores", "missing_producer"})


class StalenessTracker:
    """The staleness record of one kernel bound to one notebook."""

    def __init__(self) -> None:
        self._seq = 0
        self._epoch = 0
        self._runs: dict[str, _Run] = {}
        self._writers: dict[str, _Write] = {}
        self._functions: dict[str, FunctionInfo] = {}
        self._watched: dict[str, FileStamp | None] = {}
        #: digest of a hidden state (``<numpy.random>``) -> the version standing for it
        self._state_versions: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ events

    def record_cell_run(
        self,
        cell_id: str,
        index: int,
        source: str,
        outcome: Outcome,
        files_read: Iterable[FileStamp] = (),
        dynamic: DynamicCellInfo | None = None,
        stat: StatFn | None = None,
        files_written: Iterable[str] = (),
        observed: Observed | None = None,
    ) -> None:
        """A notebook cell finished on the main shell (call in execution order).

        ``observed`` is the kernel's namespace evidence for this run; it outranks the static
        guesses about what the cell changed, for as long as the cell's source stays the same.

        ``files_read`` are the files the run opened for reading (stamped after the run);
        ``files_written`` the paths it opened for writing: a later cell reading one of them
        re-runs after this cell does.
        ``stat``, when given, stamps the path literals the cell names and the watched files it
        depends on, so reads the runtime hook cannot see still count.
        """
        self._seq += 1
        analysis = analyze_source(source)
        seen = observed
        previous = self._runs.get(cell_id)
        if (
            observed is not None
            and previous is not None
            and previous.observed is not None
            and previous.epoch == self._epoch
            and previous.source_hash == _hash(source)
        ):
            # a name bound without a visible assignment (``exec``, ``globals()[…]``) and rebound
            # to an equal value shows no change this time: it is still this cell's output
            observed = replace(observed, bound=observed.bound | (previous.observed.bound - observed.deleted))
        reads, writes = self._effects(source, dynamic, observed)
        files: dict[str, FileStamp] = {}
        if stat is not None:
            for path in analysis.paths + self._watched_paths_for(source):
                stamp = stat(path)
                # keyed by the stamp's own path: ``stat`` names a file as the runtime hook does
                # (absolute), so a literal and the run-time read of one file count once
                if stamp is not None:
                    files[stamp.path] = stamp
                else:
                    files[path] = FileStamp.missing(path)
        for stamp in files_read:
            files[stamp.path] = stamp
        written = set(files_written)
        if stat is not None:
            written.update(_canonical(stat, p) for p in analysis.written_paths)
        run = _Run(
            cell_id=cell_id,
            seq=self._seq,
            version=self._seq,
            index=index,
            epoch=self._epoch,
            source_hash=_hash(source),
            outcome=outcome,
            files=files,
            reads={name: self._writers.get(name) for name in reads},
            dynamic=dynamic,
            written=frozenset(written),
            observed=observed,
            imports=dict(analysis.imports),
        )
        if previous is not None and self._is_restore(previous, run, writes):
            versions = {n: previous.version_of(n) for n in writes}
            run = replace(run, version=previous.version, versions=versions)
        else:
            run = replace(run, versions=self._value_versions(cell_id, run, writes, analysis, seen))
        if observed is not None and observed.states:
            # equal generator states are the same value, whoever set them
            versions = dict(run.versions)
            for name, digest in observed.states.items():
                if name in writes:
                    key = (name, digest)
                    versions[name] = self._state_versions.setdefault(key, -len(self._state_versions) - 1)
            run = replace(run, versions=versions)
        self._runs[cell_id] = run
        for name in writes:
            self._writers[name] = _Write("cell", cell_id, self._seq, run.version_of(name))
        self._note_functions(source)

    def record_scratch(
        self,
        source: str,
        origin: Literal["scratch", "browser"] = "scratch",
        dynamic: DynamicCellInfo | None = None,
        observed: Observed | None = None,
    ) -> None:
        """Code outside the notebook ran in the same kernel (agent scratch code, a browser)."""
        self._seq += 1
        _, writes = self._effects(source, dynamic, observed)
        if observed is not None:
            # a scratch rebinding to an equal value (or a guessed mutation that did not
            # happen) leaves the notebook's values as they were
            writes = (writes - analyze_source(source).defs) | observed.changed | (
                writes & analyze_source(source).assigned_into
            )
        for name in writes:
            self._writers[name] = _Write(origin, None, self._seq, self._seq, observed is not None)
        self._note_functions(source)

    def kernel_restarted(self) -> None:
        """The kernel lost all its state: every earlier run no longer counts."""
        self._epoch += 1
        self._writers.clear()
        self._functions.clear()

    def watch(self, path: str, stamp: FileStamp | None) -> None:
        """Make ``path`` an input of the notebook (``stamp``: the file now).

        Cells whose source names the file (its path or base name) depend on it; when no cell
        names it, every cell does, since there is no telling which one reads it.
        """
        self._watched[path] = stamp if stamp is not None else FileStamp.missing(path)

    def forget_cell(self, cell_id: str) -> None:
        """Drop the run record of a cell (its names stay in the kernel)."""
        self._runs.pop(cell_id, None)

    @property
    def watched(self) -> tuple[str, ...]:
        return tuple(self._watched)

    # ------------------------------------------------------------------ queries

    def plan(self, cells: Sequence[NotebookCell], stat: StatFn) -> Plan:
        """The cells to run, in notebook order, for the notebook as given (read from disk now)."""
        observed, carried = self._evidence(cells)
        graph = build_graph(cells, self._still_valid_dynamic(cells), observed, carried)
        drafts = {gc.cell_id: _Draft() for gc in graph.cells}
        watch_deps = self._watch_dependents(graph)
        for gc in graph.cells:
            self._direct_reasons(gc, graph, drafts[gc.cell_id], stat, watch_deps)
        self._block(graph, drafts)
        self._propagate(graph, drafts, self._file_writers(graph, stat))
        return self._assemble(graph, drafts)

    def cell_states(self, cells: Sequence[NotebookCell], stat: StatFn) -> dict[str, CellState]:
        """Per code cell: ``never_run``, ``stale``, ``failed`` (stale because it failed) or ``ok``."""
        plan = self.plan(cells, stat)
        planned = {e.cell_id: e for e in plan.stale + plan.blocked}
        out: dict[str, CellState] = {}
        for cell in cells:
            if cell.cell_type != "code":
                continue
            run = self._runs.get(cell.cell_id)
            if run is None:
                out[cell.cell_id] = "never_run"
            elif cell.cell_id in planned:
                entry = planned[cell.cell_id]
                out[cell.cell_id] = "failed" if entry.kinds == {"failed"} else "stale"
            else:
                out[cell.cell_id] = "ok"
        return out

    def last_writers(self) -> dict[str, str]:
        """Name -> id of the notebook cell that last wrote it (scratch writes are left out)."""
        return {name: w.cell_id for name, w in self._writers.items() if w.cell_id is not None}

    def run_files(self, cell_id: str) -> tuple[tuple[FileStamp, ...], tuple[str, ...]]:
        """The files the cell's last run depended on (stamped then) and the paths it wrote."""
        run = self._runs.get(cell_id)
        return (tuple(run.files.values()), tuple(sorted(run.written))) if run is not None else ((), ())

    def last_outcome(self, cell_id: str) -> Outcome | None:
        run = self._runs.get(cell_id)
        return run.outcome if run is not None else None

    # ------------------------------------------------------------------ internals

    def _effects(
        self, source: str, dynamic: DynamicCellInfo | None, observed: Observed | None = None
    ) -> tuple[set[str], set[str]]:
        """Names a piece of code reads from outside, and names it rebinds or mutates."""
        an = analyze_source(source)
        lookup = dict(self._functions)
        lookup.update(an.functions)
        reads, writes, _ = cell_effects(an, lookup, dynamic, observed)
        return reads, writes

    def _value_versions(
        self,
        cell_id: str,
        run: _Run,
        writes: set[str],
        analysis: CellAnalysis,
        observed: Observed | None,
    ) -> dict[str, int]:
        """Per name written: a new version, unless the kernel saw this cell rebind the name to
        the value its previous run had left there (same object, or an equal value with exact
        fingerprints), e.g. a print-only edit or an unchanged ``import numpy as np``."""
        out: dict[str, int] = {}
        an = analysis
        for name in writes:
            prev = self._writers.get(name)
            if (
                observed is not None
                and name not in observed.changed
                and name not in observed.opaque
                and name not in an.assigned_into
                and name not in an.mutates
                and prev is not None
                and prev.origin == "cell"
                and prev.cell_id == cell_id
            ):
                out[name] = prev.version
            else:
                out[name] = run.version
        return out

    def _is_restore(self, previous: _Run, run: _Run, writes: set[str]) -> bool:
        """Whether ``run`` repeats ``previous`` on the same inputs to rebuild a clobbered value.

        Such a run gives the values it gave before (cells are taken to be deterministic), so
        cells that read them stay fresh. A repeat that rebuilt nothing clobbered is a plain
        re-run: its readers are told (``state_changed``), as the values are new objects.
        """
        if (
            previous.epoch != run.epoch
            or previous.outcome != "ok"
            or run.outcome != "ok"
            or previous.source_hash != run.source_hash
            or set(previous.reads) != set(run.reads)
        ):
            return False
        for name, seen in run.reads.items():
            before = previous.reads[name]
            if (seen is None) != (before is None):
                return False
            if seen is not None and before is not None:
                if (seen.origin, seen.cell_id, seen.version) != (
                    before.origin,
                    before.cell_id,
                    before.version,
                ):
                    return False
        for path, stamp in run.files.items():
            if path in previous.files and not _same_stamp(previous.files[path], stamp):
                return False
        return any(
            (w := self._writers.get(name)) is None or w.cell_id != run.cell_id
            for name in writes
        )

    def _note_functions(self, source: str) -> None:
        an = analyze_source(source)
        for name in an.defs:
            if name in an.functions:
                self._functions[name] = an.functions[name]
            else:
                self._functions.pop(name, None)

    def _watched_paths_for(self, source: str) -> tuple[str, ...]:
        return tuple(p for p in self._watched if _mentions(source, p))

    def _watch_dependents(self, graph: Graph) -> dict[str, tuple[str, ...]]:
        """cell id -> watched paths it depends on."""
        deps: dict[str, list[str]] = {gc.cell_id: [] for gc in graph.cells}
        for path in self._watched:
            named = [gc.cell_id for gc in graph.cells if _mentions(gc.cell.source, path)]
            for cid in named or [gc.cell_id for gc in graph.cells]:
                deps[cid].append(path)
        return {k: tuple(v) for k, v in deps.items()}

    def _evidence(
        self, cells: Sequence[NotebookCell]
    ) -> tuple[dict[str, Observed], dict[str, Observed]]:
        """Runtime evidence per cell: the full observation of runs whose source is unchanged,
        and, for edited cells, the in-place changes their last run made (still likely)."""
        full: dict[str, Observed] = {}
        carried: dict[str, Observed] = {}
        for cell in cells:
            run = self._runs.get(cell.cell_id)
            if run is None or run.observed is None or run.outcome != "ok":
                continue
            if run.epoch == self._epoch and run.source_hash == _hash(cell.source):
                full[cell.cell_id] = run.observed
            elif run.observed.mutated or run.observed.bound:
                carried[cell.cell_id] = run.observed
        return full, carried

    def _block(self, graph: Graph, drafts: dict[str, _Draft]) -> None:
        """Blocking is transitive: a cell reading a name from a cell that a fresh run cannot
        run (it reads a name no cell above defines) would fail too, whatever the kernel holds."""
        blocked: set[str] = set()
        for gc in graph.cells:  # notebook order: producers are decided before their readers
            draft = drafts[gc.cell_id]
            if "missing_producer" in draft.kinds():
                blocked.add(gc.cell_id)
                continue
            by_producer: dict[str, list[str]] = {}
            for name in sorted(gc.reads):
                producer = gc.producers.get(name)
                if producer is not None and producer in blocked:
                    by_producer.setdefault(producer, []).append(name)
            for producer, names in by_producer.items():
                draft.add(
                    Reason(
                        "missing_producer",
                        f"uses {', '.join(names)} from {self._label(graph, producer)}, "
                        "which a fresh run cannot run (it is blocked)",
                        cells=(producer,),
                        symbols=tuple(names),
                    )
                )
            if by_producer:
                blocked.add(gc.cell_id)

    def _still_valid_dynamic(self, cells: Sequence[NotebookCell]) -> dict[str, DynamicCellInfo]:
        out: dict[str, DynamicCellInfo] = {}
        for cell in cells:
            run = self._runs.get(cell.cell_id)
            if (
                run is not None
                and run.dynamic is not None
                and run.epoch == self._epoch
                and run.source_hash == _hash(cell.source)
            ):
                out[cell.cell_id] = run.dynamic
        return out

    def _label(self, graph: Graph, cell_id: str | None) -> str:
        if cell_id is not None and cell_id in graph.by_id:
            return f"cell {graph.by_id[cell_id].cell.index}"
        return "a deleted cell"

    def _direct_reasons(
        self,
        gc: GraphCell,
        graph: Graph,
        draft: _Draft,
        stat: StatFn,
        watch_deps: Mapping[str, tuple[str, ...]],
    ) -> None:
        cid = gc.cell_id
        run = self._runs.get(cid)
        for name in sorted(gc.reads):
            self._missing_producer(gc, graph, draft, name)
        if run is None:
            draft.add(Reason("never_run", "never run in this kernel"))
            return
        if run.epoch != self._epoch:
            draft.add(Reason("kernel_restarted", "its results were lost when the kernel restarted"))
            return
        if run.source_hash != _hash(gc.cell.source):
            draft.add(Reason("source_changed", "source edited since it last ran"))
        if run.outcome != "ok" and not (run.outcome == "failed" and gc.cell.expects_failure):
            verb = "raised an error" if run.outcome == "failed" else "was interrupted"
            draft.add(Reason("failed", f"its last run {verb}"))
        self._file_reasons(gc, run, draft, stat, watch_deps.get(cid, ()))
        for name in sorted(gc.reads):
            self._read_reason(gc, graph, run, draft, name)

    def _file_reasons(
        self,
        gc: GraphCell,
        run: _Run,
        draft: _Draft,
        stat: StatFn,
        watched: tuple[str, ...],
    ) -> None:
        baseline: dict[str, FileStamp] = dict(run.files)
        for path in watched:
            if path not in baseline:
                stamp = self._watched[path]
                if stamp is not None:
                    baseline[path] = stamp
        for path in sorted(baseline):
            before = baseline[path]
            now = stat(path)
            if _same_stamp(before, now):
                continue
            if now is None or not now.exists:
                what = "was deleted"
            elif not before.exists:
                what = "appeared"
            else:
                what = "changed"
            draft.add(Reason("file_changed", f"file {path} {what} since it last ran", path=path))

    def _missing_producer(self, gc: GraphCell, graph: Graph, draft: _Draft, name: str) -> None:
        if gc.producers.get(name) is not None or not name.isidentifier():
            return  # pseudo-names (``<numpy.random>``) stand for state that always exists
        below = graph.writers_below(name, gc.cell_id)
        below = tuple(w for w in below if w != gc.cell_id)
        if below:
            where = ", ".join(self._label(graph, w) for w in below)
            draft.add(
                Reason(
                    "missing_producer",
                    f"uses {name}, which only {where} below it defines",
                    cells=below,
                    symbols=(name,),
                )
            )
            return
        write = self._writers.get(name)
        if write is None:
            return  # a builtin, or something no tracked code ever defined
        if write.origin != "cell":
            source = "scratch code" if write.origin == "scratch" else "the browser"
            message = f"uses {name}, which no cell defines (it came from {source})"
            cells: tuple[str, ...] = ()
        elif write.cell_id == gc.cell_id:
            message = f"uses {name}, which no cell above defines (only its own earlier run)"
            cells = ()
        else:
            message = f"uses {name}, which no cell defines any more (it came from {self._label(graph, write.cell_id)})"
            cells = (write.cell_id,) if write.cell_id else ()
        draft.add(Reason("missing_producer", message, cells=cells, symbols=(name,)))

    def _read_reason(
        self, gc: GraphCell, graph: Graph, run: _Run, draft: _Draft, name: str
    ) -> None:
        producer = gc.producers.get(name)
        if producer is None or name not in run.reads:
            return  # no producer (reported above), or a new read: its edit already counts
        seen = run.reads[name]
        p_run = self._runs.get(producer)
        label = self._label(graph, producer)
        latest = self._writers.get(name)
        p_run = self._runs.get(producer)
        if latest is not None and latest.origin != "cell" and latest.seq > run.seq:
            if (
                latest.evidence
                and seen is not None
                and seen.origin == "cell"
                and seen.cell_id == producer
                and p_run is not None
                and seen.version == p_run.version_of(name)
            ):
                # the cell ran on the producer's value; the scratch change is undone by the
                # producer's restore, and the kernel saw that it touched nothing else
                return
            by = "scratch code" if latest.origin == "scratch" else "the browser"
            draft.add(
                Reason("state_changed", f"{name} was changed by {by} after it ran", symbols=(name,))
            )
            return
        if p_run is None or p_run.epoch != self._epoch or p_run.outcome != "ok":
            return  # the producer is in the plan itself: ``upstream`` covers it
        if seen is None:
            if p_run.seq > run.seq:
                draft.add(
                    Reason(
                        "state_changed",
                        f"{name} was defined by {label} only after it ran",
                        cells=(producer,),
                        symbols=(name,),
                    )
                )
            return
        if seen.origin != "cell":
            by = "scratch code" if seen.origin == "scratch" else "the browser"
            draft.add(
                Reason("state_changed", f"it read {name} as set by {by}", symbols=(name,))
            )
            return
        if seen.cell_id == producer:
            if seen.version != p_run.version_of(name):
                draft.add(
                    Reason(
                        "state_changed",
                        f"{name} was changed by re-running {label}",
                        cells=(producer,),
                        symbols=(name,),
                    )
                )
            return
        if seen.cell_id == gc.cell_id:
            draft.add(
                Reason(
                    "state_changed",
                    f"it last ran on its own earlier result for {name}, not on {label}'s",
                    cells=(producer,),
                    symbols=(name,),
                )
            )
            return
        old = self._label(graph, seen.cell_id)
        moved = run.index != gc.cell.index or (
            seen.cell_id in graph.by_id
            and self._runs.get(seen.cell_id) is not None
            and self._runs[seen.cell_id].index != graph.by_id[seen.cell_id].cell.index
        ) or p_run.index != graph.by_id[producer].cell.index
        if moved and seen.cell_id in graph.by_id:
            draft.add(
                Reason(
                    "moved",
                    f"cells moved: it now reads {name} from {label}, not {old}",
                    cells=(producer, seen.cell_id),
                    symbols=(name,),
                )
            )
        else:
            draft.add(
                Reason(
                    "state_changed",
                    f"it read {name} from {old}; {label} defines it now",
                    cells=(producer,),
                    symbols=(name,),
                )
            )

    def _file_writers(self, graph: Graph, stat: StatFn) -> dict[str, tuple[str, ...]]:
        """path -> ids of the cells that write it (last run, or a literal in the source now)."""
        out: dict[str, list[str]] = {}
        for gc in graph.cells:
            paths = {_canonical(stat, p) for p in gc.analysis.written_paths}
            run = self._runs.get(gc.cell_id)
            if run is not None:
                paths |= run.written
            for path in paths:
                out.setdefault(path, []).append(gc.cell_id)
        return {k: tuple(v) for k, v in out.items()}

    def _file_upstream(
        self,
        gc: GraphCell,
        graph: Graph,
        drafts: dict[str, _Draft],
        file_writers: Mapping[str, tuple[str, ...]],
    ) -> bool:
        """A cell reading a file that a planned cell above it rewrites must run after it."""
        run = self._runs.get(gc.cell_id)
        if run is None:
            return False
        changed = False
        pos = graph.position[gc.cell_id]
        if run.files:
            # shell commands are opaque: a re-running cell above that runs one may rewrite any
            # project file, so the cells that read project files re-run after it
            for other in graph.cells[:pos]:
                kinds = drafts[other.cell_id].kinds()
                if other.analysis.shell and kinds and "missing_producer" not in kinds:
                    changed |= drafts[gc.cell_id].add(
                        Reason(
                            "upstream",
                            f"reads {', '.join(sorted(run.files)[:3])}, which the shell command in "
                            f"{self._label(graph, other.cell_id)} may rewrite (shell commands are "
                            "opaque)",
                            cells=(other.cell_id,),
                        )
                    )
        for path in sorted(run.files):
            for writer in file_writers.get(path, ()):
                if graph.position[writer] >= pos:
                    continue
                kinds = drafts[writer].kinds()
                if not kinds or "missing_producer" in kinds:
                    continue
                changed |= drafts[gc.cell_id].add(
                    Reason(
                        "upstream",
                        f"reads {path}, which {self._label(graph, writer)} writes "
                        f"({self._cause(drafts[writer])})",
                        cells=(writer,),
                        path=path,
                    )
                )
        return changed

    def _propagate(
        self,
        graph: Graph,
        drafts: dict[str, _Draft],
        file_writers: Mapping[str, tuple[str, ...]],
    ) -> None:
        changed = True
        while changed:
            changed = False
            for gc in graph.cells:
                draft = drafts[gc.cell_id]
                changed |= self._file_upstream(gc, graph, drafts, file_writers)
                by_producer: dict[str, list[str]] = {}
                for name in sorted(gc.reads):
                    producer = gc.producers.get(name)
                    if (
                        producer is not None
                        and drafts[producer].changes_output()
                        and not self._same_import(graph.by_id[producer], name, drafts[producer])
                    ):
                        by_producer.setdefault(producer, []).append(name)
                for producer, names in by_producer.items():
                    cause = self._cause(drafts[producer])
                    label = self._label(graph, producer)
                    reason = Reason(
                        "upstream",
                        f"uses {', '.join(names)} from {label} ({cause})",
                        cells=(producer,),
                        symbols=tuple(names),
                    )
                    changed |= draft.add(reason)
                if draft.reasons and "missing_producer" not in draft.kinds():
                    changed |= self._restore_mutated(gc, graph, drafts)
                    changed |= self._restore_inputs(gc, graph, drafts)
            changed |= self._restore_clobbered(graph, drafts)

    def _same_import(self, producer: GraphCell, name: str, draft: _Draft) -> bool:
        """Whether re-running ``producer`` leaves ``name`` as it is: it is bound by the same
        import statement its last run executed (the module object is cached by the interpreter),
        and no module source file it read changed."""
        run = self._runs.get(producer.cell_id)
        wanted = producer.analysis.imports.get(name)
        if run is None or wanted is None or run.epoch != self._epoch or run.outcome != "ok":
            return False
        if run.imports.get(name) != wanted:
            return False
        if any(r.kind == "file_changed" and (r.path or "").endswith(".py") for r in draft.reasons):
            return False
        latest = self._writers.get(name)
        return latest is not None and latest.cell_id == producer.cell_id

    def _restore_inputs(self, gc: GraphCell, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """Restore before re-read: a planned cell must read what a fresh run gives it at that
        point. When the value it would find in the kernel did not come from the cell that should
        produce it (a later definer, its own earlier run of ``x = x[1:]``, a mutation since,
        scratch code, or a planned writer above the producer), that producer re-runs first."""
        changed = False
        for name in sorted(gc.reads - gc.mutates):  # mutated names: see _restore_mutated
            producer = gc.producers.get(name)
            if producer is None or producer == gc.cell_id or drafts[producer].reasons:
                continue
            p_run = self._runs.get(producer)
            if p_run is None or p_run.epoch != self._epoch:
                continue
            why = self._not_from_producer(gc, graph, drafts, name, producer, p_run)
            if why is None:
                continue
            if graph.final_writer(name) == producer:
                # the producer has the last word on the name: say why the kernel lost it
                clobber = self._kernel_clobber(graph, name, producer)
                if clobber is not None:
                    changed |= drafts[producer].add(clobber)
                    continue
            changed |= drafts[producer].add(
                Reason(
                    "restores",
                    f"{self._label(graph, gc.cell_id)} re-runs and reads {name}, but {why}; "
                    f"{self._label(graph, producer)} re-runs first to recreate it",
                    cells=(gc.cell_id,),
                    symbols=(name,),
                )
            )
        return changed

    def _not_from_producer(
        self,
        gc: GraphCell,
        graph: Graph,
        drafts: dict[str, _Draft],
        name: str,
        producer: str,
        p_run: _Run,
    ) -> str | None:
        """Why the value of ``name`` that ``gc`` would read now is not ``producer``'s (None: it is)."""
        p_pos = graph.position[producer]
        for writer in reversed(graph.writers.get(name, ())):
            if graph.position[writer] < p_pos and drafts[writer].reasons and (
                "missing_producer" not in drafts[writer].kinds()
            ):
                return f"re-running {self._label(graph, writer)} overwrites it first"
        latest = self._writers.get(name)
        if latest is None:
            return "it is no longer defined in the kernel"
        if latest.origin != "cell":
            return "scratch code changed it" if latest.origin == "scratch" else "the browser changed it"
        if latest.cell_id == gc.cell_id:
            return "the kernel holds its own earlier result"
        if latest.cell_id != producer:
            return f"the kernel holds the value {self._label(graph, latest.cell_id)} left"
        if latest.version != p_run.version_of(name):
            return f"it changed since {self._label(graph, producer)} ran"
        return None

    def _restore_mutated(self, gc: GraphCell, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """A planned cell that mutates a value in place needs that value rebuilt first."""
        changed = False
        for name in sorted(gc.mutates):
            producer = gc.producers.get(name)
            if producer is None or drafts[producer].reasons:
                continue
            changed |= drafts[producer].add(
                Reason(
                    "restores",
                    f"{self._label(graph, gc.cell_id)} re-runs and changes {name} in place, "
                    f"so {name} must be rebuilt first",
                    cells=(gc.cell_id,),
                    symbols=(name,),
                )
            )
        return changed

    def _restore_clobbered(self, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """The last writer of each name must have the last word on it."""
        changed = False
        for name, writer_ids in graph.writers.items():
            if not name.isidentifier():
                # hidden generator state is no notebook name: what matters is that cells
                # drawing from it re-run after it is reset (``upstream``), not its final value
                continue
            final = writer_ids[-1]
            if drafts[final].reasons:
                continue
            clobbering = [
                w
                for w in writer_ids[:-1]
                if drafts[w].reasons and "missing_producer" not in drafts[w].kinds()
            ]
            if clobbering:
                first = clobbering[0]
                changed |= drafts[final].add(
                    Reason(
                        "restores",
                        f"re-running {self._label(graph, first)} overwrites {name}",
                        cells=(first,),
                        symbols=(name,),
                    )
                )
                continue
            reason = self._kernel_clobber(graph, name, final)
            if reason is not None:
                changed |= drafts[final].add(reason)
        return changed

    def _kernel_clobber(self, graph: Graph, name: str, final: str) -> Reason | None:
        run = self._runs.get(final)
        if run is None or run.epoch != self._epoch:
            return None
        latest = self._writers.get(name)
        if latest is not None and latest.origin == "cell" and latest.cell_id == final:
            return None  # it is the kernel's last writer (its run is its latest one)
        if latest is None:
            return Reason("restores", f"{name} is no longer defined in the kernel", symbols=(name,))
        if latest.origin != "cell":
            by = "scratch code" if latest.origin == "scratch" else "the browser"
            return Reason("restores", f"{name} was overwritten by {by}", symbols=(name,))
        other = self._runs.get(latest.cell_id or "")
        if (
            other is not None
            and latest.cell_id in graph.by_id
            and (other.index > run.index)
            != (graph.by_id[latest.cell_id].cell.index > graph.by_id[final].cell.index)
        ):
            return Reason(
                "moved",
                f"cells moved: {self._label(graph, final)} now defines {name} last, "
                f"after {self._label(graph, latest.cell_id)}",
                cells=(latest.cell_id,),
                symbols=(name,),
            )
        return Reason(
            "restores",
            f"{name} was overwritten by running {self._label(graph, latest.cell_id)}",
            cells=(latest.cell_id,) if latest.cell_id else (),
            symbols=(name,),
        )

    def _cause(self, draft: _Draft) -> str:
        kinds = draft.kinds()
        for kind in REASON_ORDER:
            if kind in kinds and kind in _CAUSE_WORDS:
                return _CAUSE_WORDS[kind]
        return "stale"

    def _assemble(self, graph: Graph, drafts: dict[str, _Draft]) -> Plan:
        blocked_ids: set[str] = set()
        for gc in graph.cells:  # notebook order: a producer is decided before its readers
            kinds = drafts[gc.cell_id].kinds()
            if "missing_producer" in kinds:
                blocked_ids.add(gc.cell_id)
                continue
            if any(
                r.kind == "upstream" and r.cells and r.cells[0] in blocked_ids
                for r in drafts[gc.cell_id].reasons
            ):
                blocked_ids.add(gc.cell_id)
        stale: list[PlanEntry] = []
        blocked: list[PlanEntry] = []
        fresh: list[FreshCell] = []
        for gc in graph.cells:
            draft = drafts[gc.cell_id]
            if not draft.reasons:
                fresh.append(FreshCell(gc.cell_id, gc.cell.index))
                continue
            order = {k: i for i, k in enumerate(REASON_ORDER)}
            reasons = tuple(sorted(draft.reasons, key=lambda r: order[r.kind]))
            entry = PlanEntry(
                cell_id=gc.cell_id,
                index=gc.cell.index,
                reasons=reasons,
                produces=tuple(sorted(gc.writes)),
            )
            (blocked if gc.cell_id in blocked_ids else stale).append(entry)
        return Plan(stale=tuple(stale), fresh=tuple(fresh), blocked=tuple(blocked))


def _canonical(stat: StatFn, path: str) -> str:
    """``path`` as ``stat`` names it when the file exists (the literal otherwise)."""
    stamp = stat(path)
    return stamp.path if stamp is not None else path


def _mentions(source: str, path: str) -> bool:
    base = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return path in source or (bool(base) and base in source)
