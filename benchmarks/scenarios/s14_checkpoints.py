"""Checkpoints: restore vs re-run after a lost kernel, and what checkpointing costs per cell.

1. Restore vs re-run. A notebook with a slow load cell (``time.sleep``) that builds a large
   DataFrame, and cells deriving from it. Side A starts the notebook in a project with
   checkpoints off: warm-up re-runs every cell (what a lost kernel costs today). Side B starts
   it where the previous kernel left checkpoints: warm-up restores every cell. Both times are
   the whole ``start`` (kernel launch included), interleaved; the restore step alone is also
   reported against the cells' own run time.
2. Overhead per cell: the compute cells of "Dataflow overhead" run as notebook cells in a
   kernel with checkpoints on against one with them off (the snapshot step holds the kernel;
   the write happens on a thread).
3. Memory: kernel RSS after the frame cell ran and its checkpoint was written, on against off.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.context import RunContext
from benchmarks.notebooks import write_notebook
from benchmarks.scenarios.s3_dataflow_overhead import IMPORTS, LABELS, workloads
from benchmarks.sessions import engine, make_project
from benchmarks.timing import Metric, Stats, Target, rss_bytes, timed

NAME = "checkpoints"
TITLE = "14. Checkpoints"

BIG = {
    # generous limits: the point is a large state (a per-value default of 512 MB would skip it)
    "checkpoint_max_value_mb": 4096.0,
    "checkpoint_max_cell_mb": 4096.0,
    "checkpoint_max_project_mb": 16384.0,
    "checkpoint_snapshot_budget_s": 60.0,
}


def restore_cells(rows: int, sleep_s: float) -> list[tuple[str, str]]:
    return [
        ("imports", "import time\nimport numpy as np\nimport pandas as pd"),
        (
            "load",
            f"time.sleep({sleep_s})\nbig = pd.DataFrame(np.random.default_rng(0).random(({rows}, "
            "10)))",
        ),
        ("stats", "means = big.mean()\nquant = big.quantile([0.1, 0.5, 0.9])"),
        ("feature", "top = big.nlargest(1000, 0)"),
    ]


async def _flush(eng: Any, kernel_id: str) -> None:
    from ipykeep.kernel.inkernel import CHECKPOINT

    entry = eng.kernels[kernel_id]
    await entry.process.eval_silent(CHECKPOINT.call("flush", 600), timeout=700)


async def _restore_vs_rerun(ctx: RunContext) -> list[Metric]:
    rows = ctx.size(12_500_000, 250_000, 20_000)  # x 10 float64 columns: 1 GB full, 20 MB quick
    sleep_s = ctx.size(5.0, 0.5, 0.1)
    reps = ctx.reps(3, 1)
    cells = restore_cells(rows, sleep_s)
    roots = {side: make_project(ctx.workdir(f"{NAME}-{side}")) for side in ("rerun", "restore")}
    for root in roots.values():
        write_notebook(root / "slow.ipynb", cells)
    samples: dict[str, list[float]] = {"rerun": [], "restore": []}
    step: list[float] = []
    cell_time: list[float] = []
    saved_bytes = 0
    async with (
        engine(
            roots["rerun"], dataflow="static", write_outputs=False, checkpoints=False
        ) as eng_off,
        # small sizes (--quick, --smoke) make every cell cheaper than checkpoint_min_cell_s:
        # save them all there, so the restore path is what is timed
        engine(
            roots["restore"],
            dataflow="static",
            write_outputs=False,
            **BIG,
            **({"checkpoint_min_cell_s": 0.0} if ctx.quick or ctx.smoke else {}),
        ) as eng_on,
    ):
        # the first run leaves checkpoints behind (timed only in a smoke run, as its baseline)
        first_s, rec = await timed(
            lambda: eng_on.create_kernel(notebook=str(roots["restore"] / "slow.ipynb"))
        )
        held, saved_cells_s = _snapshot_cost(eng_on, rec.kernel_id)
        held += await _frozen_s(eng_on, rec.kernel_id)
        await _flush(eng_on, rec.kernel_id)
        await eng_on.close_kernel(kernel_id=rec.kernel_id)
        if ctx.smoke:  # one kernel start less: the first run stands in for the re-run side
            samples["rerun"].append(first_s)
        sides = (("restore", eng_on),) if ctx.smoke else (("rerun", eng_off), ("restore", eng_on))
        for _ in range(reps):
            for side, eng in sides:
                nb = str(roots[side] / "slow.ipynb")
                seconds, rec = await timed(lambda eng=eng, nb=nb: eng.create_kernel(notebook=nb))
                samples[side].append(seconds)
                if side == "restore":
                    from ipykeep.checkpoints.service import CheckpointService

                    layer = next(o for o in eng.observers if isinstance(o, CheckpointService))
                    report = layer.state(eng.kernels[rec.kernel_id]).last_restore
                    if report is None or report.rerun:
                        raise RuntimeError(f"restore did not restore every cell: {report}")
                    step.append(report.restore_s)
                    cell_time.append(sum(c["run_s"] for c in report.restored))
                    saved_bytes = sum(c["bytes"] for c in report.restored)
                    await _flush(eng, rec.kernel_id)
                await eng.close_kernel(kernel_id=rec.kernel_id)
    size = f"{rows * 80 / 1e9:.2f} GB frame, {sleep_s:g} s load"
    return [
        Metric(
            NAME,
            f"start after a lost kernel ({size}): restore vs re-run",
            "s",
            Stats.of(samples["restore"]),
            "restore from checkpoints",
            "re-run every cell",
            Stats.of(samples["rerun"]),
            Target("ratio", "<=", 0.1),
            extra={"checkpoint_bytes": saved_bytes},
        ),
        Metric(
            NAME,
            f"restore step alone vs the cells' run time ({size})",
            "s",
            Stats.of(step),
            "restore step",
            "cells' last run time",
            Stats.of(cell_time),
            Target("ratio", "<=", 0.1),
        ),
        Metric(
            NAME,
            f"kernel held saving the saved cells' values vs those cells' run time ({size})",
            "s",
            Stats.of([held]),
            "snapshot steps and copies",
            "the saved cells' run time",
            Stats.of([saved_cells_s]),
            Target("ratio", "<=", 0.05),
        ),
    ]


async def _frozen_s(eng: Any, kernel_id: str) -> float:
    """Seconds the next cells were held copying what the writer had not read yet (a cell that
    starts while the previous cell's values are still being written copies the rest first)."""
    from ipykeep.kernel.inkernel import CHECKPOINT

    status = await eng.kernels[kernel_id].process.eval_silent(CHECKPOINT.call("status"))
    return float(status.get("frozen_s", 0.0))


def _snapshot_cost(eng: Any, kernel_id: str) -> tuple[float, float]:
    """Seconds the kernel was held pickling the saved cells' values (the snapshot step, the only
    one that holds it), and those cells' own run time, from the first run of the notebook."""
    from ipykeep.checkpoints.service import CheckpointService

    layer = next(o for o in eng.observers if isinstance(o, CheckpointService))
    session = eng.kernels[kernel_id]
    held = layer.state(session).snapshot_s
    ran = sum(
        ex.finished_at - ex.started_at
        for ex in session.executions.values()
        if ex.kind == "cell" and ex.cell_id in held and ex.finished_at and ex.started_at
    )
    return sum(held.values()), ran


async def _overhead(ctx: RunContext) -> list[Metric]:
    n = ctx.size(2_000_000, 200_000, 20_000)
    cells = workloads(n)
    reps = ctx.reps(5, 1)
    roots = {side: make_project(ctx.workdir(f"{NAME}-{side}")) for side in ("on", "off")}
    for root in roots.values():
        write_notebook(root / "compute.ipynb", [("imports", IMPORTS), *cells.items()])
    samples: dict[str, dict[str, list[float]]] = {c: {"on": [], "off": []} for c in cells}
    rss: dict[str, float] = {}
    async with (
        engine(roots["on"], dataflow="static", write_outputs=False) as eng_on,
        engine(roots["off"], dataflow="static", write_outputs=False, checkpoints=False) as eng_off,
    ):
        kernels = {}
        for side, eng in (("on", eng_on), ("off", eng_off)):
            rec = await eng.create_kernel(notebook=str(roots[side] / "compute.ipynb"), warm=False)
            kernels[side] = (eng, rec.kernel_id, rec.pid)
            await eng.run_cells(["imports"], kernel_id=rec.kernel_id)
        for round_ in range(reps + (0 if ctx.quick else 1)):
            for cell in cells:
                for side in ("on", "off"):
                    eng, kid, _ = kernels[side]
                    seconds, batch = await timed(
                        lambda eng=eng, kid=kid, cell=cell: eng.run_cells([cell], kernel_id=kid)
                    )
                    if not batch.ok:
                        raise RuntimeError(f"{cell} failed ({side}): {batch.results[0].error}")
                    if round_ or ctx.quick:
                        samples[cell][side].append(seconds)
        await _flush(eng_on, kernels["on"][1])
        await asyncio.sleep(0.3)
        for side in ("on", "off"):
            rss[side] = rss_bytes(kernels[side][2]) / 2**20
    metrics = []
    for cell, by_side in samples.items():
        label = LABELS[cell] if cell == "empty" else f"{LABELS[cell]} ({n:,})"
        target = None if cell == "empty" else Target("ratio", "<=", 1.05)
        metrics.append(
            Metric(
                NAME,
                f"{label}: checkpoints on",
                "s",
                Stats.of(by_side["on"]),
                "checkpoints on",
                "checkpoints off",
                Stats.of(by_side["off"]),
                target,
            )
        )
    metrics.append(
        Metric(
            NAME,
            "kernel RSS after the compute cells",
            "MB",
            Stats.of([rss["on"]]),
            "checkpoints on",
            "checkpoints off",
            Stats.of([rss["off"]]),
        )
    )
    return metrics


async def run(ctx: RunContext) -> list[Metric]:
    # --smoke (the test suite): the restore side only; the overhead sides need two more kernels
    overhead = [] if ctx.smoke else await _overhead(ctx)
    return [*overhead, *(await _restore_vs_rerun(ctx))]
