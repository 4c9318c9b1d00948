"""Notebook cells on the main shell: a batch runs cells in order under the scheduler's main
lock, then hands their outputs to the write-back once (``engine/writeback.py``: written before the
reply when the caller waits for it, else within ``write_delay_ms``).

A batch stops running cells when the kernel dies, closes, is restarted under it, or a cell is
interrupted; the cells it did not run are reported as skipped and keep pointing at their last
real execution. ``skip_if`` lets the caller (a stale plan) skip cells whose inputs failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ipykeep.api.errors import IpykeepError
from ipykeep.api.records import BatchResult, ExecutionRecord, SkippedCell, WarmProgress
from ipykeep.engine import writeback
from ipykeep.engine.session import CellRun, KernelSession
from ipykeep.engine.session_records import execution_record
from ipykeep.kernel.driver import WARM_TRACEBACKS
from ipykeep.kernel.execution import Execution
from ipykeep.project.notebook import Cell, NotebookSnapshot, read_notebook

if TYPE_CHECKING:
    from ipykeep.engine.runner import ExecutionRunner

log = logging.getLogger("ipykeep.engine")

SkipIf = Callable[[str, set[str]], "str | None"]

_STOP_REASONS = {
    "kernel_died": "kernel is not running",
    "kernel_unresponsive": "the kernel stopped responding",
    "kernel_closed": "kernel closed",
    "kernel_restarted": "the kernel was restarted under the batch",
    "interrupted": "the batch was interrupted",
}


def archive(session: KernelSession, ex: Execution, retain: bool = True) -> None:
    """Append to the kernel's record; a full or read-only disk costs the record, not the run.
    With ``retain``, the execution counts against the output budget (``retention.py``) at once;
    a batch's cells count once their outputs are queued for the notebook."""
    try:
        session.archive.append_execution(ex)
        if retain:
            session.retain([ex])
    except OSError as exc:
        log.warning("record of %s not written: %s", ex.handle, exc)
        session.notice_once(
            f"the archival record could not be written ({exc.strerror or exc}); "
            "results stay in memory"
        )


def _skip(
    session: KernelSession,
    ex: Execution,
    cell: Cell,
    before: CellRun | None,
    reason: str,
    skipped: list[SkippedCell],
) -> None:
    ex.finish("lost", note=f"skipped: {reason}")
    # A skipped cell keeps pointing at its last real execution.
    if before is None:
        session.cell_runs.pop(cell.cell_id, None)
    else:
        session.cell_runs[cell.cell_id] = before
    skipped.append(SkippedCell(cell_id=cell.cell_id, index=cell.index, reason=reason))


async def _run_cell(
    runner: ExecutionRunner, session: KernelSession, cell: Cell, ex: Execution, may_load: bool
) -> None:
    for observer in runner.observers:
        if await observer.before_cell(session, cell, ex, may_load):
            # loaded in place of a run (a memoized run): recorded, not run
            session.cell_runs[cell.cell_id] = CellRun(
                ex.handle, cell.source, ex.state, ex.execution_count, cell.index
            )
            archive(session, ex, retain=False)
            return
    ex.expressions = {**runner.cell_expressions(session, cell), "ipykeep_warm": WARM_TRACEBACKS}
    timeout = session.config.cell_timeout or None
    # Shielded: a caller that goes away (cancellation) leaves the execution tracked to its
    # end, so the batch can interrupt it and see it finish.
    run = asyncio.ensure_future(session.process.run(ex, timeout=timeout))
    try:
        await asyncio.shield(run)
    except IpykeepError as exc:
        if exc.code == "timeout":
            await runner.interrupt_execution(session, ex)
        # A kernel that stopped answering may still run the cell when it resumes: not "failed".
        unknown = exc.code == "kernel_unresponsive"
        ex.finish(
            "lost" if unknown else "failed",
            note=f"{exc.message}; {exc.hint}" if unknown else exc.message,
        )
    session.cell_runs[cell.cell_id] = CellRun(
        ex.handle, cell.source, ex.state, ex.execution_count, cell.index
    )
    archive(session, ex, retain=False)
    for observer in runner.observers:
        await observer.after_cell(session, cell, ex)


async def run_batch(
    runner: ExecutionRunner,
    session: KernelSession,
    snap: NotebookSnapshot,
    cell_ids: list[str],
    *,
    progress: WarmProgress | None = None,
    skip_if: SkipIf | None = None,
    wait_for_write: bool = True,
    may_load: bool = False,
) -> BatchResult:
    """Run cells on the main shell in order, then write outputs back once (before returning
    with ``wait_for_write``; else queued, and the result's ``write`` says ``pending``).
    ``may_load``: an observer may load a cell's stored run instead (``before_cell``)."""
    by_id = snap.by_id()
    results: list[ExecutionRecord] = []
    skipped: list[SkippedCell] = []
    failed: set[str] = set()
    ran: list[tuple[Execution, str]] = []
    # Queue every execution first so the handles exist (and show as queued) at once.
    planned = []
    previous: dict[str, CellRun | None] = {}
    for cid in cell_ids:
        cell = by_id[cid]
        ex = runner.new_execution(session, cell.source, "cell", cell_id=cid)
        previous[cid] = session.cell_runs.get(cid)
        session.cell_runs[cid] = CellRun(ex.handle, cell.source, "queued", None, cell.index)
        planned.append((cell, ex))
    stopped: str | None = None
    current: Execution | None = None
    try:
        async with session.scheduler.main_lock:
            generation = session.process.generation
            for cell, ex in planned:
                session.touch()
                if progress is not None:
                    progress.current = cell.cell_id
                why = skip_if(cell.cell_id, failed) if skip_if else None
                if stopped is None and (not session.process.alive or session.closed):
                    stopped = "kernel_died" if not session.closed else "kernel_closed"
                elif stopped is None and session.process.generation != generation:
                    # Restarted under the batch: what the cells above built is gone.
                    stopped = "kernel_restarted"
                if why or stopped:
                    reason = why or _STOP_REASONS[stopped]  # type: ignore[index]
                    _skip(session, ex, cell, previous[cell.cell_id], reason, skipped)
                    continue
                current = ex
                await _run_cell(runner, session, cell, ex, may_load)
                current = None
                if ex.state != "ok":
                    failed.add(cell.cell_id)
                    if progress is not None:
                        progress.failed.append(cell.cell_id)
                if ex.state == "interrupted":
                    stopped = "interrupted"  # an interrupt stops the whole batch
                elif ex.state == "lost" and not session.process.alive:
                    stopped = "kernel_died"
                elif ex.state == "lost" and session.process.unresponsive is not None:
                    stopped = "kernel_unresponsive"
                ran.append((ex, cell.source))
                results.append(execution_record(session, ex))
                if progress is not None:
                    progress.done += 1
            for observer in runner.observers:
                await observer.batch_finished(session)
            if stopped is None and ran and not session.closed:
                # the kernel can go after its last cell, in what runs then (a checkpoint, a
                # thread the cell started): the batch's state is gone with it all the same
                if not session.process.alive:
                    stopped = "kernel_died"
                elif session.process.generation != generation:
                    stopped = "kernel_restarted"
    except asyncio.CancelledError:
        # The caller went away (a disconnected client): stop the running cell, run no more.
        if current is not None and not current.finished:
            with contextlib.suppress(BaseException):
                await asyncio.shield(runner.interrupt_execution(session, current))
        for cell, ex in planned:
            if not ex.finished:
                _skip(session, ex, cell, previous[cell.cell_id], "the client disconnected", skipped)
        with contextlib.suppress(Exception):
            writeback.queue(session, ran)  # written by the timer: nobody waits for this reply
        session.retain([ex for ex, _ in ran])
        raise
    finally:
        # Whatever failed above (a full disk, a bug), no cell stays queued or running.
        for cell, ex in planned:
            if not ex.finished:
                ex.finish("lost", note="skipped: the batch stopped early")
                before = previous[cell.cell_id]
                latest = session.cell_runs.get(cell.cell_id)
                if latest is not None and latest.handle == ex.handle:
                    if before is None:
                        session.cell_runs.pop(cell.cell_id, None)
                    else:
                        session.cell_runs[cell.cell_id] = before
    try:
        if wait_for_write:
            write = await writeback.write_now(session, ran)
        else:
            write = writeback.pending_result(writeback.queue(session, ran))
    finally:
        session.retain([ex for ex, _ in ran])
    if stopped == "kernel_unresponsive":
        session.notices.append(
            f"{session.process.unresponsive}; {len(skipped)} cell(s) did not run — "
            f"{session.process.responsiveness.fix}, then `ipykeep run-stale --execute` / the "
            "run_stale tool re-runs what is needed"
        )
    if stopped == "kernel_died":
        lost = (
            f"{len(skipped)} cell(s) did not run"
            if skipped
            else "the state its cells built is gone"
        )
        session.notices.append(
            f"kernel {session.kernel_id} died; {lost} — "
            "restart it (`ipykeep restart` / the restart_kernel tool) "
            "and `ipykeep run-stale --execute` / the run_stale tool re-runs what is needed"
        )
    return BatchResult(
        kernel_id=session.kernel_id,
        ok=not failed and stopped is None,
        results=results,
        skipped=skipped,
        write=write,
        stopped=stopped,
        notices=session.take_notices(),
    )


async def start_warm(
    runner: ExecutionRunner, session: KernelSession, snap: NotebookSnapshot, wait: bool
) -> None:
    """Start warming a kernel that just started (or started again after it died)."""
    if snap.code_cells:
        session.state = "warming"
        session.warm = WarmProgress(done=0, total=len(snap.code_cells))
        session.warm_task = asyncio.create_task(run_warm(runner, session))
        if wait:
            await asyncio.shield(session.warm_task)


async def run_warm(runner: ExecutionRunner, session: KernelSession) -> BatchResult:
    """Warm-up: every code cell of the notebook, in order, right after the kernel started."""
    try:
        snap = read_notebook(session.notebook)  # type: ignore[arg-type]
        for observer in runner.observers:
            await observer.warm_starting(session)
        cell_ids = [c.cell_id for c in snap.code_cells]
        for observer in runner.observers:  # checkpoints restore what is fresh; the rest runs
            cell_ids = await observer.warm_cells(session, snap, cell_ids)
        if session.warm is not None:
            session.warm.total = len(cell_ids)
        result = await run_batch(runner, session, snap, cell_ids, progress=session.warm)
        # Nobody reads the warm-up's batch result: what it took (the notebook upgraded on its
        # first write, say) goes back to the kernel, for the record that ends the warm-up.
        session.notices[:0] = [n for n in result.notices or [] if n not in session.notices]
        return result
    finally:
        for observer in runner.observers:
            with contextlib.suppress(Exception):
                await observer.warm_finished(session)
        if session.warm:
            session.warm.finished = True
            session.warm.current = None
        if session.state == "warming":
            session.state = "idle"
