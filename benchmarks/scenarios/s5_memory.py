"""Memory: kernel RSS growth after re-running, many times, a cell that builds a ~30 MB DataFrame.

A plain kernel frees the previous frame when the name is rebound; anything that keeps old
values alive (ipyflow's symbol history, output caches) shows up as growth. Growth is RSS after
the re-runs minus RSS before the first run (imports done), per fresh kernel: a kernel that
keeps only the live frame grows by about one frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from benchmarks.context import RunContext
from benchmarks.notebooks import write_notebook
from benchmarks.rawkernel import raw_kernel
from benchmarks.sessions import engine, make_project
from benchmarks.timing import Metric, Stats, Target, rss_bytes

NAME = "memory"
TITLE = "5. Memory"

IMPORTS = "import numpy as np\nimport pandas as pd"


def build_cell(rows: int) -> str:
    # 10 float64 columns: rows * 80 bytes (375k rows = 30 MB); a new seed each run so the data is
    # new
    return (
        "_seed = globals().get('_seed', 0) + 1\n"
        f"big = pd.DataFrame(np.random.default_rng(_seed).random(({rows}, 10)))"
    )


async def _growth(pid: int, run_cell: Callable[[], Awaitable[None]], runs: int) -> float:
    await asyncio.sleep(0.2)
    before = rss_bytes(pid)
    for _ in range(runs):
        await run_cell()
    await asyncio.sleep(0.2)
    return (rss_bytes(pid) - before) / 2**20


async def _engine_growth(ctx: RunContext, mode: str, code: str, runs: int) -> float:
    root = make_project(ctx.workdir(f"{NAME}-{mode}"))
    nb = write_notebook(root / "mem.ipynb", [("imports", IMPORTS), ("build", code)])
    async with engine(root, dataflow=mode, write_outputs=False) as eng:
        rec = await eng.create_kernel(notebook=str(nb), warm=False)
        await eng.run_cells(["imports"], kernel_id=rec.kernel_id)

        async def run_cell() -> None:
            batch = await eng.run_cells(["build"], kernel_id=rec.kernel_id)
            if not batch.ok:
                raise RuntimeError(
                    f"memory cell failed in ipykeep ({mode}): {batch.results[0].error}"
                )

        assert rec.pid is not None
        return await _growth(rec.pid, run_cell, runs)


async def _raw_growth(kind: str, code: str, runs: int) -> float:
    async with raw_kernel(kind) as k:  # type: ignore[arg-type]
        await k.execute(IMPORTS)

        async def run_cell() -> None:
            if (await k.execute(code)).status != "ok":
                raise RuntimeError(f"memory cell failed in the raw {kind} kernel")

        return await _growth(k.pid, run_cell, runs)


async def run(ctx: RunContext) -> list[Metric]:
    rows = ctx.size(375_000, 60_000, smoke=10_000)
    runs = ctx.size(20, 5, smoke=2)
    code = build_cell(rows)
    growth: dict[str, list[float]] = {"plain": [], "static": [], "ipyflow": [], "raw_ipyflow": []}
    for _ in range(ctx.reps(3, 1)):
        growth["plain"].append(await _raw_growth("plain", code, runs))
        growth["static"].append(await _engine_growth(ctx, "static", code, runs))
        if not ctx.smoke:  # the smoke test keeps to the plain kernels
            growth["ipyflow"].append(await _engine_growth(ctx, "ipyflow", code, runs))
            growth["raw_ipyflow"].append(await _raw_growth("ipyflow", code, runs))
    st = {k: Stats.of(v) for k, v in growth.items() if v}
    mb = rows * 80 / 2**20
    label = f"RSS growth, {runs} re-runs of a {mb:.0f} MB frame"
    extra = {"frame_mb": round(mb, 1), "runs": runs}
    if ctx.smoke:
        return [
            Metric(
                NAME,
                f"{label}: static",
                "MB",
                st["static"],
                "ipykeep static",
                "plain ipykernel",
                st["plain"],
                None,
                extra,
            )
        ]
    return [
        Metric(
            NAME,
            f"{label}: static",
            "MB",
            st["static"],
            "ipykeep static",
            "plain ipykernel",
            st["plain"],
            Target("ratio", "<=", 1.2),
            extra,
        ),
        Metric(
            NAME,
            f"{label}: ipyflow",
            "MB",
            st["ipyflow"],
            "ipykeep ipyflow",
            "plain ipykernel",
            st["plain"],
            Target("ratio", "<=", 2.0),
            extra,
        ),
        Metric(
            NAME,
            f"{label}: raw ipyflow kernel",
            "MB",
            st["raw_ipyflow"],
            "raw ipyflow kernel",
            "plain ipykernel",
            st["plain"],
            None,
            extra,
        ),
    ]
