"""Compact pdb-like text for a debugger result (CLI output, and the MCP text block)."""

from __future__ import annotations

from ipykeep.api.debugger import DebugFrame, DebugResult
from ipykeep.api.summaries import NamespaceListing, Summary
from ipykeep.client.summaries import render_namespace, render_summary


def _frame_line(frame: DebugFrame, selected: int | None) -> str:
    marker = ">" if frame.index == selected else " "
    place = f"cell {frame.cell_id}" if frame.cell_id else frame.file
    text = f"  {frame.text}" if frame.text else ""
    return f"{marker} {frame.index} {frame.function}  {place}:{frame.line}{text}"


def render_debug(result: DebugResult) -> str:
    head = result.state.replace("_", "-")
    if result.handle:
        head += f" {result.handle}"
    if result.where is not None:
        w = result.where
        head += f" at {f'cell {w.cell_id}' if w.cell_id else w.file}:{w.line} in {w.function}"
    if result.reason:
        head += f" ({result.reason})"
    lines = [head]
    if result.frames:
        lines += [_frame_line(f, result.frame) for f in result.frames]
    if result.value is not None:
        lines.append(render_summary(Summary.model_validate(result.value)))
    if result.locals is not None:
        lines.append(render_namespace(NamespaceListing.model_validate(result.locals)))
    if result.source:
        lines.append(result.source)
    if result.breakpoints:
        lines.append("breakpoints: " + "; ".join(result.breakpoints))
    if result.stop_on_raise:
        lines.append("stops on raised exceptions")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
