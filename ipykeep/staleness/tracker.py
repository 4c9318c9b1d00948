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

The tracker owns a ``TrackerState`` (``tracker_state``) and delegates: ``tracker_events``
records what happened, ``tracker_reasons`` finds each cell's own reasons, ``tracker_restore``
propagates them and restores clobbered values, ``tracker_imports`` answers what an import gives.

Pure: no I/O, no asyncio, no clocks. ``stat`` is injected by the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Literal

from ipykeep.staleness import tracker_events, tracker_reasons, tracker_replan, tracker_restore
from ipykeep.staleness.graph import build_graph
from ipykeep.staleness.models import (
    CellVerdict,
    DynamicCellInfo,
    FileStamp,
    NotebookCell,
    Observed,
    Outcome,
    Plan,
    Reason,
)
from ipykeep.staleness.tracker_state import CellDraft, StatFn, TrackerState


class StalenessTracker:
    """The staleness record of one kernel bound to one notebook."""

    def __init__(self) -> None:
        self.state = TrackerState()

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
        error: str | None = None,
    ) -> None:
        """A notebook cell finished on the main shell (call in execution order).

        ``error``: how a failed run raised (``ModuleNotFoundError: No module named 'x'``).

        ``observed`` is the kernel's namespace evidence for this run; it outranks the static
        guesses about what the cell changed, for as long as the cell's source stays the same.

        ``files_read`` are the files the run opened for reading (stamped after the run);
        ``files_written`` the paths it opened for writing: a later cell reading one of them
        re-runs after this cell does.
        ``stat``, when given, stamps the path literals the cell names and the watched files it
        depends on, so reads the runtime hook cannot see still count.
        """
        tracker_events.record_cell_run(
            self.state,
            cell_id,
            index,
            source,
            outcome,
            files_read=files_read,
            dynamic=dynamic,
            stat=stat,
            files_written=files_written,
            observed=observed,
            error=error,
        )

    def environment_changed(self) -> None:
        """Packages were installed into the kernel's environment: a cell that failed may not
        fail again, so failed cells are planned again."""
        self.state.environment += 1

    def record_scratch(
        self,
        source: str,
        origin: Literal["scratch", "browser"] = "scratch",
        dynamic: DynamicCellInfo | None = None,
        observed: Observed | None = None,
    ) -> None:
        """Code outside the notebook ran in the same kernel (agent scratch code, a browser)."""
        tracker_events.record_scratch(self.state, source, origin, dynamic, observed)

    def kernel_restarted(self) -> None:
        """The kernel lost all its state: every earlier run stops counting."""
        tracker_events.kernel_restarted(self.state)

    def carried_into(self, epoch: int) -> None:
        """Make the runs of this tracker's current epoch count in kernel epoch ``epoch``: the
        kernel restarted since, and every value those runs left was loaded back into it (a
        named checkpoint restored whole)."""
        tracker_events.carried_into(self.state, epoch)

    def lost_to_restart(self) -> list[str]:
        """The cells whose last run was in an earlier kernel (its values are gone)."""
        return [cid for cid, run in self.state.runs.items() if run.epoch != self.state.epoch]

    @property
    def epoch(self) -> int:
        """How many kernel restarts the tracker has seen."""
        return self.state.epoch

    def watch(self, path: str, stamp: FileStamp | None) -> None:
        """Make ``path`` an input of the notebook (``stamp``: the file now).

        Cells whose source names the file (its path or base name) depend on it; when no cell
        names it, every cell does, since there is no telling which one reads it.
        """
        self.state.watched[path] = stamp if stamp is not None else FileStamp.missing(path)

    def forget_cell(self, cell_id: str) -> None:
        """Drop the run record of a cell (its names stay in the kernel)."""
        self.state.runs.pop(cell_id, None)

    @property
    def watched(self) -> tuple[str, ...]:
        """The files registered as inputs of the notebook."""
        return tuple(self.state.watched)

    # ------------------------------------------------------------------ queries

    def plan(
        self, cells: Sequence[NotebookCell], stat: StatFn, running: Collection[str] = ()
    ) -> Plan:
        """The cells to run, in notebook order, for the notebook as given (read from disk now);
        ``running``: cells about to run by hand, planned as cells that run even when they would
        fail the same way again (so what they read or change in place is restored first)."""
        state = self.state
        observed, carried, raised = tracker_reasons.runtime_evidence(state, cells)
        dynamic = tracker_reasons.still_valid_dynamic(state, cells)
        graph = build_graph(cells, dynamic, observed, carried, raised)
        drafts = {gc.cell_id: CellDraft() for gc in graph.cells}
        watch_deps = tracker_reasons.watch_dependents(state, graph)
        for gc in graph.cells:
            tracker_reasons.direct_reasons(state, gc, graph, drafts[gc.cell_id], stat, watch_deps)
        for cell_id in running:
            if cell_id in drafts and drafts[cell_id].failing:
                tracker_restore.unfail(drafts[cell_id])
        tracker_reasons.block(graph, drafts)
        writers_by_path = tracker_restore.file_writers(state, graph, stat)
        tracker_restore.propagate(state, graph, drafts, writers_by_path)
        keeps = tracker_restore.keeps_values(state, graph, drafts)
        return tracker_restore.assemble(graph, drafts, keeps)

    def still_planned(self, cell_id: str, reasons: Iterable[Reason], since: int) -> bool:
        """Whether a re-plan now would certainly keep ``cell_id``, planned (with ``reasons``)
        for what other cells do, because a producer that re-ran after ``since`` (a ``seq``)
        gave it a new input; answered without a re-plan (False: not known, re-plan)."""
        return tracker_replan.input_rewritten(self.state, cell_id, reasons, since)

    @property
    def seq(self) -> int:
        """How many runs (notebook cells and scratch code) the tracker has recorded."""
        return self.state.seq

    def cell_states(self, cells: Sequence[NotebookCell], stat: StatFn) -> dict[str, CellVerdict]:
        """Per code cell: ``never_run``, ``stale``, ``failed`` (stale as it failed) or ``ok``."""
        plan = self.plan(cells, stat)
        planned = {e.cell_id: e for e in plan.stale + plan.conditional + plan.blocked}
        out: dict[str, CellVerdict] = {}
        for cell in cells:
            if cell.cell_type != "code":
                continue
            run = self.state.runs.get(cell.cell_id)
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
        return {name: w.cell_id for name, w in self.state.writers.items() if w.cell_id is not None}

    def still_written_by(self, cell_id: str) -> list[str]:
        """The names the cell's last run wrote that no later write replaced, sorted (from that
        run's own record: the cost is the cell's names, not the notebook's)."""
        run = self.state.runs.get(cell_id)
        if run is None:
            return []
        writers = self.state.writers
        return sorted(
            n for n in run.versions if (w := writers.get(n)) is not None and w.cell_id == cell_id
        )

    def run_inputs(self, cell_id: str) -> dict[str, str | None]:
        """Name the cell's last run read -> the notebook cell whose write it saw (None: scratch
        code, or nothing had written it)."""
        run = self.state.runs.get(cell_id)
        return (
            {n: (w.cell_id if w is not None else None) for n, w in run.reads.items()}
            if run is not None
            else {}
        )

    def run_imports(self, cell_id: str) -> dict[str, str]:
        """Names the cell's last run bound by import statements -> what they import."""
        run = self.state.runs.get(cell_id)
        return dict(run.imports) if run is not None else {}

    def run_files(self, cell_id: str) -> tuple[tuple[FileStamp, ...], tuple[str, ...]]:
        """The files the cell's last run depended on (stamped then) and the paths it wrote."""
        run = self.state.runs.get(cell_id)
        return (
            (tuple(run.files.values()), tuple(sorted(run.written))) if run is not None else ((), ())
        )

    def run_dynamic(self, cell_id: str) -> DynamicCellInfo | None:
        """What the runtime tracer saw the cell's last run do (None: no tracer, or no run)."""
        run = self.state.runs.get(cell_id)
        return run.dynamic if run is not None else None

    def last_outcome(self, cell_id: str) -> Outcome | None:
        """How the cell's last run ended (None: it has not run)."""
        run = self.state.runs.get(cell_id)
        return run.outcome if run is not None else None

    def value_restored(self, name: str, cell_id: str, source: str) -> bool:
        """The value of ``name`` that ``cell_id``'s last run (of ``source``) left was loaded back
        into the kernel (from that run's checkpoint): the kernel holds that write again, so the
        cell need not re-run to restore it. False, and nothing changes, when the cell's last run
        is not that one (it was edited, failed, or ran in an earlier kernel since)."""
        return tracker_events.value_restored(self.state, name, cell_id, source)
