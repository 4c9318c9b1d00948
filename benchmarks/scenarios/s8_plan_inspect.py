"""Plan and inspect latency, timed in-process around the engine calls (no transport).

- ``run_stale`` plan on a warm 60-cell notebook after one edit: the daemon re-reads the
  notebook, re-stats read files and plans on every call.
- ``inspect`` of a 10M-row DataFrame: the typed summary computed in the kernel.
- ``namespace`` with 200 user variables of mixed types.
"""

from __future__ import annotations

from benchmarks.context import RunContext
from benchmarks.notebooks import chain_notebook, set_source
from benchmarks.sessions import engine, make_project
from benchmarks.timing import Metric, Stats, Target, timed
from ipykeep.inspection.service import InspectionService
from ipykeep.staleness.service import StalenessService

NAME = "plan_inspect"
TITLE = "8. Plan and inspect latency"

VARIABLES = """
import numpy as np
import pandas as pd
for _i in range(200):
    _kind = _i % 5
    globals()[f"var{_i}"] = (
        _i if _kind == 0 else
        [_i] * 50 if _kind == 1 else
        {"k": _i, "name": f"item {_i}"} if _kind == 2 else
        np.arange(1000) * _i if _kind == 3 else
        pd.DataFrame({"a": range(100), "b": [_i] * 100})
    )
"""


def big_frame(rows: int) -> str:
    return (
        "big = pd.DataFrame({"
        f"'id': np.arange({rows}), "
        f"'x': np.random.default_rng(0).random({rows}), "
        f"'grp': (np.arange({rows}) % 7).astype('int8'), "
        f"'label': pd.Categorical(np.array(['a', 'b', 'c'])[np.arange({rows}) % 3])"
        "})"
    )


async def run(ctx: RunContext) -> list[Metric]:
    root = make_project(ctx.workdir(NAME))
    nb = chain_notebook(root / "sixty.ipynb", 60)
    reps = ctx.reps(20, 3)
    rows = ctx.size(10_000_000, 1_000_000, smoke=100_000)
    async with engine(root) as eng:
        staleness = next(o for o in eng.observers if isinstance(o, StalenessService))
        inspection = next(o for o in eng.observers if isinstance(o, InspectionService))
        rec = await eng.create_kernel(notebook=str(nb), warm=True, wait=True)
        kid = rec.kernel_id
        set_source(nb, "c30", "x30 = (x29 + x15 + x10) % 1000 + 2.5")

        plan_times = []
        planned = 0
        for _ in range(reps):
            seconds, res = await timed(lambda: staleness.run_stale(kernel_id=kid))
            plan_times.append(seconds * 1000)
            planned = len(res.stale)

        await eng.execute(VARIABLES, kernel_id=kid)
        await eng.execute(big_frame(rows), kernel_id=kid)
        inspect_times, ns_times = [], []
        summary = listing = None
        for _ in range(ctx.reps(5, 1)):
            seconds, summary = await timed(lambda: inspection.inspect("big", kernel_id=kid))
            inspect_times.append(seconds)
            seconds, listing = await timed(lambda: inspection.namespace(kernel_id=kid))
            ns_times.append(seconds * 1000)
    return [
        Metric(
            NAME,
            "run_stale plan, 60-cell notebook (engine call)",
            "ms",
            Stats.of(plan_times),
            target=Target("value", "<=", 30),
            extra={"cells_in_plan": planned},
        ),
        Metric(
            NAME,
            f"inspect a {rows:,}-row DataFrame",
            "s",
            Stats.of(inspect_times),
            target=Target("value", "<", 1),
            extra={
                "kind": summary.kind if summary else None,
                "degraded": summary.degraded if summary else None,
            },
        ),
        Metric(
            NAME,
            "namespace, 200+ variables",
            "ms",
            Stats.of(ns_times),
            extra={
                "variables": listing.count if listing else 0,
                "degraded": listing.degraded if listing else None,
            },
        ),
    ]
