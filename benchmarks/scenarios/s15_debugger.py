"""Debugger: what having it costs per cell when no breakpoint is set, and when one is.

The compute cells of "Dataflow overhead" run as notebook cells in three static kernels of one
engine, interleaved: the debugger as installed (its IPython hooks registered, nothing armed),
a kernel with those hooks removed (the baseline: no debugger at all), and a kernel with a
function breakpoint armed that the cells never hit (bdb traces every call on the main thread).
"""

from __future__ import annotations

from typing import Any

from benchmarks.context import RunContext
from benchmarks.notebooks import write_notebook
from benchmarks.scenarios.s3_dataflow_overhead import IMPORTS, LABELS, workloads
from benchmarks.sessions import engine, make_project
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "debugger"
TITLE = "15. Debugger"

#: Removes the debugger's hooks from a kernel: the baseline side has no debugger at all.
UNHOOK = (
    "(lambda shell, m: (shell.events.unregister('pre_run_cell', m._pre_run), "
    "shell.events.unregister('post_run_cell', m._post_run), '\"removed\"')[-1])"
    "(__import__('IPython').get_ipython(), __import__('sys').modules['_ipykeep_debug'])"
)

SIDES = ("available", "absent", "armed")


async def _kernel(eng: Any, root: Any, side: str) -> str:
    from ipykeep.debugger.service import DebuggerService

    rec = await eng.create_kernel(notebook=str(root / "compute.ipynb"), warm=False)
    await eng.run_cells(["imports"], kernel_id=rec.kernel_id)
    if side == "absent":
        await eng.kernels[rec.kernel_id].process.eval_silent(UNHOOK, decode=False)
    if side == "armed":
        service = next(o for o in eng.observers if isinstance(o, DebuggerService))
        await service.debug("break never_called_anywhere", kernel_id=rec.kernel_id)
    return rec.kernel_id


async def run(ctx: RunContext) -> list[Metric]:
    n = ctx.size(2_000_000, 200_000, 20_000)
    cells = workloads(n)
    reps = ctx.reps(7, 1)
    root = make_project(ctx.workdir(NAME))
    write_notebook(root / "compute.ipynb", [("imports", IMPORTS), *cells.items()])
    samples: dict[str, dict[str, list[float]]] = {c: {s: [] for s in SIDES} for c in cells}
    async with engine(root, dataflow="static", write_outputs=False, checkpoints=False) as eng:
        kernels = {side: await _kernel(eng, root, side) for side in SIDES}
        for round_ in range(reps + (0 if ctx.quick or ctx.smoke else 1)):
            order = SIDES[round_ % 3 :] + SIDES[: round_ % 3]  # rotate who goes first
            for cell in cells:
                for side in order:
                    kid = kernels[side]
                    seconds, batch = await timed(
                        lambda kid=kid, cell=cell: eng.run_cells([cell], kernel_id=kid)
                    )
                    if not batch.ok:
                        raise RuntimeError(f"{cell} failed ({side}): {batch.results[0].error}")
                    if round_ or ctx.quick or ctx.smoke:
                        samples[cell][side].append(seconds)
    metrics = []
    for cell, by_side in samples.items():
        label = LABELS[cell] if cell == "empty" else f"{LABELS[cell]} ({n:,})"
        target = None if cell == "empty" else Target("ratio", "<=", 1.05)
        metrics.append(
            Metric(
                NAME,
                f"{label}: debugger available, no breakpoint",
                "s",
                Stats.of(by_side["available"]),
                "debugger hooks installed",
                "no debugger hooks",
                Stats.of(by_side["absent"]),
                target,
            )
        )
        metrics.append(
            Metric(
                NAME,
                f"{label}: a breakpoint armed elsewhere",
                "s",
                Stats.of(by_side["armed"]),
                "bdb tracing the main thread",
                "no debugger hooks",
                Stats.of(by_side["absent"]),
            )
        )
    return metrics
