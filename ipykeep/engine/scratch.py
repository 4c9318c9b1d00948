"""Scratch code: runs on the main shell when it is free and on an ipykernel-7 subshell when it
is not, so a long cell never blocks the agent; when every subshell is busy and the queue is
full the call is refused with a retryable error.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from ipykeep.api.errors import ExecutionLostError, IpykeepError, KernelBusyError, KernelDiedError
from ipykeep.engine.batch import archive
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.driver import WARM_TRACEBACKS
from ipykeep.kernel.execution import Execution

if TYPE_CHECKING:
    from ipykeep.engine.runner import ExecutionRunner

log = logging.getLogger("ipykeep.engine")


async def submit(
    runner: ExecutionRunner, session: KernelSession, code: str, request_id: str | None
) -> Execution:
    """Create the execution and start it in the background (on a subshell if the main shell is
    taken)."""
    if not session.process.alive:
        lost = session.process.provider.lost_reason  # a remote kernel's link, not the kernel
        raise KernelDiedError(
            f"kernel {session.kernel_id} is not running" + (f": {lost}" if lost else ""),
            hint="restart it (`ipykeep restart` / the restart_kernel tool), "
            "then `ipykeep run-stale --execute` / the run_stale tool re-runs what is needed",
        )
    session.process.refuse_if_unresponsive()
    subshell = None
    if session.scheduler.main_lock.locked():
        subshell = await session.process.acquire_subshell(session.config.max_subshells)
        if subshell is None and session.scheduler.queued >= session.config.max_queue:
            raise KernelBusyError(
                f"kernel {session.kernel_id} is saturated: "
                f"{len(session.running())} executions running or queued",
                hint="wait for running work to finish (`ipykeep read` / the read_cell tool), "
                "or interrupt it, then retry",
            )
    ex = runner.new_execution(session, code, "scratch", request_id=request_id)
    if request_id:
        session.remember_request(request_id, code, ex.handle)
    session.scheduler.spawn(_run(runner, session, ex, subshell))
    return ex


async def _run(
    runner: ExecutionRunner, session: KernelSession, ex: Execution, subshell: str | None
) -> None:
    scheduler = session.scheduler
    try:
        if subshell is not None:
            # ipyflow's tracer is not thread-safe: subshell code runs untraced there.
            untraced = session.process.dataflow == "ipyflow"
            try:
                await session.process.run(ex, subshell_id=subshell, untraced=untraced)
            except ExecutionLostError:
                session.process.retire_subshell(subshell)
                subshell = None
                raise
            finally:
                if subshell is not None:
                    session.process.release_subshell(subshell)
        else:
            scheduler.queued += 1
            try:
                async with scheduler.main_lock:
                    scheduler.queued -= 1
                    ex.expressions = runner.scratch_expressions(session, ex.code)
                    if "import" in ex.code:
                        ex.expressions["ipykeep_warm"] = WARM_TRACEBACKS
                    await session.process.run(ex)
            except BaseException:
                scheduler.queued = (
                    max(0, scheduler.queued - 1) if ex.state == "queued" else scheduler.queued
                )
                raise
    except IpykeepError as exc:
        # A stopped kernel's fix (resume or restart) belongs with the execution it held.
        unresponsive = exc.code == "kernel_unresponsive"
        ex.finish("lost", note=f"{exc.message}; {exc.hint}" if unresponsive else exc.message)
    except Exception as exc:  # keep the daemon alive whatever happens
        log.exception("scratch execution %s failed", ex.handle)
        ex.finish("lost", note=f"internal error: {exc}")
    session.touch()
    archive(session, ex)
    for observer in runner.observers:
        with contextlib.suppress(Exception):
            await observer.after_scratch(session, ex)
