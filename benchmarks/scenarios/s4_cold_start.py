"""Cold start: ``ipykeep start`` to a warm kernel on the example vs nbclient running it all.

ipykeep's side is the CLI as a user types it, from nothing: it starts the daemon, a kernel,
and runs every cell (the example's load sleeps 3 s). Each round uses a fresh copy of the
project and stops the daemon afterwards (untimed).
"""

from __future__ import annotations

import asyncio
import sys

import anyio

from benchmarks.context import RunContext
from benchmarks.notebooks import copy_example, nbclient_run_all
from benchmarks.sessions import bench_env, make_project, stop_daemon
from benchmarks.timing import Metric, Stats, timed

NAME = "cold_start"
TITLE = "4. Cold start"


async def _ipykeep_start(ctx: RunContext, dataflow: str) -> float:
    root = make_project(ctx.workdir(NAME))
    nb = copy_example(root)
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
                env=bench_env(),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await proc.communicate()
            return proc.returncode or 0, err

        seconds, (code, err) = await timed(start)
        if code != 0:
            raise RuntimeError(f"ipykeep start exited {code}: {err.decode()[-1000:]}")
        return seconds
    finally:
        await anyio.to_thread.run_sync(stop_daemon, root)


async def run(ctx: RunContext) -> list[Metric]:
    flow: list[float] = []
    static: list[float] = []
    theirs: list[float] = []
    for _ in range(ctx.reps(3, 1)):
        if not ctx.smoke:  # the smoke test keeps to one ipykeep side
            flow.append(await _ipykeep_start(ctx, "ipyflow"))
        if not ctx.smoke:  # nbclient_run_all is smoke-tested by scenario 11
            nb = copy_example(ctx.workdir(f"{NAME}-nbclient"))
            seconds, _ = await timed(lambda: nbclient_run_all(nb))
            theirs.append(seconds)
        static.append(await _ipykeep_start(ctx, "static"))
    base = Stats.of(theirs) if theirs else None
    metrics = [
        Metric(
            NAME,
            "examples/01_eda.ipynb to warm, static",
            "s",
            Stats.of(static),
            "ipykeep start --dataflow static",
            "nbclient run-all",
            base,
        ),
    ]
    if flow:
        metrics.insert(
            0,
            Metric(
                NAME,
                "examples/01_eda.ipynb to warm, ipyflow",
                "s",
                Stats.of(flow),
                "ipykeep start --dataflow ipyflow",
                "nbclient run-all",
                base,
            ),
        )
    return metrics
