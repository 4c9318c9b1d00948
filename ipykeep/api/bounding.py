"""Bounding text for agents: keep a head and a tail, say what was cut and where the rest is.

Both transports (CLI and MCP) use this one function, so a cut looks the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BoundedText:
    text: str
    total_chars: int
    total_lines: int
    truncated: bool


def bound_text(
    text: str, max_chars: int, *, full_path: str | None = None, uri: str | None = None
) -> BoundedText:
    """Return ``text`` whole when it fits in ``max_chars``, else head + marker + tail.

    The split favours whole lines: the head takes ~60% of the budget and the tail the rest,
    both trimmed to line boundaries when a boundary lies close enough, so tracebacks and
    progress logs stay readable. The marker gives the total size and where the full text is.
    """
    total_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if len(text) <= max_chars:
        return BoundedText(text, len(text), total_lines, False)
    where = []
    if full_path:
        where.append(f"full text: {full_path}")
    if uri:
        where.append(f"resource: {uri}")
    budget = max(max_chars - 160 - sum(len(w) for w in where), 80)
    head_len = int(budget * 0.6)
    tail_len = budget - head_len
    head = text[:head_len]
    cut = head.rfind("\n")
    if cut > head_len * 0.5:
        head = head[: cut + 1]
    tail = text[-tail_len:]
    cut = tail.find("\n")
    if 0 <= cut < tail_len * 0.5:
        tail = tail[cut + 1 :]
    omitted = text[len(head) : len(text) - len(tail)]
    omitted_lines = omitted.count("\n")
    marker = (
        f"\n[… {len(omitted):,} chars / {omitted_lines:,} lines cut of {len(text):,} chars /"
        f" {total_lines:,} lines" + ("; " + "; ".join(where) if where else "") + " …]\n"
    )
    if not head.endswith("\n"):
        marker = "\n" + marker.lstrip("\n")
    return BoundedText(head + marker + tail, len(text), total_lines, True)
