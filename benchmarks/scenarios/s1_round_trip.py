"""Round trip: ``ipython("1+1")`` through the MCP server vs a raw jupyter_client execute.

The MCP path is the whole way an agent's call travels: client → stdio → server → JSON-RPC →
daemon → kernel and back. Each kind of kernel is measured in a loop of its own, interleaved call
by call with the raw baseline of the same kind and rotating the order each round: an ipyflow
kernel keeps a core busy for a few milliseconds after it answers, which would otherwise land on
whichever call always follows it.

The baseline is the kernel as a client without ipykeep starts it. ipykeep starts its kernels
with IPython's history in memory (``ipython_history``, ``kernel/providers/base.py``): the
database's commit of every execution is the kernel's work, not ipykeep's, so a further loop
gives the baseline the same option and leaves ipykeep's own cost alone. With
``IPYKEEP_BENCH_BEFORE=<checkout>`` a further loop sets the plain-kernel server beside the same
server of that checkout (its own project and daemon).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from benchmarks.context import McpSide, RunContext, before_checkout
from benchmarks.rawkernel import RawKernel
from benchmarks.timing import Metric, Stats, Target, interleave
from ipykeep.kernel.providers.base import kernel_options

NAME = "round_trip"
TITLE = "1. Round trip"

CODE = "1+1"
#: The options ipykeep starts its kernels with (IPython's history in memory), for a baseline
#: that leaves ipykeep's own cost alone.
SAME_OPTIONS = tuple(kernel_options(ipython_history=False))


def via_mcp(side: McpSide) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        res = await side.mcp.call("ipython", {"kernel_id": side.kernel_id, "code": CODE})
        assert res.data["state"] == "ok", res.text

    return call


def via_raw(kernel: RawKernel) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        assert (await kernel.execute(CODE)).status == "ok"

    return call


async def run(ctx: RunContext) -> list[Metric]:
    n = ctx.reps(200, 20)
    warmup = ctx.reps(3, 1)
    ms: dict[str, Stats] = {}

    async def loop(name: str, sides: dict[str, Callable[[], Awaitable[None]]]) -> None:
        """One loop of its own, call by call with the order rotating; ms[f"{side}_{name}"]."""
        times = await interleave(sides, n, warmup=warmup, rotate=True)
        ms.update({f"{k}_{name}": Stats.of([x * 1000 for x in v]) for k, v in times.items()})

    mcp_static = via_mcp(await ctx.pool.mcp("static"))
    await loop("static", {"mcp": mcp_static, "raw": via_raw(await ctx.pool.raw("plain"))})
    metrics = [
        Metric(
            NAME,
            "ipython('1+1'), plain kernel (static)",
            "ms",
            ms["mcp_static"],
            "MCP stdio",
            "raw jupyter_client",
            ms["raw_static"],
            None if ctx.smoke else Target("ratio", "<=", 1.2),
        )
    ]
    if ctx.smoke:  # the smoke test keeps to the plain kernels and the default server
        return metrics
    before = []
    if before_checkout() is not None:
        await loop(
            "builds", {"mcp": mcp_static, "before": via_mcp(await ctx.pool.mcp("static", "before"))}
        )
        before.append(
            Metric(
                NAME,
                "ipython('1+1'), plain kernel: this build vs another",
                "ms",
                ms["mcp_builds"],
                "MCP stdio",
                f"MCP stdio of {before_checkout()}",
                ms["before_builds"],
            )
        )
    raw_alike = via_raw(await ctx.pool.raw("plain", SAME_OPTIONS))
    await loop("alike", {"mcp": mcp_static, "raw": raw_alike})
    mcp_flow = via_mcp(await ctx.pool.mcp("ipyflow"))
    await loop("flow", {"mcp": mcp_flow, "raw": via_raw(await ctx.pool.raw("ipyflow"))})
    raw_flow_alike = via_raw(await ctx.pool.raw("ipyflow", SAME_OPTIONS))
    await loop("flow_alike", {"mcp": mcp_flow, "raw": raw_flow_alike})
    return [
        Metric(
            NAME,
            "ipython('1+1'), ipyflow kernel",
            "ms",
            ms["mcp_flow"],
            "MCP stdio",
            "raw jupyter_client",
            ms["raw_flow"],
            Target("ratio", "<=", 1.2),
        ),
        *metrics,
        Metric(
            NAME,
            "ipython('1+1'), plain kernel, both kernels without IPython's history database",
            "ms",
            ms["mcp_alike"],
            "MCP stdio",
            "raw jupyter_client",
            ms["raw_alike"],
        ),
        Metric(
            NAME,
            "ipython('1+1'), ipyflow kernel, both kernels without IPython's history database",
            "ms",
            ms["mcp_flow_alike"],
            "MCP stdio",
            "raw jupyter_client",
            ms["raw_flow_alike"],
        ),
        *before,
        Metric(
            NAME,
            "execute '1+1', ipyflow vs plain kernel",
            "ms",
            ms["raw_flow"],
            "raw ipyflow kernel",
            "raw plain kernel",
            ms["raw_static"],
        ),
    ]
