"""Edit to fresh: after editing one downstream cell, get every value right again.

ipykeep: ``run_stale(execute=True)`` over the daemon's RPC on a warm kernel (it re-runs the
edited cell and what depends on it). Baseline: what a client without ipykeep does to be sure,
run the whole notebook with nbclient (fresh kernel, slow load included). Each round makes a new
edit first, so every ipykeep run has real work to do.
"""

from __future__ import annotations

import anyio

from benchmarks.context import RunContext
from benchmarks.notebooks import analysis_notebook, nbclient_run_all, set_source, write_csv
from benchmarks.sessions import daemon, make_project
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "edit_to_fresh"
TITLE = "2. Edit to fresh"


async def run(ctx: RunContext) -> list[Metric]:
    root = make_project(ctx.workdir(NAME))
    rows = ctx.size(200_000, 20_000, smoke=5_000)
    write_csv(root / "data.csv", rows)
    nb, edited, template = analysis_notebook(
        root / "analysis.ipynb", load_sleep=ctx.size(2.0, 0.5, smoke=0.1)
    )
    ours: list[float] = []
    theirs: list[float] = []
    executed: list[int] = []
    edit = 0
    with daemon(root) as client:
        rec = await client.acall("create_kernel", notebook=str(nb), warm=True, wait=True)
        kid = rec["kernel_id"]
        if rec.get("warm", {}).get("failed"):
            raise RuntimeError(f"warm-up failed: {rec['warm']}")
        for _ in range(ctx.reps(5, 1)):
            edit += 1
            await anyio.to_thread.run_sync(set_source, nb, edited, template.format(k=edit % 100))
            seconds, res = await timed(
                lambda: client.acall("run_stale", kernel_id=kid, execute=True)
            )
            batch = res.get("batch") or {}
            if not res.get("ok") or not batch.get("results"):
                raise RuntimeError(f"run_stale did not run the edit cleanly: {res}")
            ours.append(seconds)
            executed.append(len(batch["results"]))
            seconds, cells = await timed(lambda: nbclient_run_all(nb))
            theirs.append(seconds)
    return [
        Metric(
            NAME,
            f"edit 1 cell, {rows:,}-row CSV load + 20 cells",
            "s",
            Stats.of(ours),
            "run_stale(execute) via daemon RPC",
            "nbclient run-all",
            Stats.of(theirs),
            Target("speedup", ">=", 10),
            extra={"cells_executed_ipykeep": max(executed), "cells_executed_baseline": cells},
        )
    ]
