"""Warm-up of a 150-cell notebook: ``ipykeep start`` to warm against nbclient running it all.

Two notebooks: ``benchmarks/realistic.py``'s generated sales analysis (many small pandas
cells, a few plots) and a real one, ``benchmarks/thirdparty/statsmodels_examples.ipynb`` (146
code cells of four statsmodels example notebooks; see the README there). Both sides are shell
commands started from nothing, as a user types them: ``ipykeep start`` (daemon, kernel, every
cell, outputs written back) and nbclient's own
``jupyter execute`` (kernel, every cell). Per-cell durations of both ipykeep modes are kept in the
extras, so a miss can be traced to the cells (and the per-cell cost) that make it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import anyio

from benchmarks.context import RunContext
from benchmarks.realistic import build
from benchmarks.sessions import bench_env, make_project, stop_daemon
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "warm_up"
TITLE = "10. Warm-up of a 150-cell notebook"


def _cell_seconds(root: Path) -> list[float]:
    out = []
    for record in sorted((root / ".ipykeep" / "kernels").glob("k*/record.jsonl")):
        for line in record.read_text().splitlines():
            row = json.loads(line)
            if row.get("kind") == "cell" and row.get("finished_at"):
                out.append(row["finished_at"] - row["started_at"])
    return out


REAL = Path(__file__).resolve().parents[1] / "thirdparty" / "statsmodels_examples.ipynb"


def _real(path: Path, cells: int) -> Path:
    """The third-party notebook (``cells`` is ignored: it has the cells it has)."""
    path = path.with_name(REAL.name)
    shutil.copyfile(REAL, path)
    return path


async def _ipykeep_start(
    ctx: RunContext,
    cells: int,
    dataflow: str,
    per_cell: list[float],
    *,
    traced: bool = True,
    source: Any = build,
) -> float:
    root = make_project(ctx.workdir(f"{NAME}-{dataflow}-{traced}-{source.__name__}"))
    env = bench_env()
    if not traced:
        env["IPYKEEP_WARM_TRACING"] = "false"
    nb = source(root / "sales.ipynb", cells)
    try:

        async def start() -> tuple[int, bytes]:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ipykeep",
                "start",
                str(nb),
                "--json",
                "--dataflow",
                dataflow,
                cwd=str(root),
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await proc.communicate()
            if proc.returncode == 0 and json.loads(out).get("warm", {}).get("failed"):
                return 1, out
            return proc.returncode or 0, err

        seconds, (code, err) = await timed(start)
        if code != 0:
            raise RuntimeError(f"ipykeep start ({dataflow}) failed: {err.decode()[-1000:]}")
        per_cell.extend(_cell_seconds(root))
        return seconds
    finally:
        await anyio.to_thread.run_sync(stop_daemon, root)


async def _jupyter_execute(nb: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "jupyter-execute"),
        str(nb),
        cwd=str(nb.parent),
        env=bench_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"jupyter execute failed: {err.decode()[-1000:]}")


async def run(ctx: RunContext) -> list[Metric]:
    cells = ctx.size(150, 10, smoke=2)
    samples: dict[str, list[float]] = {"ipyflow": [], "untraced": [], "static": [], "nbclient": []}
    per_cell: dict[str, list[float]] = {"ipyflow": [], "untraced": [], "static": []}
    for _ in range(ctx.reps(1, 1)):
        if not ctx.quick:  # the smoke test keeps to one ipykeep side
            samples["ipyflow"].append(
                await _ipykeep_start(ctx, cells, "ipyflow", per_cell["ipyflow"])
            )
        nb = build(ctx.workdir(f"{NAME}-nbclient") / "sales.ipynb", cells)
        seconds, _ = await timed(lambda: _jupyter_execute(nb))
        samples["nbclient"].append(seconds)
        samples["static"].append(await _ipykeep_start(ctx, cells, "static", per_cell["static"]))
        if not ctx.quick:
            samples["untraced"].append(
                await _ipykeep_start(ctx, cells, "ipyflow", per_cell["untraced"], traced=False)
            )
    base = Stats.of(samples["nbclient"])
    extra = {
        f"{mode}_cell_median_s": round(statistics.median(v), 4) for mode, v in per_cell.items() if v
    } | {
        f"{mode}_cells_total_s": round(sum(v) / ctx.reps(1, 1), 3)
        for mode, v in per_cell.items()
        if v
    }
    label = f"{cells}-cell notebook to warm"
    metrics = [
        Metric(
            NAME,
            f"{label}, static",
            "s",
            Stats.of(samples["static"]),
            "ipykeep start --dataflow static",
            "jupyter execute (nbclient)",
            base,
            Target("ratio", "<=", 1.2),
            extra=extra,
        ),
    ]
    if ctx.quick:
        return metrics
    real: dict[str, list[float]] = {"static": [], "ipyflow": [], "untraced": [], "nbclient": []}
    for _ in range(ctx.reps(1, 1)):
        nb = _real(ctx.workdir(f"{NAME}-nbclient-real") / "x.ipynb", 0)
        seconds, _ = await timed(lambda: _jupyter_execute(nb))
        real["nbclient"].append(seconds)
        real["static"].append(await _ipykeep_start(ctx, 0, "static", [], source=_real))
        real["ipyflow"].append(await _ipykeep_start(ctx, 0, "ipyflow", [], source=_real))
        real["untraced"].append(
            await _ipykeep_start(ctx, 0, "ipyflow", [], traced=False, source=_real)
        )
    real_base = Stats.of(real["nbclient"])
    real_label = "statsmodels examples (146 real cells) to warm"
    metrics += [
        Metric(
            NAME,
            f"{real_label}, static",
            "s",
            Stats.of(real["static"]),
            "ipykeep start --dataflow static",
            "jupyter execute (nbclient)",
            real_base,
            Target("ratio", "<=", 1.2),
        ),
        Metric(
            NAME,
            f"{real_label}, ipyflow",
            "s",
            Stats.of(real["ipyflow"]),
            "ipykeep start (ipyflow)",
            "jupyter execute (nbclient)",
            real_base,
            Target("ratio", "<=", 1.5),
        ),
        Metric(
            NAME,
            f"{real_label}, ipyflow, warm_tracing = false",
            "s",
            Stats.of(real["untraced"]),
            "ipykeep start (ipyflow, untraced warm-up)",
            "jupyter execute (nbclient)",
            real_base,
            Target("ratio", "<=", 1.5),
        ),
    ]
    return metrics + [
        Metric(
            NAME,
            f"{label}, ipyflow",
            "s",
            Stats.of(samples["ipyflow"]),
            "ipykeep start (ipyflow)",
            "jupyter execute (nbclient)",
            base,
            Target("ratio", "<=", 1.5),
        ),
        Metric(
            NAME,
            f"{label}, ipyflow, warm_tracing = false",
            "s",
            Stats.of(samples["untraced"]),
            "ipykeep start (ipyflow, untraced warm-up)",
            "jupyter execute (nbclient)",
            base,
            Target("ratio", "<=", 1.5),
        ),
    ]
