"""Turning engine records into MCP tool results, within budget.

Hosts forward different parts of a result to their model. Claude Code sends ``structuredContent``
when it is present (else the text), plus image blocks; Codex sends ``structuredContent`` alone
when it is present, dropping text *and* images, else the text and images. So:

- A result without inlined images carries both channels, each self-sufficient: ``content`` is
  one text block rendered by ``client/render.py`` (the text the CLI prints, bounded output and
  its head/tail marker kept as is); ``structuredContent`` holds the record's fields *and* what
  the model must read (the bounded ``output``, the bounded traceback, plan entries with their
  reasons, cell listings). Each stays within the byte budget on its own.
- A result that inlines images (a plot) sends **no** ``structuredContent``: the text block
  (which names each image's artifact URI) and the image blocks, the one shape both hosts pass
  on whole. No tool declares an output schema, so leaving structured content out is allowed.
- Tools whose record is itself the payload (``inspect``, ``namespace``…) send no structured
  content: their compact JSON text is the result, sent once.
- Failures set ``isError`` and carry the error envelope ``{code, message, retryable, hint}``
  both as JSON text and as structured content (it is small).

A kernel's notices (a restore, a restart, a file changed on disk) stay pending in the engine
until an execution takes them, while kernel records only peek at them; ``NoticeLedger`` makes
each one reach the agent once.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent

from ipykeep.api.bounding import bound_text
from ipykeep.api.debugger import DebugResult
from ipykeep.api.errors import IpykeepError
from ipykeep.api.records import (
    BatchResult,
    CellsRecord,
    CellState,
    ExecutionRecord,
    ImageRef,
    InterruptResult,
    KernelRecord,
)
from ipykeep.client.debug_view import render_debug
from ipykeep.client.render import (
    render_batch,
    render_cell_line,
    render_execution,
    render_interrupt,
    render_kernel,
    render_plan,
)
from ipykeep.mcp_server.catalog import ResultKind
from ipykeep.mcp_server.images import ImageLimits, prepare_image

#: Images inlined in one result; the rest are named by path.
MAX_IMAGES = 4


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def error_result(exc: IpykeepError) -> CallToolResult:
    env = exc.envelope()
    return CallToolResult(
        content=[TextContent(text=_json(env))], structured_content=env, is_error=True
    )


def execution_summary(rec: ExecutionRecord, max_output: int | None = None) -> dict[str, Any]:
    """The structured view of an execution, with its (engine-bounded) output and traceback.

    ``max_output`` cuts the output further, for batches that hold many executions.
    """
    out: dict[str, Any] = {
        "handle": rec.handle,
        "kernel_id": rec.kernel_id,
        "state": rec.state,
        "cursor": rec.cursor,
    }
    if rec.paused:
        out["paused"] = rec.paused
    if rec.cell_id:
        out["cell_id"] = rec.cell_id
        out["index"] = rec.index
    if rec.execution_count is not None:
        out["execution_count"] = rec.execution_count
    if rec.duration_s is not None:
        out["duration_s"] = rec.duration_s
    if rec.output.truncated:
        out["truncated"] = True
        out["total_chars"] = rec.output.total_chars
        out["uri"] = rec.output.uri
    if rec.output.images:
        out["images"] = [img.uri for img in rec.output.images]
    if rec.output.text:
        text = rec.output.text
        if max_output is not None and len(text) > max_output:
            text = bound_text(text, max_output, uri=rec.output.uri).text
        out["output"] = text
    if rec.error:
        error: dict[str, Any] = {"ename": rec.error.ename, "evalue": rec.error.evalue[:200]}
        if rec.error.traceback:
            tb = rec.error.traceback
            error["traceback"] = (
                bound_text(tb, max_output).text if max_output and len(tb) > max_output else tb
            )
        out["error"] = error
    if rec.notices:
        out["notices"] = rec.notices
    return out


def _per_item(budget: int, count: int) -> int:
    """Share of a listing budget for one of ``count`` items (never below a readable minimum)."""
    return max(400, budget // max(count, 1))


def _batch_summary(batch: BatchResult, budget: int) -> dict[str, Any]:
    share = _per_item(budget, len(batch.results))
    out: dict[str, Any] = {
        "kernel_id": batch.kernel_id,
        "ok": batch.ok,
        "results": [execution_summary(r, share) for r in batch.results],
        "skipped": [s.model_dump() for s in batch.skipped],
    }
    if batch.stopped:
        out["stopped"] = batch.stopped
    if batch.write is not None:
        out["write"] = batch.write.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if batch.notices:
        out["notices"] = batch.notices
    return out


def _plan_summary(raw: dict[str, Any], budget: int) -> dict[str, Any]:
    """A run_stale result: the plan's cells in order, each with its reasons (kind and message).

    Past ``budget`` characters, entries keep only their id and index (enough to run them, and
    ``reasons_cut`` says how many lost their reasons; the text channel has them, cut the same way).
    """
    used = 0
    cut = 0

    def entry(e: dict[str, Any]) -> dict[str, Any]:
        nonlocal used, cut
        out: dict[str, Any] = {"cell_id": e["cell_id"], "index": e["index"]}
        full = {
            **out,
            "reasons": [{"kind": r["kind"], "message": r["message"]} for r in e.get("reasons", [])],
        }
        if e.get("condition"):
            full["condition"] = e["condition"]
        if e.get("produces"):
            full["produces"] = e["produces"][:12]
        if e.get("last_duration_s") is not None:
            full["last_duration_s"] = e["last_duration_s"]
        size = len(_json(full))
        if used + size > budget:
            cut += 1
            return out
        used += size
        return full

    out: dict[str, Any] = {
        "kernel_id": raw.get("kernel_id"),
        "executed": bool(raw.get("executed")),
        "ok": raw.get("ok", True),
        "stale": [entry(e) for e in raw.get("stale", [])],
        "blocked": [entry(e) for e in raw.get("blocked", [])],
        "fresh": len(raw.get("fresh", [])),
    }
    if raw.get("conditional"):
        out["conditional"] = [entry(e) for e in raw["conditional"]]
    if cut:
        out["reasons_cut"] = cut
    if raw.get("reads"):
        out["reads"] = raw["reads"]
    if raw.get("cost"):
        out["cost"] = raw["cost"]
    if raw.get("fresh_run"):
        out["fresh_run"] = True
    if raw.get("notices"):
        out["notices"] = raw["notices"]
    return out


def _cell_entry(c: CellState) -> dict[str, Any]:
    out: dict[str, Any] = {"cell_id": c.cell_id, "index": c.index, "state": c.state}
    if c.version:
        out["version"] = c.version
    if c.handle:
        out["handle"] = c.handle
    if c.paused:
        out["paused"] = c.paused
    if c.first_line:
        out["first_line"] = c.first_line[:80]
    if c.reasons:
        out["reasons"] = [str(r.get("message") or r.get("kind")) for r in c.reasons]
    return out


def _kernel_summary(rec: KernelRecord) -> dict[str, Any]:
    out = rec.model_dump(mode="json", exclude_none=True, exclude={"cells"})
    if rec.cells:
        out["cells"] = [_cell_entry(c) for c in rec.cells]
    return out


def _cells_summary(rec: CellsRecord, budget: int) -> dict[str, Any]:
    """list_cells as data: every cell (trimmed to the budget, the rest counted) and scratch runs."""
    cells: list[dict[str, Any]] = []
    used = 0
    for c in rec.cells:
        item = _cell_entry(c)
        used += len(_json(item))
        if used > budget:
            break
        cells.append(item)
    out: dict[str, Any] = {
        "kernel_id": rec.kernel_id,
        "notebook": rec.notebook,
        "counts": dict(Counter(c.state for c in rec.cells)),
        "cells": cells,
    }
    if len(cells) < len(rec.cells):
        out["cells_omitted"] = len(rec.cells) - len(cells)
    if rec.scratch:
        out["scratch"] = [render_execution(r).splitlines()[0] for r in rec.scratch]
    return out


def _cells_text(rec: CellsRecord) -> str:
    notebook = rec.notebook or "(scratch kernel: no notebook)"
    lines = [f"{rec.kernel_id} {notebook}: {len(rec.cells)} cell(s)"]
    lines.extend(render_cell_line(c) for c in rec.cells)
    if rec.scratch:
        lines.append("recent scratch executions:")
        lines.extend("  " + render_execution(r).splitlines()[0] for r in rec.scratch)
    return "\n".join(lines)


async def _images(
    refs: list[ImageRef], limits: ImageLimits
) -> tuple[list[ContentBlock], list[str]]:
    blocks: list[ContentBlock] = []
    notes: list[str] = []
    for i, ref in enumerate(refs):
        if i >= MAX_IMAGES:
            notes.append(f"image not inlined (more than {MAX_IMAGES} in one result): {ref.path}")
            continue
        prepared = await anyio.to_thread.run_sync(prepare_image, Path(ref.path), ref.mime, limits)
        if prepared.data is not None:
            blocks.append(
                ImageContent(data=base64.b64encode(prepared.data).decode(), mime_type=prepared.mime)
            )
        if prepared.note:
            notes.append(prepared.note)
    return blocks, notes


class ResultBuilder:
    """Builds tool results under the configured text and image budgets."""

    def __init__(self, limits: ImageLimits, max_chars: int) -> None:
        self.limits = limits
        #: Cap for listings, batches and JSON payloads. Each output inside is already bounded by
        #: the engine; a batch cut here still names every handle in its structured content, and
        #: read_cell returns any one of them.
        self.listing_chars = max_chars * 4

    def _bounded(self, text: str) -> str:
        return bound_text(text, self.listing_chars).text

    async def build(self, kind: ResultKind, raw: Any) -> CallToolResult:
        if kind == "execution":
            rec = ExecutionRecord.model_validate(raw)
            return await self._with_images(
                render_execution(rec), rec.output.images, execution_summary(rec)
            )
        if kind == "batch":
            batch = BatchResult.model_validate(raw)
            images = [img for r in batch.results for img in r.output.images]
            return await self._with_images(
                self._bounded(render_batch(batch)),
                images,
                _batch_summary(batch, self.listing_chars),
            )
        if kind == "stale":
            summary = _plan_summary(raw, self.listing_chars)
            ran = BatchResult.model_validate(raw["batch"]) if raw.get("batch") else None
            images = [img for r in ran.results for img in r.output.images] if ran else []
            if ran is not None:
                summary.update(_batch_summary(ran, self.listing_chars))
            return await self._with_images(self._bounded(render_plan(raw)), images, summary)
        if kind == "kernel":
            kernel = KernelRecord.model_validate(raw)
            return self._text(render_kernel(kernel), _kernel_summary(kernel))
        if kind == "kernels":
            recs = [KernelRecord.model_validate(r) for r in raw]
            text = "\n".join(render_kernel(r) for r in recs) if recs else "no kernels running"
            return self._text(self._bounded(text), {"kernels": [_kernel_summary(r) for r in recs]})
        if kind == "cells":
            # RPC drops None fields, and CellsRecord.notebook has no default (scratch kernels).
            cells = CellsRecord.model_validate({"notebook": None, **raw})
            return self._text(
                self._bounded(_cells_text(cells)), _cells_summary(cells, self.listing_chars)
            )
        if kind == "interrupt":
            res = InterruptResult.model_validate(raw)
            return self._text(render_interrupt(res), res.model_dump(mode="json", exclude_none=True))
        if kind == "debug":
            debug = DebugResult.model_validate(raw)
            return self._text(self._bounded(render_debug(debug)), debug.dump())
        return self._text(self._bounded(_json(raw)), None)

    @staticmethod
    def _text(text: str, structured: dict[str, Any] | None) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=text)], structured_content=structured)

    async def _with_images(
        self, text: str, refs: list[ImageRef], structured: dict[str, Any]
    ) -> CallToolResult:
        blocks, notes = await _images(refs, self.limits)
        if notes:
            text = "\n".join([text, *(f"note: {n}" for n in notes)])
        if not blocks:
            return CallToolResult(content=[TextContent(text=text)], structured_content=structured)
        # Codex would forward structured content alone and lose the images: send text + images.
        uris = [ref.uri for ref in refs if ref.uri]
        if uris:
            text = "\n".join([text, "images: " + " ".join(uris)])
        return CallToolResult(content=[TextContent(text=text), *blocks])


def _record_notices(rec: dict[str, Any]) -> list[list[str]]:
    """The notice lists in a raw record, each as the list object it holds (edited in place)."""
    nested: list[Any] = [rec, *(rec.get("results") or [])]
    batch = rec.get("batch")
    if isinstance(batch, dict):
        nested += [batch, *(batch.get("results") or [])]
    return [
        item["notices"]
        for item in nested
        if isinstance(item, dict) and isinstance(item.get("notices"), list)
    ]


#: Result kinds whose record takes the kernel's pending notices; the others only peek at them.
_TAKING: frozenset[str] = frozenset({"execution", "batch", "stale"})


class NoticeLedger:
    """Which pending notices of each kernel the agent has already been shown.

    A notice a kernel record peeked at is remembered, so the next record (a status poll, or the
    execution that finally takes it) does not show it again. Once a record has taken the
    kernel's notices, the engine holds none, and an identical later notice is a new event.
    """

    def __init__(self) -> None:
        self._shown: dict[str, set[str]] = {}

    def fresh(self, kind: ResultKind, raw: Any) -> list[str]:
        """Drop already-shown notices from ``raw`` (in place); return the ones left, in order."""
        left: list[str] = []
        records = raw if isinstance(raw, list) else [raw]
        for rec in records:
            if not isinstance(rec, dict):
                continue
            kernel = str(rec.get("kernel_id") or "")
            shown = self._shown.setdefault(kernel, set())
            for notices in _record_notices(rec):
                keep = [n for n in notices if n not in shown]
                notices[:] = keep
                left.extend(keep)
                shown.update(keep)
            if kind in _TAKING:
                shown.clear()
        return left

    def export(self) -> dict[str, list[str]]:
        """The ledger as JSON, for the process a session moves to (``session.py``)."""
        return {kernel: sorted(shown) for kernel, shown in self._shown.items() if shown}

    def restore(self, shown: dict[str, list[str]]) -> None:
        self._shown = {kernel: set(notices) for kernel, notices in shown.items()}
