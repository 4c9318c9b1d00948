"""The typed records the engine returns, built from a session and its executions.

Large output goes to an artifact (the record carries a bounded view plus its path and URI);
images always do. A full disk costs the artifact, never the result.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from ipykeep.api.bounding import bound_text
from ipykeep.api.records import (
    CellState,
    ErrorInfo,
    ExecutionRecord,
    ImageRef,
    KernelRecord,
    OutputView,
)
from ipykeep.engine.retention import from_archive
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.execution import Execution
from ipykeep.project.cell_edits import cell_version
from ipykeep.project.notebook import NotebookSnapshot

log = logging.getLogger("ipykeep.engine")

StaleReasons = dict[str, list[dict[str, Any]]]
CellStateKind = Literal["ok", "failed", "stale", "running", "never_run", "markdown"]
KernelStateKind = Literal["starting", "warming", "idle", "busy", "unresponsive", "dead", "closed"]


def output_view(session: KernelSession, ex: Execution, cursor: int) -> tuple[OutputView, int]:
    text, new_cursor = ex.text_since(cursor)
    full_path = uri = None
    images = []
    try:
        if len(text) > session.config.max_output_chars:
            art = session.archive.store_text(text)
            full_path, uri = str(art.path), art.uri
        for img in ex.images_since(cursor):
            art = session.archive.store(base64.b64decode(img["data"]), img["mime"])
            images.append(ImageRef(mime=img["mime"], path=str(art.path), uri=art.uri))
    except OSError as exc:  # a full disk costs the artifact, never the result
        log.warning("artifact of %s not stored: %s", ex.handle, exc)
        session.notice_once(
            f"artifacts could not be stored ({exc.strerror or exc}); "
            "the output shown is all there is"
        )
    bounded = bound_text(text, session.config.max_output_chars, full_path=full_path, uri=uri)
    view = OutputView(
        text=bounded.text,
        truncated=bounded.truncated,
        total_chars=bounded.total_chars,
        total_lines=bounded.total_lines,
        full_path=full_path,
        uri=uri,
        images=images,
        dropped_bytes=ex.dropped_bytes,
    )
    return view, new_cursor


def error_info(session: KernelSession, ex: Execution) -> ErrorInfo | None:
    if not ex.error:
        return None
    tb = "\n".join(ex.error.get("traceback", []))
    bounded = bound_text(tb, max(session.config.max_output_chars, 1500))
    return ErrorInfo(ename=ex.error["ename"], evalue=ex.error["evalue"], traceback=bounded.text)


def execution_record(
    session: KernelSession, ex: Execution, cursor: int = 0, reader: str | None = None
) -> ExecutionRecord:
    """The execution's record with the output since ``cursor`` (its ``cursor`` field is the new
    one). A spilled execution's output is read from the archive (``retention.py``)."""
    if ex.spilled:
        ex = from_archive(session.archive, ex)
    output, new_cursor = output_view(session, ex, cursor)
    index = None
    if ex.cell_id and ex.cell_id in session.cell_runs:
        index = session.cell_runs[ex.cell_id].index
    return ExecutionRecord(
        handle=ex.handle,
        kernel_id=session.kernel_id,
        kind=ex.kind,
        state=ex.state,
        cell_id=ex.cell_id,
        index=index,
        execution_count=ex.execution_count,
        duration_s=round(ex.duration, 4) if ex.duration is not None else None,
        subshell=ex.subshell or None,
        paused=ex.paused if not ex.finished else None,
        output=output,
        error=error_info(session, ex),
        cursor=new_cursor,
        notices=session.take_notices(reader),
    )


def kernel_state(session: KernelSession) -> KernelStateKind:
    if session.closed:
        return "closed"
    if not session.process.alive and session.state not in ("starting",):
        return "dead"
    if session.process.unresponsive is not None:
        return "unresponsive"
    if session.state in ("starting", "warming"):
        return session.state
    return "busy" if session.running() else "idle"


def kernel_record(
    session: KernelSession,
    cells: list[CellState] | None,
    stale_count: int | None,
    summary: str | None = None,
    reader: str | None = None,
) -> KernelRecord:
    return KernelRecord(
        kernel_id=session.kernel_id,
        pid=session.process.pid,
        state=kernel_state(session),
        notebook=str(session.notebook) if session.notebook else None,
        cwd=str(session.cwd),
        python=session.process.python,
        dataflow=session.process.dataflow,
        running=session.running(),
        stale_count=stale_count,
        warm=session.warm,
        cells=cells,
        served_url=session.hosting.served_url,
        notices=session.peek_notices(reader),
        checkpoints=summary,
        environment=session.environment,
    )


def cell_states(
    session: KernelSession, snap: NotebookSnapshot, stale: StaleReasons | None
) -> list[CellState]:
    """Each cell's state; ``stale`` is what the staleness judge says (None: no judge, so a cell
    is stale when its source changed since it ran)."""
    reasons = stale or {}
    out = []
    for cell in snap.cells:
        first = cell.source.strip().splitlines()[0][:80] if cell.source.strip() else ""
        if cell.cell_type != "code":
            out.append(
                CellState(
                    cell_id=cell.cell_id,
                    index=cell.index,
                    cell_type=cell.cell_type,
                    state="markdown",
                    first_line=first,
                    version=cell_version(cell.source),
                )
            )
            continue
        run = session.cell_runs.get(cell.cell_id)
        ex = session.executions.get(run.handle) if run else None
        state: CellStateKind
        if ex is not None and ex.state in ("running", "queued"):
            state = "running"
        elif run is None:
            state = "never_run"
        elif run.state != "ok":
            state = "failed"
        elif cell.cell_id in reasons or (stale is None and run.source != cell.source):
            state = "stale"
        else:
            state = "ok"
        out.append(
            CellState(
                cell_id=cell.cell_id,
                index=cell.index,
                cell_type="code",
                state=state,
                handle=run.handle if run else None,
                paused=ex.paused if ex is not None and not ex.finished else None,
                execution_count=run.execution_count if run else None,
                reasons=reasons.get(cell.cell_id),
                first_line=first,
                version=cell_version(cell.source),
            )
        )
    return out
