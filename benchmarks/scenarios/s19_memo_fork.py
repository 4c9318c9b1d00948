"""Memoized runs and forks: reverting an edit, an agent trying variants, forking a kernel.

1. The 3-cell revert: a slow load, ``k = 2; scaled = …``, a slow aggregate. Edit ``k`` to 3,
   execute the plan, put ``k = 2`` back and execute again: that last execute with memoized
   runs (checkpoints on) against the same notebook in a project with checkpoints off (the
   plan re-runs the cells).
2. The agent loop: a notebook with a slow fit whose hyperparameter an agent tries in turn,
   putting the original value back between variants (edit, execute, revert, execute): the whole
   loop with memoized runs against re-running each time.
3. Fork vs re-run: ``fork_kernel`` of a kernel holding a large frame (a new kernel with its
   variables and plan), the process way (``how`` reported, and the parent's resident memory
   before and after) and the checkpoint way, against starting a new kernel on a copy of the
   notebook that re-runs its cells.
"""

from __future__ import annotations

import shutil
from typing import Any

from benchmarks.context import RunContext
from benchmarks.notebooks import set_source, write_notebook
from benchmarks.sessions import engine, make_project
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "memo_fork"
TITLE = "19. Memoized runs and forks"


async def _flush(eng: Any, kernel_id: str) -> None:
    from ipykeep.kernel.inkernel import CHECKPOINT

    await eng.kernels[kernel_id].process.eval_silent(CHECKPOINT.call("flush", 600), timeout=700)


def _layers(eng: Any) -> tuple[Any, Any]:
    from ipykeep.checkpoints.service import CheckpointService
    from ipykeep.staleness.service import StalenessService

    return (
        next(o for o in eng.observers if isinstance(o, StalenessService)),
        next(o for o in eng.observers if isinstance(o, CheckpointService)),
    )


async def _execute(eng: Any, kernel_id: str, memo: bool) -> float:
    staleness, _ = _layers(eng)
    seconds, res = await timed(lambda: staleness.run_stale(kernel_id=kernel_id, execute=True))
    if not res.ok:
        raise RuntimeError(f"the plan failed: {res.batch}")
    if memo:
        await _flush(eng, kernel_id)
    return float(seconds)


def _sides(ctx: RunContext) -> dict[str, dict[str, Any]]:
    return {
        "rerun": {"checkpoints": False},
        "memo": {"checkpoint_min_cell_s": 0.0} if ctx.smoke else {},
    }


async def _edit_and_revert(
    ctx: RunContext, tag: str, cells: list[tuple[str, str]], cell: str, edits: list[str]
) -> dict[str, list[tuple[float, float]]]:
    """Per side: for each edit of ``cell``'s source, the execute time of the edit and of putting
    the original source back."""
    original = dict(cells)[cell]
    out: dict[str, list[tuple[float, float]]] = {}
    for side, config in _sides(ctx).items():
        root = make_project(ctx.workdir(f"{NAME}-{tag}-{side}"))
        nb = write_notebook(root / f"{tag}.ipynb", cells)
        async with engine(root, dataflow="static", write_outputs=False, **config) as eng:
            rec = await eng.create_kernel(notebook=str(nb))
            memo = side == "memo"
            if memo:
                await _flush(eng, rec.kernel_id)
            times = out[side] = []
            for edited in edits:
                set_source(nb, cell, edited)
                edit_s = await _execute(eng, rec.kernel_id, memo)
                set_source(nb, cell, original)
                times.append((edit_s, await _execute(eng, rec.kernel_id, memo)))
    return out


async def _revert(ctx: RunContext) -> list[Metric]:
    load_s, agg_s = ctx.size(3.0, 1.0, 0.3), ctx.size(2.0, 1.0, 0.3)
    reps = ctx.reps(3, 1)
    scale = "k = {k}\nscaled = [x * k for x in data]"
    cells = [
        ("load", f"import time\ntime.sleep({load_s})\ndata = list(range(100_000))"),
        ("scale", scale.format(k=2)),
        ("agg", f"time.sleep({agg_s})\ntotal = sum(scaled)\nprint(total)"),
    ]
    times = await _edit_and_revert(ctx, "revert", cells, "scale", [scale.format(k=3)] * reps)
    samples = {side: [revert_s for _, revert_s in pairs] for side, pairs in times.items()}
    return [
        Metric(
            NAME,
            f"revert an edit ({load_s:g} s load, {agg_s:g} s aggregate): execute the plan",
            "s",
            Stats.of(samples["memo"]),
            "load the memoized runs",
            "re-run the cells",
            Stats.of(samples["rerun"]),
            target=Target("ratio", "<=", 0.05),
            extra={"cells_run_s": agg_s},
        )
    ]


async def _agent_loop(ctx: RunContext) -> list[Metric]:
    fit_s = ctx.size(10.0, 1.0, 0.3)
    variants = ctx.size(10, 3, 2)
    param = "alpha = {a}"
    cells = [
        ("data", "import time\nxs = list(range(50_000))"),
        ("param", param.format(a=1)),
        ("fit", f"time.sleep({fit_s})\nscore = sum(x * alpha for x in xs) % 997\nprint(score)"),
    ]
    edits = [param.format(a=v) for v in range(2, 2 + variants)]
    times = await _edit_and_revert(ctx, "loop", cells, "param", edits)
    samples = {side: [sum(a + b for a, b in pairs)] for side, pairs in times.items()}
    return [
        Metric(
            NAME,
            f"agent loop: {variants} variants of a {fit_s:g} s fit, reverting between them",
            "s",
            Stats.of(samples["memo"]),
            "memoized runs",
            "re-run each time",
            Stats.of(samples["rerun"]),
            target=Target("ratio", "<=", 0.3),
            extra={"variants": variants},
        )
    ]


def _rss_mb(pid: int | None) -> float:
    """A process's resident set in MB (``/proc``; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return int(next(ln for ln in fh if ln.startswith("VmRSS:")).split()[1]) / 1024
    except (OSError, StopIteration, ValueError):
        return 0.0


async def _fork(ctx: RunContext) -> list[Metric]:
    rows = ctx.size(12_500_000, 250_000, 20_000)  # x 10 float64 columns: 1 GB full
    load_s = ctx.size(5.0, 0.5, 0.1)
    cells = [
        ("imports", "import time\nimport numpy as np\nimport pandas as pd"),
        (
            "load",
            f"time.sleep({load_s})\nbig = pd.DataFrame(np.random.default_rng(0).random(({rows}, "
            "10)))",
        ),
        ("stats", "means = big.mean()"),
    ]
    root = make_project(ctx.workdir(f"{NAME}-fork"))
    nb = write_notebook(root / "frame.ipynb", cells)
    config: dict[str, Any] = {
        "checkpoint_max_value_mb": 4096.0,
        "checkpoint_max_cell_mb": 4096.0,
        "checkpoint_max_project_mb": 16384.0,
        "checkpoint_snapshot_budget_s": 60.0,
    }
    # the default way (a fork of the kernel's process where it can be used), then the
    # checkpoint way (not in --smoke), each against a new kernel re-running the cells
    ways = ["process"] if ctx.smoke else ["process", "checkpoint"]
    forked: dict[str, list[float]] = {way: [] for way in ways}
    how: dict[str, set[str]] = {way: set() for way in ways}
    growth: dict[str, list[float]] = {way: [] for way in ways}
    rerun: list[float] = []
    async with engine(root, dataflow="static", write_outputs=False, **config) as eng:
        rec = await eng.create_kernel(notebook=str(nb))
        await _flush(eng, rec.kernel_id)
        _, checkpoints = _layers(eng)
        parent = eng.kernels[rec.kernel_id]
        for i in range(ctx.reps(3, 1)):
            for way in ways:
                parent.config = parent.config.with_overrides(fork_method=way)
                before = _rss_mb(parent.process.pid)
                seconds, made = await timed(
                    lambda i=i, way=way: checkpoints.fork_kernel(
                        kernel_id=rec.kernel_id, name=f"f{i}-{way}.ipynb"
                    )
                )
                forked[way].append(seconds)
                how[way].add(
                    made.how + (f" ({made.fallback_reason})" if made.fallback_reason else "")
                )
                growth[way].append(_rss_mb(parent.process.pid) - before)
                await eng.close_kernel(kernel_id=made.kernel_id)
            copy = root / f"r{i}.ipynb"
            shutil.copy(nb, copy)
            seconds, again = await timed(lambda copy=copy: eng.create_kernel(notebook=str(copy)))
            rerun.append(seconds)
            await eng.close_kernel(kernel_id=again.kernel_id)
    return [
        Metric(
            NAME,
            f"fork a kernel holding a {rows * 80 / 1e9:.2f} GB frame ({load_s:g} s load), "
            f"fork_method = {way!r}",
            "s",
            Stats.of(forked[way]),
            f"fork_kernel (how: {', '.join(sorted(how[way]))})",
            "new kernel re-running the cells",
            Stats.of(rerun),
            target=Target("ratio", "<=", 0.1) if way == "process" else None,
            extra={
                "how": sorted(how[way]),
                "parent_rss_growth_mb": [round(g, 1) for g in growth[way]],
            },
        )
        for way in ways
    ]


async def run(ctx: RunContext) -> list[Metric]:
    return [*(await _revert(ctx)), *(await _agent_loop(ctx)), *(await _fork(ctx))]
