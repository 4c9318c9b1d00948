"""Context cost: the bytes an agent receives (and pays for) through MCP.

Sizes are of results as the official client receives them (their JSON form, images included):
the tool catalog, a long print, a plot, an error, a stale plan of a 60-cell notebook, and the
whole loop an agent runs on the example notebook. Results carry two self-sufficient channels
(text, structuredContent) and a host forwards one to its model: the long print's budget is on
that channel (``model_bytes``), the wire total is kept as an extra. Byte counts are
deterministic: one sample.
"""

from __future__ import annotations

from typing import Any

import anyio

from benchmarks.context import RunContext
from benchmarks.notebooks import chain_notebook, copy_example, set_source
from benchmarks.timing import Metric, Target, single
from ipykeep.mcp_server.catalog import TOOLS_LIST_BUDGET

NAME = "context_cost"
TITLE = "7. Context cost"

PRINT_LINES = 3000
PLOT = (
    "import matplotlib.pyplot as plt\nplt.figure(figsize=(6, 4))\n"
    "plt.plot([i * i for i in range(100)])\nplt.title('squares')\nplt.show()"
)
ERROR = "def ratio(a, b):\n    return a / b\n\nratio(1, 0)"


async def run(ctx: RunContext) -> list[Metric]:
    kind = "plain" if ctx.smoke else "ipyflow"  # the smoke test keeps to the plain kernels
    side = await ctx.pool.mcp("static" if ctx.smoke else "ipyflow")
    mcp, kid = side.mcp, side.kernel_id
    raw = await ctx.pool.raw(kind)  # type: ignore[arg-type]
    metrics: list[Metric] = []

    tools = await mcp.tools_list_bytes()
    metrics.append(
        Metric(
            NAME,
            "tools/list",
            "B",
            single(tools),
            "MCP",
            target=Target("value", "<=", TOOLS_LIST_BUDGET),
        )
    )

    long_print = (
        f"for i in range({PRINT_LINES}):\n    print(f'row {{i}}: value={{i * 3.14159:.3f}}')"
    )
    res = await mcp.call("ipython", {"kernel_id": kid, "code": long_print, "yield_time_ms": 30000})
    raw_bytes = (await raw.execute(long_print)).output_bytes
    metrics.append(
        Metric(
            NAME,
            f"{PRINT_LINES:,}-line print (channel a model reads)",
            "B",
            single(res.model_bytes),
            "MCP ipython",
            "raw output",
            single(raw_bytes),
            Target("value", "<=", 4 * 1024),
            extra={"wire_bytes": res.bytes},
        )
    )

    res = await mcp.call("ipython", {"kernel_id": kid, "code": PLOT, "yield_time_ms": 30000})
    images = [b for b in res.result.content if getattr(b, "type", "") == "image"]
    metrics.append(
        Metric(
            NAME,
            "a plot (6x4 in, inline PNG)",
            "B",
            single(res.bytes),
            "MCP ipython",
            extra={"images": len(images)},
        )
    )

    res = await mcp.call("ipython", {"kernel_id": kid, "code": ERROR, "yield_time_ms": 30000})
    raw_bytes = (await raw.execute(ERROR)).output_bytes
    metrics.append(
        Metric(
            NAME,
            "an error (ZeroDivisionError)",
            "B",
            single(res.bytes),
            "MCP ipython",
            "raw traceback",
            single(raw_bytes),
        )
    )

    chain = ctx.size(60, 60, smoke=10)
    nb60 = chain_notebook(side.root / "sixty.ipynb", chain)
    created = await mcp.call("create_kernel", {"notebook": nb60.name})
    kid60 = created.data["kernel_id"]
    try:
        await anyio.to_thread.run_sync(set_source, nb60, "c5", "x5 = (x2 + x4) % 1000 + 1.5")
        res = await mcp.call("run_stale", {"kernel_id": kid60})
        planned = len(res.data.get("stale", []))
        metrics.append(
            Metric(
                NAME,
                f"run_stale plan, {chain}-cell notebook",
                "B",
                single(res.bytes),
                "MCP run_stale",
                extra={"cells_in_plan": planned},
            )
        )
    finally:
        await mcp.call("close_kernel", {"kernel_id": kid60})

    metrics.append(await _agent_loop(ctx, side.root, mcp))
    return metrics


async def _agent_loop(ctx: RunContext, root: Any, mcp: Any) -> Metric:
    nb = copy_example(root)
    steps: dict[str, int] = {}
    created = await mcp.call("create_kernel", {"notebook": nb.name})
    steps["create_kernel"] = created.bytes
    kid = created.data["kernel_id"]
    try:
        steps["list_cells"] = (await mcp.call("list_cells", {"kernel_id": kid})).bytes
        await anyio.to_thread.run_sync(
            set_source,
            nb,
            "42459532",
            'by_region = clean.groupby("region")["revenue"].agg(["count", "sum", '
            '"median"]).round(1)\nby_region',
        )
        steps["run_stale"] = (await mcp.call("run_stale", {"kernel_id": kid})).bytes
        steps["run_stale_execute"] = (
            await mcp.call("run_stale", {"kernel_id": kid, "execute": True})
        ).bytes
        steps["inspect"] = (await mcp.call("inspect", {"kernel_id": kid, "name": "clean"})).bytes
        steps["namespace"] = (await mcp.call("namespace", {"kernel_id": kid})).bytes
    finally:
        steps["close_kernel"] = (await mcp.call("close_kernel", {"kernel_id": kid})).bytes
    return Metric(
        NAME,
        "agent loop on examples/01_eda.ipynb (8 calls)",
        "B",
        single(sum(steps.values())),
        "MCP",
        extra={"per_call": steps},
    )
