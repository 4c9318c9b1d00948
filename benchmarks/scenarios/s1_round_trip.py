"""Round trip: ``ipython("1+1")`` through the MCP server vs a raw jupyter_client execute.

Four sides, interleaved call by call: MCP on an ipyflow kernel, raw ipyflow kernel, MCP on a
plain kernel (``dataflow = "static"``), raw plain kernel. The MCP path is the whole way an
agent's call travels: client → stdio → server → JSON-RPC → daemon → kernel and back.
"""

from __future__ import annotations

from benchmarks.context import RunContext
from benchmarks.timing import Metric, Stats, Target, interleave

NAME = "round_trip"
TITLE = "1. Round trip"

CODE = "1+1"


async def run(ctx: RunContext) -> list[Metric]:
    mcp_static = await ctx.pool.mcp("static")
    raw_plain = await ctx.pool.raw("plain")
    if not ctx.smoke:  # the smoke test keeps to the plain kernels
        mcp_flow = await ctx.pool.mcp("ipyflow")
        raw_flow = await ctx.pool.raw("ipyflow")

    async def via_mcp_flow() -> None:
        res = await mcp_flow.mcp.call("ipython", {"kernel_id": mcp_flow.kernel_id, "code": CODE})
        assert res.data["state"] == "ok", res.text

    async def via_mcp_static() -> None:
        res = await mcp_static.mcp.call(
            "ipython", {"kernel_id": mcp_static.kernel_id, "code": CODE}
        )
        assert res.data["state"] == "ok", res.text

    async def via_raw_flow() -> None:
        assert (await raw_flow.execute(CODE)).status == "ok"

    async def via_raw_plain() -> None:
        assert (await raw_plain.execute(CODE)).status == "ok"

    n = ctx.reps(50, 5)
    sides = {"mcp_static": via_mcp_static, "raw_plain": via_raw_plain}
    if not ctx.smoke:
        sides = {"mcp_flow": via_mcp_flow, "raw_flow": via_raw_flow, **sides}
    s = await interleave(sides, n, warmup=ctx.reps(3, 1))
    ms = {k: Stats.of([x * 1000 for x in v]) for k, v in s.items()}
    if ctx.smoke:
        return [
            Metric(
                NAME,
                "ipython('1+1'), plain kernel (static)",
                "ms",
                ms["mcp_static"],
                "MCP stdio",
                "raw jupyter_client",
                ms["raw_plain"],
            )
        ]
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
        Metric(
            NAME,
            "ipython('1+1'), plain kernel (static)",
            "ms",
            ms["mcp_static"],
            "MCP stdio",
            "raw jupyter_client",
            ms["raw_plain"],
            Target("ratio", "<=", 1.2),
        ),
        Metric(
            NAME,
            "execute '1+1', ipyflow vs plain kernel",
            "ms",
            ms["raw_flow"],
            "raw ipyflow kernel",
            "raw plain kernel",
            ms["raw_plain"],
        ),
    ]
