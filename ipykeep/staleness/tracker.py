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

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Literal

from ipykeep.staleness.analysis import CellAnalysis, analyze_source
from ipykeep.staleness.graph import build_graph, cell_effects
from ipykeep.staleness.models import (
    CellState,
    DynamicCellInfo,
    FileStamp,
    NotebookCell,
    Observed,
    Outcome,
    Plan,
)
from ipykeep.staleness.tracker_model import (
    StatFn,
    _canonical,
    _Draft,
    _hash,
    _mentions,
    _Run,
    _same_stamp,
    _Write,
)
from ipykeep.staleness.tracker_restore import PlanRestores


class StalenessTracker(PlanRestores):
    """The staleness record of one kernel bound to one notebook."""

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
            observed = replace(
                observed, bound=observed.bound | (previous.observed.bound - observed.deleted)
            )
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
                    versions[name] = self._state_versions.setdefault(
                        key, -len(self._state_versions) - 1
                    )
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
            writes = (
                (writes - analyze_source(source).defs)
                | observed.changed
                | (writes & analyze_source(source).assigned_into)
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

    def run_inputs(self, cell_id: str) -> dict[str, str | None]:
        """Name the cell's last run read -> the notebook cell whose write it saw (None: scratch
        code, or nothing had written it)."""
        run = self._runs.get(cell_id)
        return (
            {n: (w.cell_id if w is not None else None) for n, w in run.reads.items()}
            if run is not None
            else {}
        )

    def run_imports(self, cell_id: str) -> dict[str, str]:
        """Names the cell's last run bound by import statements -> what they import."""
        run = self._runs.get(cell_id)
        return dict(run.imports) if run is not None else {}

    def run_files(self, cell_id: str) -> tuple[tuple[FileStamp, ...], tuple[str, ...]]:
        """The files the cell's last run depended on (stamped then) and the paths it wrote."""
        run = self._runs.get(cell_id)
        return (
            (tuple(run.files.values()), tuple(sorted(run.written))) if run is not None else ((), ())
        )

    def run_dynamic(self, cell_id: str) -> DynamicCellInfo | None:
        """What the runtime tracer saw the cell's last run do (None: no tracer, or no run)."""
        run = self._runs.get(cell_id)
        return run.dynamic if run is not None else None

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
        if any(self._reloaded_since(name, run.cell_id) for name in run.imports):
            return False  # its import now gives the module another cell loaded anew
        return any(
            (w := self._writers.get(name)) is None or w.cell_id != run.cell_id for name in writes
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
