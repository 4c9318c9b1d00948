"""Create to first result: ``create_kernel`` then ``ipython("1+1")`` over MCP, with a spare.

Three sides, interleaved: an MCP server whose daemon keeps a pre-started kernel
(``prestart_kernels = 1``, the default), the same with pre-starting off, and a raw
jupyter_client kernel started and executed once. Each ipykeep side's daemon already serves a
kernel (the pool's), as it does when an agent creates its second kernel or comes back to a
project; every kernel created here is closed after its round, and the rounds are spaced so the
spare is ready again, as it is when an agent works between two ``create_kernel`` calls.
"""

from __future__ import annotations

import contextlib
import time

import anyio

from benchmarks.context import RunContext
from benchmarks.rawkernel import raw_kernel
from benchmarks.sessions import Mcp, make_project, mcp_server
from benchmarks.timing import Metric, Stats, Target

NAME = "first_result"
TITLE = "18. Create to first result"

#: Seconds between rounds (untimed): the spare of the previous round is started meanwhile.
GAP_S = 4.0


async def _create_and_run(mcp: Mcp) -> float:
    start = time.perf_counter()
    created = await mcp.call("create_kernel", {})
    kid = created.data["kernel_id"]
    res = await mcp.call("ipython", {"kernel_id": kid, "code": "1+1"})
    elapsed = time.perf_counter() - start
    assert res.data["state"] == "ok", res.text
    await mcp.call("close_kernel", {"kernel_id": kid})
    return elapsed


async def _raw() -> float:
    start = time.perf_counter()
    async with raw_kernel("plain") as raw:
        assert (await raw.execute("1+1")).status == "ok"
        elapsed = time.perf_counter() - start
    return elapsed


async def run(ctx: RunContext) -> list[Metric]:
    warm = await ctx.pool.mcp("static")
    n = ctx.reps(5, 2)
    gap = 0.5 if ctx.smoke else GAP_S
    samples: dict[str, list[float]] = {"spare": [], "cold": [], "raw": []}
    async with contextlib.AsyncExitStack() as stack:
        cold: Mcp | None = None
        if not ctx.smoke:  # the smoke test keeps to the spare side and the baseline
            cold = await stack.enter_async_context(
                mcp_server(
                    make_project(ctx.workdir(f"{NAME}-cold")),
                    dataflow="static",
                    log=ctx.log_dir / f"{NAME}-cold.log",
                    env={"IPYKEEP_PRESTART_KERNELS": "0"},
                )
            )
            await cold.call("create_kernel", {})  # its daemon serves a kernel, like the pool's
        await anyio.sleep(gap)
        for _ in range(n):
            samples["spare"].append(await _create_and_run(warm.mcp))
            if cold is not None:
                samples["cold"].append(await _create_and_run(cold))
            samples["raw"].append(await _raw())
            await anyio.sleep(gap)
    s = {k: Stats.of(v) for k, v in samples.items() if v}
    spare = Metric(
        NAME,
        "create_kernel -> ipython('1+1') result, spare kernel",
        "s",
        s["spare"],
        "MCP, prestart_kernels = 1",
        "raw jupyter_client start + execute",
        s["raw"],
        Target("value", "<=", 1.0),
    )
    if ctx.smoke:
        return [spare]
    return [
        spare,
        Metric(
            NAME,
            "create_kernel -> ipython('1+1') result, no spare",
            "s",
            s["cold"],
            "MCP, prestart_kernels = 0",
            "raw jupyter_client start + execute",
            s["raw"],
        ),
        Metric(
            NAME,
            "create_kernel -> first result, spare vs none",
            "s",
            s["spare"],
            "prestart_kernels = 1",
            "prestart_kernels = 0",
            s["cold"],
        ),
    ]
