"""Writing a batch's outputs into the notebook: coalesced, and off the reply path when asked.

The write itself (``project.notebook.write_outputs``: re-read, merge by cell id, validate, fsync,
rename under the directory lock) costs several milliseconds, most of it the ``fsync``; paid
before every reply it was most of ipykeep's fixed cost per cell. So a batch *queues* its
outputs here, and they are written:

- before the reply, for callers that promise the file holds them (``wait_for_write``, the
  default of ``run_cells``/``run_stale`` over RPC and the CLI; warm-up, so ``ipykeep start``
  returns when outputs are written);
- otherwise within ``write_delay_ms`` of the batch's end, by a timer, in a worker thread (the
  MCP tools reply first: agents read the outputs from the result), all queued batches in one
  write;
- before a kernel is closed and when the daemon stops, and before the notebook is published or
  served, so a clean stop never loses an output.

Writes of one notebook happen one at a time and always carry the latest output of every queued
cell, so the file never goes back to older outputs. Each write is the same atomic merge as
before: the user's notebook is old or new bytes, never half-written. A daemon killed (or a
machine that loses power) between a batch and its write loses at most that batch's outputs
(``write_delay_ms``); they stay in the result and in the kernel's archival record. A write that
fails after the reply (read-only file, full disk, a file saved continuously by another program)
is reported as a notice on the next result.

While the notebook is served as a shared document (``session.hosting.document``), the same
queue goes into that document instead of the file; the Jupyter server saves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ipykeep.api.errors import IpykeepError
from ipykeep.api.records import WriteResult
from ipykeep.engine.session import KernelSession, LiveDocument
from ipykeep.kernel.execution import Execution
from ipykeep.project.notebook import CellOutputs, WriteReport, write_outputs

log = logging.getLogger("ipykeep.engine")


def queue(session: KernelSession, ran: list[tuple[Execution, str]]) -> list[str]:
    """Queue the outputs of executions ``ran`` (with the source each ran); returns the cell ids.

    Starts the timer that writes them within ``write_delay_ms`` unless one is already waiting.
    """
    queued = _enqueue(session, ran)
    timer = session.writes.timer
    if queued and (timer is None or timer.done()):
        session.writes.timer = asyncio.ensure_future(
            _later(session, session.config.write_delay_ms / 1000)
        )
    return queued


def _enqueue(session: KernelSession, ran: list[tuple[Execution, str]]) -> list[str]:
    if not ran or session.notebook is None or not session.config.write_outputs:
        return []
    queued = []
    for ex, src in ran:
        if ex.cell_id:
            session.writes.pending[ex.cell_id] = CellOutputs(
                source=src, outputs=ex.notebook_outputs(), execution_count=ex.execution_count
            )
            queued.append(ex.cell_id)
    return queued


async def _later(session: KernelSession, delay: float) -> None:
    await asyncio.sleep(delay)
    session.writes.timer = None
    try:
        await flush(session)
    except Exception:  # a bug must not end as an unretrieved task exception
        log.exception("write-back of %s failed", session.notebook)


async def flush(session: KernelSession) -> WriteResult | None:
    """Write every queued output now (waiting for a write under way); None if nothing was queued.

    Safe to call from any task: writes are serialised by the session's write lock, and a
    caller that is cancelled while the write runs leaves it to finish (it is shielded).
    """
    state = session.writes
    async with state.lock:
        updates, state.pending = state.pending, {}
        if not updates or session.notebook is None:
            return None
        if session.hosting.document is not None:
            return await _into_document(session, session.hosting.document, updates)
        work = asyncio.ensure_future(asyncio.to_thread(write_outputs, session.notebook, updates))
        try:
            rep = await asyncio.shield(work)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                rep = await work  # the write goes on: record what it did before giving up
                _account(session, rep)
            raise
        except IpykeepError as exc:
            session.notices.append(f"outputs not written: {exc.message}")
            log.warning("outputs of %s not written: %s", session.kernel_id, exc.message)
            return WriteResult(written=False, error=exc.message)
        _account(session, rep)
        return WriteResult(
            written=rep.written,
            updated=rep.updated,
            skipped_edited=rep.skipped_edited,
            repairs=rep.repairs,
        )


async def _into_document(
    session: KernelSession, document: LiveDocument, updates: dict[str, CellOutputs]
) -> WriteResult:
    """Served as a shared document: the outputs go into it (the browsers show them at once and
    the server saves them), under the same rule as on disk: a cell edited while it ran keeps
    its new source and gets no output."""
    try:
        rep = await document.write_outputs(updates)
    except IpykeepError as exc:
        session.notices.append(f"outputs not written: {exc.message}")
        return WriteResult(written=False, error=exc.message)
    skipped = rep.get("skipped_edited", [])
    if skipped:
        session.notices.append(
            "cells edited in the shared document while they ran kept their new source and got "
            "no output: " + ", ".join(skipped)
        )
    return WriteResult(written=True, updated=rep.get("updated", []), skipped_edited=skipped)


def _account(session: KernelSession, rep: WriteReport) -> None:
    if rep.content_hash:
        session.own_writes.append(rep.content_hash)
    if rep.repairs:
        name = session.notebook.name if session.notebook is not None else "the notebook"
        session.notices.append(f"{name} repaired on write: " + "; ".join(rep.repairs))
    if rep.skipped_edited:
        session.notices.append(
            "cells edited on disk while they ran kept their new source and got no output: "
            + ", ".join(rep.skipped_edited)
        )


async def write_now(session: KernelSession, ran: list[tuple[Execution, str]]) -> WriteResult | None:
    """Write ``ran`` and everything queued before returning (the old once-per-batch write);
    no timer is started: nothing is left for it."""
    if not _enqueue(session, ran):
        return None
    return await flush(session)


def pending_result(cells: list[str]) -> WriteResult | None:
    """What a reply that did not wait for the write says about it."""
    return WriteResult(written=False, pending=True, updated=cells) if cells else None


async def close(session: KernelSession) -> None:
    """Flush before a kernel closes: a clean stop never loses an output."""
    timer, session.writes.timer = session.writes.timer, None
    if timer is not None and not timer.done() and timer is not asyncio.current_task():
        timer.cancel()
    with contextlib.suppress(Exception):
        await flush(session)
