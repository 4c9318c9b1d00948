"""What a stale plan will cost, against restarting the kernel and running every cell.

Estimates come from measurements, never guesses: a planned cell costs what its last run in
this kernel took; the fresh alternative costs the kernel's last measured (re)start plus each
code cell's duration in the last fresh run (warm-up, or ``run-stale --execute --fresh``),
falling back to its last run. A fresh run reaches the state the plan aims at (the notebook
run top to bottom), so when it is estimated to be cheaper the plan says so. With any cell
unmeasured (never run) nothing is claimed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlanCost:
    plan_s: float
    #: None when some code cell was never measured (or the start time is unknown)
    fresh_s: float | None
    restart_s: float | None
    #: planned cells with no measured duration (their cost is not in plan_s)
    unmeasured: tuple[str, ...]
    #: what the conditional cells add if they all run (not in plan_s: they may not)
    conditional_s: float = 0.0
    #: conditional cells with no measured duration
    conditional_unmeasured: tuple[str, ...] = ()

    @property
    def fresh_is_cheaper(self) -> bool:
        return not self.unmeasured and self.fresh_s is not None and self.plan_s > self.fresh_s

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "plan_s": round(self.plan_s, 3),
            "fresh_is_cheaper": self.fresh_is_cheaper,
        }
        if self.fresh_s is not None:
            out["fresh_s"] = round(self.fresh_s, 3)
        if self.restart_s is not None:
            out["restart_s"] = round(self.restart_s, 3)
        if self.unmeasured:
            out["unmeasured"] = list(self.unmeasured)
        if self.conditional_s or self.conditional_unmeasured:
            out["conditional_s"] = round(self.conditional_s, 3)
        if self.conditional_unmeasured:
            out["conditional_unmeasured"] = list(self.conditional_unmeasured)
        return out


def estimate(
    planned: Sequence[str],
    code_cells: Sequence[str],
    last: Mapping[str, float],
    fresh: Mapping[str, float],
    restart_s: float | None,
    conditional: Sequence[str] = (),
) -> PlanCost:
    """``last``/``fresh``: cell id -> seconds of its latest run / of its run in the last fresh
    run; ``conditional``: the cells that run only if their inputs change (costed apart)."""
    plan_s = sum(last.get(c, 0.0) for c in planned)
    unmeasured = tuple(c for c in planned if c not in last)
    per_cell = [fresh.get(c, last.get(c)) for c in code_cells]
    fresh_s = None
    if restart_s is not None and all(d is not None for d in per_cell):
        fresh_s = restart_s + sum(d for d in per_cell if d is not None)
    return PlanCost(
        plan_s=plan_s,
        fresh_s=fresh_s,
        restart_s=restart_s,
        unmeasured=unmeasured,
        conditional_s=sum(last.get(c, 0.0) for c in conditional),
        conditional_unmeasured=tuple(c for c in conditional if c not in last),
    )
