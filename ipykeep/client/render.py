"""Plain-text renderings of engine records, shared by the CLI and the MCP server.

They are written for a reader that ignores structured content: short, in a stable order, with
every bounded output's marker kept as it is. They read records by attribute only, so they also
render the JSON a daemon sent wrapped in ``views.view`` (the thin CLI never loads pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipykeep.client.views import view

if TYPE_CHECKING:
    from ipykeep.api.errors import IpykeepError
    from ipykeep.api.records import (
        BatchResult,
        CellState,
        ExecutionRecord,
        InterruptResult,
        KernelRecord,
        StatusRecord,
    )


def render_error(exc: IpykeepError) -> str:
    """The one way an ipykeep error is told to a person: what happened, then what to do."""
    return f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else "")


def render_execution(rec: ExecutionRecord, *, header: bool = True) -> str:
    parts: list[str] = []
    if header:
        where = (
            f"cell {rec.index} ({rec.cell_id})"
            if rec.cell_id and rec.index is not None
            else rec.kind
        )
        dur = f", {rec.duration_s:.2f}s" if rec.duration_s is not None else ""
        count = f" [{rec.execution_count}]" if rec.execution_count else ""
        paused = f" (paused at {rec.paused})" if rec.paused else ""
        parts.append(f"{rec.handle} {where}{count}: {rec.state}{paused}{dur}")
    for notice in rec.notices or []:
        parts.append(f"notice: {notice}")
    if rec.output.text:
        parts.append(rec.output.text.rstrip("\n"))
    for img in rec.output.images:
        parts.append(f"[image {img.mime}: {img.path}]")
    if rec.error:
        parts.append(rec.error.traceback.rstrip("\n") or f"{rec.error.ename}: {rec.error.evalue}")
    return "\n".join(parts)


def render_batch(batch: BatchResult) -> str:
    parts = [render_execution(r) for r in batch.results]
    for s in batch.skipped:
        parts.append(f"skipped cell {s.index} ({s.cell_id}): {s.reason}")
    if batch.write is not None:
        if batch.write.written:
            parts.append(f"outputs written for {len(batch.write.updated)} cell(s)")
        elif batch.write.pending:
            parts.append(f"outputs of {len(batch.write.updated)} cell(s) queued for the notebook")
        elif batch.write.error:
            parts.append(f"outputs not written: {batch.write.error}")
        for cid in batch.write.skipped_edited:
            parts.append(
                f"cell {cid} was edited on disk while it ran: kept the new source, "
                "no output written"
            )
        for rep in batch.write.repairs:
            parts.append(f"notebook repaired: {rep}")
    for notice in batch.notices or []:
        parts.append(f"notice: {notice}")
    failed = [r for r in batch.results if r.state != "ok"]
    stopped = {
        "interrupted": "; the batch was interrupted",
        "kernel_died": "; the kernel died",
        "kernel_unresponsive": "; the kernel stopped responding",
        "kernel_closed": "; the kernel was closed",
    }.get(batch.stopped or "", "")
    parts.append(batch_tally(len(batch.results), len(failed), len(batch.skipped)) + stopped)
    return "\n".join(parts)


def batch_tally(ran: int, failed: int, skipped: int) -> str:
    """The last line of a batch, in the words of its header: of the cells planned, how many ran
    (the failed ones among them) and how many were skipped when their turn came."""
    return (
        f"{ran} of {ran + skipped} planned cell(s) ran ({failed} failed), "
        f"{skipped} skipped at run time"
    )


def render_cell_line(c: CellState) -> str:
    handle = f" {c.handle}" if c.handle else ""
    reasons = ""
    if c.reasons:
        reasons = "  ← " + "; ".join(str(r.get("message") or r.get("kind")) for r in c.reasons)
    first = f"  {c.first_line}" if c.first_line else ""
    paused = f"  (paused at {c.paused})" if c.paused else ""
    version = f" @{c.version}" if c.version else ""
    return (
        f"  [{c.index:>3}] {c.cell_id:<14} {c.state:<9}{handle:<6}{version}{first[:60]}"
        f"{reasons}{paused}"
    )


def render_kernel(k: KernelRecord) -> str:
    head = (
        f"{k.kernel_id}  pid {k.pid}  {k.state}  {k.notebook or '(scratch)'}  dataflow={k.dataflow}"
    )
    extra = [f"cwd {k.cwd}"]
    if k.stale_count:
        extra.append(f"{k.stale_count} cell(s) need a run (run-stale)")
    if k.warm is not None and not k.warm.finished:
        extra.append(f"warming: {k.warm.done}/{k.warm.total} cells")
    elif k.warm is not None and k.warm.total:  # a restored kernel ran no warm-up cell
        failed = (
            f", {len(k.warm.failed)} failed: {', '.join(k.warm.failed)}" if k.warm.failed else ""
        )
        extra.append(f"warmed {k.warm.done}/{k.warm.total} cells{failed}")
    lines = [head, "  " + "; ".join(extra)]
    if k.environment is not None and k.environment.kind != "remote":
        lines.append(f"  environment: {k.environment.why}")
    if k.served_url:
        lines.append(f"  served at:\n{k.served_url}")
    if k.running:
        lines.append(f"  running: {', '.join(k.running)}")
    if k.checkpoints:
        lines.append(f"  checkpoints: {k.checkpoints}")
    for notice in k.notices or []:
        lines.append(f"  notice: {notice}")
    for c in k.cells or []:
        lines.append(render_cell_line(c))
    return "\n".join(lines)


def render_status(st: StatusRecord) -> str:
    d = st.daemon
    lines = [f"daemon pid {d.pid}  version {d.version}  project {d.project}"]
    if not st.kernels:
        lines.append("no kernels")
    lines.extend(render_kernel(k) for k in st.kernels)
    return "\n".join(lines)


def render_interrupt(res: InterruptResult) -> str:
    return f"{res.kernel_id}: {res.message}"


def _secs(value: float | None) -> str:
    return "" if value is None else (f"{value:.2f} s" if value < 10 else f"{value:.0f} s")


def render_plan(result: dict[str, Any]) -> str:
    """A run_stale result (plan, or executed plan) as a readable table."""
    lines: list[str] = []
    stale, blocked = result.get("stale", []), result.get("blocked", [])
    conditional = result.get("conditional", [])
    executed = result.get("executed")
    cost = result.get("cost") or {}
    if result.get("fresh_run"):
        lines.append(
            "restarted the kernel and ran every code cell "
            f"(the plan had {len(stale)} stale cell(s))"
        )
    elif not stale and not blocked and not conditional:
        lines.append("nothing is stale: every cell matches a fresh run of the notebook")
    else:
        # Executed, the list is what was planned; the batch's last line says what ran of it.
        lines.append(f"{'planned' if executed else 'stale'}: {len(stale)} cell(s), in this order:")
        for e in stale:
            lines.extend(_entry_lines(e))
        if conditional:
            lines.append(
                f"conditional: {len(conditional)} cell(s), run only if their inputs change"
                + ("" if executed else " (decided as the cells above run)")
                + ":"
            )
            for e in conditional:
                lines.extend(_entry_lines(e, e.get("condition")))
        for e in blocked:
            lines.append(
                f"  [{e['index']:>3}] {e['cell_id']:<14} NOT run (would fail in a fresh run)"
            )
            for r in e["reasons"]:
                lines.append(f"        {r['kind']:<16} {r['message']}")
        if (stale or conditional) and cost and not executed:
            lines.extend(_cost_lines(cost))
    fresh = result.get("fresh", [])
    if fresh and not result.get("fresh_run"):
        lines.append(f"fresh: {len(fresh)} cell(s) not re-run")
    batch = result.get("batch")
    if batch:
        lines.append(render_batch(view(batch)))
    if result.get("reads") == "saved_file":
        lines.append(
            "plan of the notebook as last saved: unsaved edits in the browser are not in it"
        )
    elif result.get("reads") == "live_document":
        lines.append("plan of the shared document: unsaved edits in the browser are in it")
    for notice in result.get("notices") or []:
        lines.append(f"notice: {notice}")
    return "\n".join(lines)


def _entry_lines(e: dict[str, Any], condition: str | None = None) -> list[str]:
    """One planned cell: index, id, what it produces, its last duration; then its reasons."""
    produces = f"  → {', '.join(e['produces'][:6])}" if e.get("produces") else ""
    took = (
        f"  ({_secs(e['last_duration_s'])} last run)"
        if e.get("last_duration_s") is not None
        else ""
    )
    lines = [f"  [{e['index']:>3}] {e['cell_id']:<14}{produces}{took}"]
    if condition:
        lines.append(f"        {'condition':<16} {condition}")
    lines.extend(f"        {r['kind']:<16} {r['message']}" for r in e["reasons"])
    return lines


def _cost_lines(cost: dict[str, Any]) -> list[str]:
    line = f"estimated: ~{_secs(cost['plan_s'])} for the plan"
    if cost.get("unmeasured"):
        line += (
            f" (+ {len(cost['unmeasured'])} cell(s) never run: {', '.join(cost['unmeasured'][:5])})"
        )
    if cost.get("conditional_s") is not None:
        line += f", + up to ~{_secs(cost['conditional_s'])} if the conditional cells run"
    if cost.get("fresh_s") is not None:
        line += f"; ~{_secs(cost['fresh_s'])} to restart and run every cell"
    lines = [line]
    if cost.get("memo_saved_s"):
        lines.append(
            f"from the memo: ~{_secs(cost['memo_saved_s'])} saved by the cells that load "
            "their stored run (loads_from_memo)"
        )
    if cost.get("fresh_is_cheaper"):
        lines.append(
            "running this plan would take longer than restarting the kernel and running every "
            "cell, which gives the same state: `ipykeep run-stale --execute --fresh` "
            "(variables made only by scratch code are lost)"
        )
    return lines
