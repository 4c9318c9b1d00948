"""Plan scale: executing a plan of N trivial cells, per cell, as N grows.

For each size a notebook of N one-line cells (``x{i} = {i}``) is warmed in its own kernel,
every cell is edited on disk, and ``run_stale(execute=True)`` runs the N stale cells over the
daemon RPC. The row is the time per cell at N against the time per cell at the smallest size,
in the same invocation: a ratio near 1 is linear growth, N/N0 would be quadratic.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import nbformat

from benchmarks.context import RunContext
from benchmarks.sessions import daemon, make_project
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "plan_scale"
TITLE = "16. Plan scale: executing N stale cells"


def _write(path: Path, n: int, step: int) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x{i} = {i} + {step}", id=f"c{i:05d}") for i in range(n)]
    nbformat.write(nb, path)


async def run(ctx: RunContext) -> list[Metric]:
    sizes = ctx.size((250, 500, 1000, 2000), (50, 100, 200), (10, 20))
    root = make_project(ctx.workdir(NAME))
    per_cell: dict[int, list[float]] = {}
    with daemon(root) as client:
        for n in sizes:
            nb = root / f"n{n}.ipynb"
            _write(nb, n, 0)
            rec = await client.acall("create_kernel", notebook=str(nb), warm=True, wait=True)
            kid = rec["kernel_id"]
            per_cell[n] = []
            for rep in range(ctx.reps(1, 1)):
                await anyio.to_thread.run_sync(_write, nb, n, rep + 1)  # every cell stale
                seconds, res = await timed(
                    lambda kid=kid: client.acall("run_stale", kernel_id=kid, execute=True)
                )
                ran = len(res.get("batch", {}).get("results", []))
                if not res.get("ok") or ran != n:
                    raise RuntimeError(f"run_stale of {n} cells ran {ran}: {res.get('notices')}")
                per_cell[n].append(seconds / n)
            # left open (idle): the daemon exits when its last kernel closes
    base_n = sizes[0]
    base = Stats.of(per_cell[base_n])
    return [
        Metric(
            NAME,
            f"{n} stale cells: run_stale(execute), per cell",
            "s",
            Stats.of(per_cell[n]),
            f"{n} cells",
            f"{base_n} cells",
            base,
            Target("ratio", "<=", 1.5) if n != base_n else None,
            extra={"cells": n, "total_s": round(sum(per_cell[n]) / len(per_cell[n]) * n, 2)},
        )
        for n in sizes
    ]
