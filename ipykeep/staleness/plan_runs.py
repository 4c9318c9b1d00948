"""What running a notebook's cells costs, as measured in one kernel: the plan's cost fields,
``run_stale(execute=True, fresh=True)`` and progress while a plan runs.

Measurements live in the kernel's ``PlanMeasurements`` (``staleness/state.py``): the last kernel
start, probes included (``restart_s``), each cell's duration in the last top-to-bottom run from a
new kernel (warm-up or a fresh run, ``fresh_durations``), the daemon's seconds per cell besides
the cells' own runs over the last executed plan and the last fresh run, and the batch being
executed (``progress``). The staleness service calls in here; the decision itself is
``plan_cost.estimate``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ipykeep.api.records import BatchResult, WarmProgress
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.execution import Execution
from ipykeep.project.notebook import NotebookSnapshot
from ipykeep.staleness import plan_cost
from ipykeep.staleness.state import RunningPlan, measurements_of

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

FRESH_REASON = "run-stale --fresh"


def note_started(session: KernelSession) -> None:
    """At kernel start (session just created): what a fresh run pays before its first cell."""
    measurements_of(session).restart_s = time.time() - session.created_at


def note_cell(session: KernelSession, cell_id: str, ex: Execution) -> None:
    """After a notebook cell: remember its duration when it ran as part of a fresh run."""
    plan = measurements_of(session)
    if ex.duration is None:
        return
    if session.state == "warming" or plan.fresh_run:
        plan.fresh_durations[cell_id] = ex.duration
    if plan.measuring is not None:
        plan.measuring[1].append(ex.duration)


def begin_measuring(session: KernelSession, since: float | None = None) -> None:
    """A batch starts whose time beyond its cells' own runs is the daemon's per-cell work;
    ``since``: when the work it belongs to started (monotonic; a plan's own making)."""
    measurements_of(session).measuring = (time.monotonic() if since is None else since, [])


def end_measuring(session: KernelSession, fresh: bool) -> None:
    """The batch begun last ended: keep its per-cell overhead, for a fresh run's estimate
    (``fresh``) or a plan's. A batch that ran no cell changes nothing."""
    plan = measurements_of(session)
    if plan.measuring is None:
        return
    started, durations = plan.measuring
    plan.measuring = None
    per_cell = plan_cost.Overhead.measure(time.monotonic() - started, durations)
    if per_cell is None:
        return
    if fresh:
        plan.fresh_overhead_s = per_cell
    else:
        plan.plan_overhead_s = per_cell


def last_durations(session: KernelSession) -> dict[str, float]:
    """Cell id -> seconds its latest finished execution in this kernel took."""
    out = {}
    for cid, run in session.cell_runs.items():
        ex = session.executions.get(run.handle)
        if ex is not None and ex.duration is not None and ex.finished:
            out[cid] = ex.duration
    return out


def annotate(
    session: KernelSession,
    snap: NotebookSnapshot,
    planned: Sequence[str],
    plan_json: dict[str, Any],
    conditional: Sequence[str] = (),
) -> dict[str, Any]:
    """Add ``last_duration_s`` to the plan's entries; the plan's cost against a fresh run
    (the conditional cells' cost apart: they may not run)."""
    last = last_durations(session)
    for e in plan_json["stale"] + plan_json["conditional"] + plan_json["blocked"]:
        if e["cell_id"] in last:
            e["last_duration_s"] = round(last[e["cell_id"]], 3)
    cost = plan_cost.estimate(
        planned,
        [c.cell_id for c in snap.code_cells],
        last,
        measurements_of(session).fresh_durations,
        measurements_of(session).restart_s,
        conditional,
        plan_cost.Overhead(
            measurements_of(session).plan_overhead_s, measurements_of(session).fresh_overhead_s
        ),
    )
    return cost.to_json()


async def run_fresh(
    engine: Engine, session: KernelSession, snap: NotebookSnapshot, wait_for_write: bool = True
) -> BatchResult:
    """Restart the kernel and run every code cell in order (warm-up's path, measured)."""
    plan = measurements_of(session)
    expected = {**plan.fresh_durations, **last_durations(session)}
    ids = [c.cell_id for c in snap.code_cells]
    progress = track_progress(session, ids, expected)  # from the restart on: 0/N while it lasts
    try:
        started = time.monotonic()
        async with session.scheduler.main_lock:  # not while a cell of another batch runs
            await engine.restart_kernel(session, reason=FRESH_REASON)
        plan.restart_s = restart_s = time.monotonic() - started
        # restart_kernel's notice says the variables are gone: every cell is about to run again
        session.notices = [n for n in session.notices if f"restarted ({FRESH_REASON})" not in n]
        session.notices.append(
            f"kernel {session.kernel_id} restarted ({restart_s:.1f} s) to run every cell afresh"
        )
        plan.fresh_run = True
        plan.fresh_durations = {}
        begin_measuring(session)
        return await engine.run_batch(
            session, snap, ids, progress=progress, wait_for_write=wait_for_write
        )
    finally:
        end_measuring(session, fresh=True)
        plan.fresh_run = False
        progress.finished = True


def track_progress(
    session: KernelSession, ids: list[str], durations: dict[str, float] | None = None
) -> WarmProgress:
    """A progress record for the batch about to run (``progress_of`` reads it); the caller sets
    ``finished`` when the batch ends."""
    progress = WarmProgress(done=0, total=len(ids))
    expected = last_durations(session) if durations is None else durations
    measurements_of(session).progress = RunningPlan(
        progress, tuple(ids), expected, time.monotonic()
    )
    return progress


def progress_of(session: KernelSession) -> dict[str, Any]:
    """Cells done of the batch being executed, the one running, and the seconds left by the
    cells' last measured durations (absent when one was never measured)."""
    tracked = measurements_of(session).progress
    if tracked is None:
        return {"kernel_id": session.kernel_id, "done": 0, "total": 0, "finished": True}
    progress = tracked.progress
    out: dict[str, Any] = {"kernel_id": session.kernel_id, **progress.model_dump(exclude_none=True)}
    out["elapsed_s"] = round(time.monotonic() - tracked.started, 3)
    left = tracked.cell_ids[progress.done :]
    if left and all(c in tracked.durations for c in left):
        out["remaining_s"] = round(sum(tracked.durations[c] for c in left), 3)
    return out


def merge_batches(rounds: Sequence[BatchResult]) -> BatchResult:
    """One result for the rounds a plan ran in: every cell run and skipped, in order; the last
    round's write (the notebook holds every round's outputs by then)."""
    last = rounds[-1]
    if len(rounds) == 1:
        return last
    notices = [n for b in rounds for n in (b.notices or [])]
    return BatchResult(
        kernel_id=last.kernel_id,
        ok=all(b.ok for b in rounds),
        results=[r for b in rounds for r in b.results],
        skipped=[s for b in rounds for s in b.skipped],
        write=last.write,
        stopped=next((b.stopped for b in rounds if b.stopped is not None), None),
        notices=notices or None,
    )
