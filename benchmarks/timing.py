"""Shared measurement helpers: summary statistics, interleaved A/B timing, process memory.

The machines these run on are noisy (two cores shared with other work), so absolute times
drift between minutes. Every claim is therefore a ratio of two sides measured in the same
invocation, alternating A, B, A, B… so that a slow patch of time hits both sides alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Stats:
    """Median, min and max of repeated samples (all in the metric's unit)."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if not samples:
            raise ValueError("no samples were taken")
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))

    def to_json(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}


@dataclass(frozen=True)
class Target:
    """A goal: ``ratio`` (subject/baseline) or the subject's own ``value`` against a bound."""

    kind: Literal["ratio", "value", "speedup"]
    op: Literal["<=", "<", ">="]
    bound: float

    def met(self, ratio: float | None, value: float) -> bool | None:
        if self.kind == "ratio":
            x = ratio
        elif self.kind == "speedup":
            x = None if not ratio else 1.0 / ratio
        else:
            x = value
        if x is None:
            return None
        return {"<=": x <= self.bound, "<": x < self.bound, ">=": x >= self.bound}[self.op]

    def describe(self, unit: str) -> str:
        if self.kind == "ratio":
            return f"{self.op} {self.bound:g}x"
        if self.kind == "speedup":
            return f"{self.op} {self.bound:g}x faster"
        return f"{self.op} {self.bound:g} {unit}"


@dataclass(frozen=True)
class Metric:
    """One row of the results table: a subject measured against an optional baseline."""

    scenario: str
    name: str
    unit: str
    value: Stats
    subject: str = "ipykeep"
    baseline: str | None = None
    base: Stats | None = None
    target: Target | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.base is None or self.base.median == 0:
            return None
        return self.value.median / self.base.median

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.ratio, self.value.median)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "name": self.name,
            "unit": self.unit,
            "subject": self.subject,
            "value": self.value.to_json(),
            "baseline": self.baseline,
            "base": self.base.to_json() if self.base else None,
            "ratio": self.ratio,
            "target": self.target.describe(self.unit) if self.target else None,
            "met": self.met,
            "extra": self.extra,
        }


def single(x: float) -> Stats:
    """A deterministic quantity (a byte count): one sample."""
    return Stats.of([float(x)])


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Wall-clock seconds of one awaited call, and its result."""
    t0 = time.perf_counter()
    result = await fn()
    return time.perf_counter() - t0, result


async def interleave(
    sides: dict[str, Callable[[], Awaitable[Any]]],
    repeats: int,
    *,
    warmup: int = 1,
    rotate: bool = False,
) -> dict[str, list[float]]:
    """Run each side ``repeats`` times, alternating (A, B, A, B…); seconds per side.

    ``warmup`` untimed rounds first, so first-call costs (imports, caches) are not counted.
    ``rotate`` starts each round one side later (A B C, B C A, C A B…), so that no side always
    follows the same one: on two cores, what a side's processes still do after its call returns
    (a kernel's output thread, a daemon's bookkeeping) lands on whichever call comes next.
    """
    for _ in range(warmup):
        for fn in sides.values():
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for round_no in range(repeats):
        shift = round_no % len(names) if rotate else 0
        for name in names[shift:] + names[:shift]:
            seconds, _ = await timed(sides[name])
            samples[name].append(seconds)
    return samples


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (psutil if present, else /proc/<pid>/status VmRSS)."""
    try:
        import psutil

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {pid}") from None
