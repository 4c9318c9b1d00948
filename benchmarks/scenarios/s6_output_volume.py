"""Output volume: a cell making many flushed prints, through MCP vs a raw execute.

Each print is its own iopub message, so this measures ipykeep's per-message handling (routing,
recording, the output cap) and the bounding of what is returned: wall time per side, and the
bytes each hands back to the agent (the MCP result as received vs every byte of raw output).
"""

from __future__ import annotations

import anyio

from benchmarks.context import RunContext
from benchmarks.timing import Metric, Stats, Target, interleave, single

NAME = "output_volume"
#: Longest an execution may take on either side before the scenario reports it as hung.
DEADLINE_S = 120.0
TITLE = "6. Output volume"


def code(lines: int) -> str:
    return f"for i in range({lines}):\n    print(f'line {{i}} of the output', flush=True)"


async def run(ctx: RunContext) -> list[Metric]:
    # The smoke size stays under zmq's 1000-message send queue of the kernel's PUB socket: on a
    # machine loaded enough that a reader's zmq thread falls behind, a longer burst can still
    # lose its tail (its idle status with it), which the raw baseline waits for until its
    # deadline; the smoke test checks that the scenario runs, not that.
    lines = ctx.size(10_000, 500)
    src = code(lines)
    lines_total = lines
    sizes: dict[str, int] = {}
    metrics: list[Metric] = []
    modes = (("ipyflow", "ipyflow"), ("static", "plain"))
    for mode, kind in (
        modes[1:] if ctx.smoke else modes
    ):  # the smoke test keeps to the plain kernels
        side = await ctx.pool.mcp(mode)
        raw = await ctx.pool.raw(kind)  # type: ignore[arg-type]

        async def via_mcp() -> None:
            # An agent whose call yields before the end keeps reading with read_cell: count it all.
            res = await side.mcp.call(
                "ipython", {"kernel_id": side.kernel_id, "code": src, "yield_time_ms": 30000}
            )
            total = res.bytes
            with anyio.move_on_after(DEADLINE_S):
                while res.data.get("state") in ("queued", "running"):
                    handle = res.data["handle"]
                    res = await side.mcp.call(
                        "read_cell",
                        {"kernel_id": side.kernel_id, "handle": handle, "yield_time_ms": 30000},
                    )
                    total += res.bytes
            if res.data.get("state") in ("queued", "running"):
                raise RuntimeError(
                    f"{res.data['handle']} still 'running' {DEADLINE_S:g} s after it started "
                    "although the kernel is"
                    " idle: the daemon missed iopub messages (its 'idle' status among them) "
                    f"under {lines_total:,}"
                    " flushed prints, so the execution never completes; last read: "
                    f"{res.text.splitlines()[0][:120]}"
                )
            if res.data.get("state") != "ok":
                raise RuntimeError(f"print loop failed through MCP: {res.text[:500]}")
            sizes[f"mcp_{mode}"] = total

        async def via_raw() -> None:
            res = await raw.execute(src, timeout=DEADLINE_S)
            sizes[f"raw_{mode}"] = res.output_bytes

        s = await interleave(
            {"mcp": via_mcp, "raw": via_raw}, ctx.reps(5, 1), warmup=ctx.reps(1, 0)
        )
        label = (
            f"{lines:,} flushed prints, {mode if mode == 'ipyflow' else 'plain (static)'} kernel"
        )
        metrics.append(
            Metric(
                NAME,
                f"{label}: wall time",
                "s",
                Stats.of(s["mcp"]),
                "MCP ipython",
                "raw jupyter_client",
                Stats.of(s["raw"]),
                Target("ratio", "<=", 1.5),
            )
        )
        metrics.append(
            Metric(
                NAME,
                f"{label}: bytes to the agent",
                "B",
                single(sizes[f"mcp_{mode}"]),
                "MCP result",
                "raw output",
                single(sizes[f"raw_{mode}"]),
            )
        )
    return metrics
