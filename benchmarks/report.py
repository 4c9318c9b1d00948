"""Writing results: the Markdown table, the JSON file and the chart of ratios."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.timing import Metric, Stats


@dataclass
class ScenarioOutcome:
    name: str
    title: str
    seconds: float
    metrics: list[Metric] = field(default_factory=list)
    error: str | None = None


def fmt_number(x: float, unit: str) -> str:
    if unit == "B":
        return f"{x:,.0f} B"
    if unit == "ms":
        return f"{x:.1f} ms"
    if unit == "s":
        return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"
    if unit == "MB":
        return f"{x:.1f} MB"
    return f"{x:g} {unit}"


def fmt_stats(st: Stats | None, unit: str) -> str:
    if st is None:
        return "–"
    if st.n == 1 or st.min == st.max:
        return fmt_number(st.median, unit)
    return f"{fmt_number(st.median, unit)} ({fmt_number(st.min, unit)}–{fmt_number(st.max, unit)})"


def fmt_ratio(m: Metric) -> str:
    r = m.ratio
    if r is None:
        return "–"
    if m.target is not None and m.target.kind == "speedup":
        return f"{r:.3f}x ({1 / r:.0f}x faster)" if r > 0 else f"{r:.3f}x"
    return f"{r:.2f}x"


def verdict(m: Metric) -> str:
    return {True: "yes", False: "**no**", None: "–"}[m.met]


def markdown_table(outcomes: list[ScenarioOutcome]) -> str:
    lines = [
        "| Scenario | Measure | ipykeep side | Baseline | ipykeep: median (min–max) | Baseline: "
        "median (min–max) | Ratio | Target | Met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for out in outcomes:
        if out.error:
            lines.append(
                f"| {out.title} | failed: {out.error.splitlines()[0][:120]} | | | | | | | |"
            )
            continue
        for m in out.metrics:
            lines.append(
                "| "
                + " | ".join(
                    [
                        out.title,
                        m.name,
                        m.subject,
                        m.baseline or "–",
                        fmt_stats(m.value, m.unit),
                        fmt_stats(m.base, m.unit),
                        fmt_ratio(m),
                        m.target.describe(m.unit) if m.target else "–",
                        verdict(m),
                    ]
                )
                + " |"
            )
    return "\n".join(lines)


def write_json(path: Path, outcomes: list[ScenarioOutcome], *, quick: bool, total_s: float) -> None:
    data: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": quick,
        "total_seconds": round(total_s, 1),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": _cpus(),
        },
        "scenarios": {
            o.name: {
                "title": o.title,
                "seconds": round(o.seconds, 1),
                "error": o.error,
                "metrics": [m.to_json() for m in o.metrics],
            }
            for o in outcomes
        },
    }
    path.write_text(json.dumps(data, indent=2))


def _cpus() -> int:
    import os

    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    )


def write_chart(path: Path, outcomes: list[ScenarioOutcome]) -> None:
    """Horizontal bars of ipykeep/baseline (log scale), target bounds as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        (o.title, m) for o in outcomes for m in o.metrics if m.ratio is not None and m.ratio > 0
    ]
    fig, ax = plt.subplots(figsize=(11, 0.42 * max(len(rows), 1) + 1.6))
    labels, ratios, colors = [], [], []
    for title, m in rows:
        labels.append(f"{title.split('.')[0]}. {m.name}"[:70])
        ratios.append(m.ratio)
        colors.append({True: "#3a923a", False: "#c0392b", None: "#8a8a8a"}[m.met])
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, ratios, color=colors)
    for y, (_, m) in zip(ys, rows):
        t = m.target
        if t is not None and t.kind in ("ratio", "speedup"):
            bound = t.bound if t.kind == "ratio" else 1 / t.bound
            ax.plot([bound, bound], [y - 0.4, y + 0.4], color="black", linewidth=2)
        ax.text(m.ratio, y, f" {m.ratio:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="#444", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("ipykeep / baseline (log scale; < 1 is better; black tick = target)")
    ax.set_title(
        "ipykeep vs baseline, same invocation (green: target met, red: missed, grey: no target)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
