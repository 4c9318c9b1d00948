"""Big edit: an early cell changes and nearly every cell is stale; plan vs fresh run.

On a warm kernel of the 150-cell notebook, the cell that sets the data size is edited. Static
mode: in ipyflow mode (ipyflow-core 0.0.231) this edit is planned as one cell, its dependents
missed — a staleness defect reported separately — so its timing would compare nothing. Three
ways back to a correct state are timed: executing the stale plan (``run_stale(execute=True)``),
``run_stale(execute=True, fresh=True)`` (restart, run every cell) and nbclient running the
notebook in a fresh kernel. The plan's own estimate (its cost fields) is kept in the extras,
with whether it recommended the fresh run.
"""

from __future__ import annotations

import anyio

from benchmarks.context import RunContext
from benchmarks.notebooks import nbclient_run_all, set_source
from benchmarks.realistic import build, code_cells
from benchmarks.sessions import daemon, make_project
from benchmarks.timing import Metric, Stats, timed

NAME = "big_edit"
TITLE = "11. Big edit: plan vs fresh run"

EDITED = "cell004"


async def run(ctx: RunContext) -> list[Metric]:
    cells = ctx.size(150, 10)
    dataflow = "static"
    root = make_project(ctx.workdir(NAME))
    nb = build(root / "sales.ipynb", cells)
    original = code_cells(cells)[4]
    samples: dict[str, list[float]] = {"plan": [], "fresh": [], "nbclient": []}
    extra: dict[str, object] = {"dataflow": dataflow}
    with daemon(root) as client:
        rec = await client.acall(
            "create_kernel", notebook=str(nb), warm=True, wait=True, dataflow=dataflow
        )
        kid = rec["kernel_id"]
        if rec.get("warm", {}).get("failed"):
            raise RuntimeError(f"warm-up failed: {rec['warm']}")
        for rep in range(ctx.reps(1, 1)):
            for side in (
                ("plan",) if ctx.smoke else ("plan", "fresh")
            ):  # smoke: --fresh is tested in tests/staleness
                edit = original.replace(
                    "N = 60_000", f"N = {59_000 - 10 * rep - (side == 'fresh')}"
                )
                await anyio.to_thread.run_sync(set_source, nb, EDITED, edit)
                plan = await client.acall("run_stale", kernel_id=kid)
                if side == "plan":
                    extra.update(stale_cells=len(plan["stale"]), estimate=plan.get("cost"))
                seconds, res = await timed(
                    lambda: client.acall(
                        "run_stale", kernel_id=kid, execute=True, fresh=side == "fresh"
                    )
                )
                if not res.get("ok"):
                    raise RuntimeError(
                        f"run_stale ({side}) failed: {res.get('batch', {}).get('results', [])[-1:]}"
                    )
                samples[side].append(seconds)
            seconds, _ = await timed(lambda: nbclient_run_all(nb))
            samples["nbclient"].append(seconds)
    base = Stats.of(samples["nbclient"])
    label = f"edit cell 4 of {cells} ({dataflow})"
    metrics = [
        Metric(
            NAME,
            f"{label}: execute the plan",
            "s",
            Stats.of(samples["plan"]),
            "run_stale(execute)",
            "nbclient run-all",
            base,
            extra=extra,
        ),
    ]
    if samples["fresh"]:
        metrics.append(
            Metric(
                NAME,
                f"{label}: --execute --fresh",
                "s",
                Stats.of(samples["fresh"]),
                "run_stale(execute, fresh)",
                "nbclient run-all",
                base,
            )
        )
    return metrics
