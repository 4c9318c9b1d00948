"""Compact text for people at a shell: one summary, or a namespace table."""

from __future__ import annotations

import json
import re
from typing import Any

from ipykeep.api.summaries import ColumnSummary, NamespaceListing, Summary


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"  # unreachable, keeps the type checker content


def _shape(shape: list[int] | None, length: int | None) -> str:
    if shape is not None:
        return "×".join(str(d) for d in shape) if shape else "()"
    return f"len {length}" if length is not None else ""


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _column_line(c: ColumnSummary) -> str:
    parts = [f"  {_value(c.name)}: {c.dtype}"]
    if c.nulls:
        parts.append(f"nulls={c.nulls}")
    if c.min is not None:
        parts.append(f"min={_value(c.min)} max={_value(c.max)}")
    if c.mean is not None:
        parts.append(f"mean={_value(c.mean)}")
    if c.std is not None:
        parts.append(f"std={_value(c.std)}")
    if c.unique is not None:
        parts.append(f"unique={c.unique}")
    if c.top:
        parts.append("top=" + ", ".join(f"{_value(v)}({n})" for v, n in c.top))
    if c.error:
        parts.append(f"error: {c.error}")
    return " ".join(parts)


def render_summary(summary: Summary) -> str:
    """A few lines: header, kind-specific facts, notes. Never the whole object."""
    s = summary
    head = f"{s.name}: {s.type} ({s.kind})"
    extent = _shape(s.shape, s.length)
    if extent:
        head += f" {extent}"
    if s.memory_bytes is not None:
        head += f", {human_bytes(s.memory_bytes)}"
    if s.cell:
        head += f", cell {s.cell}"
    lines = [head]
    if s.degraded:
        lines.append(f"  degraded: {s.degraded_reason or 'partial summary'}")
    for label, value in (
        ("dtype", s.dtype),
        ("device", s.device),
        ("index", s.index),
        ("signature", s.signature),
        ("module", s.module if s.kind != "module" else None),
        ("file", f"{s.file}:{s.line}" if s.file and s.line else s.file),
        ("version", s.version),
        ("doc", s.doc),
    ):
        if value:
            lines.append(f"  {label}: {value}")
    if s.kind == "module" and s.length is not None:
        lines[0] = head.replace(f" len {s.length}", f" {s.length} public names")
    if s.value is not None:
        lines.append(f"  value: {_value(s.value)}")
    if s.nulls is not None:
        lines.append(f"  nulls: {s.nulls}")
    if s.stats:
        lines.append("  stats: " + " ".join(f"{k}={_value(v)}" for k, v in s.stats.items()))
    if s.dims:
        lines.append("  dims: " + ", ".join(f"{k}={v}" for k, v in s.dims.items()))
    if s.columns:
        lines.append("  columns:")
        lines.extend(_column_line(c) for c in s.columns)
    if s.columns_omitted:
        more = f": {s.more_columns}" if s.more_columns else ""
        lines.append(f"  … {s.columns_omitted} more columns{more}")
    for label, types in (("keys", s.key_types), ("values", s.value_types), ("items", s.item_types)):
        if types:
            lines.append(f"  {label}: " + ", ".join(f"{t}×{n}" for t, n in types.items()))
    if s.bases:
        lines.append("  bases: " + ", ".join(s.bases))
    if s.methods:
        lines.append("  methods: " + ", ".join(s.methods))
    if s.attributes:
        lines.append("  attributes: " + ", ".join(s.attributes))
    if s.sample is not None:
        lines.append("  sample: " + _value(s.sample))
    if s.preview is not None:
        lines.append("  preview: " + _value(s.preview))
    if s.repr:
        lines.append(f"  repr: {s.repr}")
    if s.custom:
        lines.append(f"  {s.summarizer or 'custom'}: " + _value(s.custom))
    lines.extend(f"  note: {n}" for n in s.notes)
    return "\n".join(lines)


#: How wide a namespace column grows before its text is shortened.
COLUMN_WIDTH = 40
#: Where a value may be cut: after any character that is not part of a word.
_BOUNDARY = re.compile(r"\W")


def _fit(text: str, width: int = COLUMN_WIDTH, *, whole: bool = False) -> str:
    """``text`` on one line, within ``width`` where it can be shortened at a boundary, never
    inside a word. A dotted name (``pkg.module.Class``) keeps its last parts (``…module.Class``);
    other text ends at a space or punctuation with ``…``. ``whole``: a single word that does not
    fit is kept whole (the column widens) rather than cut, as names and types are."""
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    if len(text) <= width:
        return text
    if " " not in text and "." in text:
        parts = text.split(".")
        for i in range(1, len(parts)):
            tail = "…" + ".".join(parts[i:])
            if len(tail) <= width:
                return tail
        return "…" + parts[-1]
    head = text[: width - 1]
    cuts = [m.start() for m in _BOUNDARY.finditer(head)]
    if cuts and cuts[-1] > 0:
        return head[: cuts[-1]].rstrip() + "…"
    return text if whole else head + "…"


def render_namespace(listing: NamespaceListing) -> str:
    """One aligned row per variable: name, type, shape/length, memory, defining cell."""
    rows = [("name", "type", "shape/len", "memory", "cell")]
    for e in listing.entries:
        extent = _shape(e.shape, e.length)
        if e.value is not None:
            extent = (extent + " " if extent else "") + f"= {_value(e.value)}"
        type_text = e.type + (" (degraded)" if e.degraded else "")
        mem = human_bytes(e.memory_bytes) if e.memory_bytes is not None else ""
        rows.append((e.name, type_text, extent, mem, e.cell or ""))
    fitted = [
        (_fit(r[0], whole=True), _fit(r[1], whole=True), _fit(r[2]), _fit(r[3]), r[4]) for r in rows
    ]
    widths = [max(len(r[i]) for r in fitted) for i in range(4)]
    out = []
    for r in fitted:
        cells = [r[i].ljust(widths[i]) for i in range(4)] + [r[4]]
        out.append("  ".join(cells).rstrip())
    footer = f"{listing.count} variable(s)"
    if listing.count > len(listing.entries):
        footer += f", {listing.count - len(listing.entries)} not listed"
    if listing.degraded:
        footer += "; some entries are degraded (time budget)"
    out.append(footer)
    out.extend(f"note: {n}" for n in listing.notes)
    return "\n".join(out)
