"""What running a notebook's cells costs, as measured in one kernel: the plan's cost fields,
``run_stale(execute=True, fresh=True)`` and progress while a plan runs.

Measurements live in the kernel entry's ``hooks``: ``restart_s`` (the last kernel start, probes
included), ``fresh_durations`` (each cell's duration in the last top-to-bottom run from a new
kernel: warm-up or a fresh run) and ``plan_progress`` (the batch being executed). The staleness
layer calls in here; the decision itself is ``plan_cost.estimate``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from . import plan_cost
from .engine import Engine, KernelEntry
from .execution import Execution
from .notebook import NotebookSnapshot
from .records import BatchResult, WarmProgress

FRESH_REASON = "run-stale --fresh"


def note_started(entry: KernelEntry) -> None:
    """At kernel start (entry created just before): what a fresh run pays before its first cell."""
    entry.hooks["restart_s"] = time.time() - entry.created_at


def note_cell(entry: KernelEntry, cell_id: str, ex: Execution) -> None:
    """After a notebook cell: remember its duration when it ran as part of a fresh run."""
    if (entry.state == "warming" or entry.hooks.get("fresh_run")) and ex.duration is not None:
        entry.hooks.setdefault("fresh_durations", {})[cell_id] = ex.duration


def last_durations(entry: KernelEntry) -> dict[str, float]:
    """Cell id -> seconds its latest finished execution in this kernel took."""
    out = {}
    for cid, run in entry.cell_runs.items():
        ex = entry.executions.get(run.handle)
        if ex is not None and ex.duration is not None and ex.finished:
            out[cid] = ex.duration
    return out


def annotate(entry: KernelEntry, snap: NotebookSnapshot, planned: Sequence[str], plan_json: dict[str, Any]) -> dict[str, Any]:
    """Add ``last_duration_s`` to the plan's entries; the plan's cost against a fresh run."""
    last = last_durations(entry)
    for e in plan_json["stale"] + plan_json["blocked"]:
        if e["cell_id"] in last:
            e["last_duration_s"] = round(last[e["cell_id"]], 3)
    cost = plan_cost.estimate(
        planned,
        [c.cell_id for c in snap.code_cells],
        last,
        entry.hooks.get("fresh_durations", {}),
        entry.hooks.get("restart_s"),
    )
    return cost.to_json()


async def run_fresh(engine: Engine, entry: KernelEntry, snap: NotebookSnapshot) -> BatchResult:
    """Restart the kernel and run every code cell in order (warm-up's path, measured)."""
    expected = {**entry.hooks.get("fresh_durations", {}), **last_durations(entry)}
    ids = [c.cell_id for c in snap.code_cells]
    progress = track_progress(entry, ids, expected)  # from the restart on: 0/N while it lasts
    try:
        started = time.monotonic()
        async with entry.main_lock:  # not while a cell of another batch runs
            await engine.restart_kernel(entry, reason=FRESH_REASON)
        entry.hooks["restart_s"] = time.monotonic() - started
        # restart_kernel's notice says the variables are gone: every cell is about to run again
        entry.notices = [n for n in entry.notices if f"restarted ({FRESH_REASON})" not in n]
        entry.notices.append(f"kernel {entry.kernel_id} restarted ({entry.hooks['restart_s']:.1f} s) to run every cell afresh")
        entry.hooks["fresh_run"] = True
        entry.hooks["fresh_durations"] = {}
        return await engine._run_batch(entry, snap, ids, progress=progress)
    finally:
        entry.hooks.pop("fresh_run", None)
        progress.finished = True


def track_progress(entry: KernelEntry, ids: list[str], durations: dict[str, float] | None = None) -> WarmProgress:
    """A progress record for the batch about to run (``progress_of`` reads it); the caller sets
    ``finished`` when the batch ends."""
    progress = WarmProgress(done=0, total=len(ids))
    expected = last_durations(entry) if durations is None else durations
    entry.hooks["plan_progress"] = (progress, ids, expected, time.monotonic())
    return progress


def progress_of(entry: KernelEntry) -> dict[str, Any]:
    """Cells done of the batch being executed, the one running, and the seconds left by the
    cells' last measured durations (absent when one was never measured)."""
    tracked = entry.hooks.get("plan_progress")
    if tracked is None:
        return {"kernel_id": entry.kernel_id, "done": 0, "total": 0, "finished": True}
    progress, ids, durations, started = tracked
    out: dict[str, Any] = {"kernel_id": entry.kernel_id, **progress.model_dump(exclude_none=True)}
    out["elapsed_s"] = round(time.monotonic() - started, 3)
    left = ids[progress.done :]
    if left and all(c in durations for c in left):
        out["remaining_s"] = round(sum(durations[c] for c in left), 3)
    return out
