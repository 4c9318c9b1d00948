"""What a stale plan will cost, against restarting the kernel and running every cell.

Estimates come from measurements, never guesses: a planned cell costs what its last run in
this kernel took; the fresh alternative costs the kernel's last measured (re)start plus each
code cell's duration in the last fresh run (warm-up, or ``run-stale --execute --fresh``),
falling back to its last run. Both add what the daemon spends per cell besides the cell's own
run (probes, ipyflow's records, re-planning between rounds, the notebook write), as measured in
this kernel: per cell of the last executed plan for the plan, per cell of the last fresh run for
the fresh run. Under ipyflow that work is several times the static mode's: without it a plan of
many short cells is estimated cheaper than a fresh run that takes less time. A fresh run reaches the
state the plan aims at (the notebook run top to bottom), so when it is estimated to be cheaper
the plan says so. With any cell unmeasured (never run) nothing is claimed.
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
    #: seconds per planned cell besides its own run (in plan_s)
    plan_overhead_s: float = 0.0
    #: seconds per cell of a fresh run besides its own run (in fresh_s)
    fresh_overhead_s: float = 0.0

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
        if self.plan_overhead_s or self.fresh_overhead_s:
            out["per_cell_overhead_s"] = {
                "plan": round(self.plan_overhead_s, 3),
                "fresh": round(self.fresh_overhead_s, 3),
            }
        return out


def estimate(
    planned: Sequence[str],
    code_cells: Sequence[str],
    last: Mapping[str, float],
    fresh: Mapping[str, float],
    restart_s: float | None,
    conditional: Sequence[str] = (),
    overhead: Overhead | None = None,
) -> PlanCost:
    """``last``/``fresh``: cell id -> seconds of its latest run / of its run in the last fresh
    run; ``conditional``: the cells that run only if their inputs change (costed apart);
    ``overhead``: the daemon's measured seconds per cell besides the cells' own runs."""
    per_plan, per_fresh = (overhead or Overhead()).per_cell()
    plan_s = sum(last.get(c, 0.0) + per_plan for c in planned)
    unmeasured = tuple(c for c in planned if c not in last)
    per_cell = [fresh.get(c, last.get(c)) for c in code_cells]
    fresh_s = None
    if restart_s is not None and all(d is not None for d in per_cell):
        fresh_s = restart_s + sum(d + per_fresh for d in per_cell if d is not None)
    return PlanCost(
        plan_s=plan_s,
        fresh_s=fresh_s,
        restart_s=restart_s,
        unmeasured=unmeasured,
        conditional_s=sum(last.get(c, 0.0) + per_plan for c in conditional),
        conditional_unmeasured=tuple(c for c in conditional if c not in last),
        plan_overhead_s=per_plan if planned else 0.0,
        fresh_overhead_s=per_fresh if fresh_s is not None else 0.0,
    )


@dataclass(frozen=True)
class Overhead:
    """The daemon's seconds per cell besides the cells' own runs, as last measured in one
    kernel: over an executed plan (re-plans included) and over a fresh run (warm-up or
    ``--fresh``). None: not measured yet."""

    plan: float | None = None
    fresh: float | None = None

    def per_cell(self) -> tuple[float, float]:
        """(per planned cell, per cell of a fresh run): each falls back to the other
        measurement (the same daemon and kernel), then to nothing."""
        plan = self.plan if self.plan is not None else self.fresh
        fresh = self.fresh if self.fresh is not None else self.plan
        return plan or 0.0, fresh or 0.0

    @staticmethod
    def measure(wall_s: float, cell_s: Sequence[float]) -> float | None:
        """Per cell: what a batch of ``len(cell_s)`` cells took beyond the cells' own runs."""
        if not cell_s:
            return None
        return max(0.0, wall_s - sum(cell_s)) / len(cell_s)
