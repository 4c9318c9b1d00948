"""Plan scale: executing the plan after an early edit, per cell, as the notebook grows.

Four shapes at 250, 1,000 and 2,000 code cells, each warmed in its own kernel (static mode,
default configuration: checkpoints on), then edited early so the change flows down, then
``run_stale(execute=True)`` over the daemon RPC:

* ``chain``: ``v{i} = v{i-1} + 1``, the first cell edited (every cell stale through the one
  above it);
* ``fan``: ``v{i} = v0 + i``, the first cell edited (every cell reads cell 0);
* ``sales``: the generated sales notebook (``realistic.py``), padded with its follow-up checks,
  the cell that sets the data size edited;
* ``statsmodels``: the real notebook of scenario 10 with the same kind of follow-up checks of its
  first data frame after its eighth cell, the cell that loads that frame edited.

Right after, in the same invocation, nbclient runs the same notebook in a fresh kernel cell by
cell, and the cells ipykeep executed are timed there too: the first row per size is the whole
execute against nbclient running the same cells (same order, same state before each). The
second is the time per executed cell at that size against the smallest size: near 1 is linear,
N/N0 would be quadratic. ``IPYKEEP_BENCH_PLAN_SHAPES=chain,fan`` runs only those shapes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import nbformat

from benchmarks.context import RunContext
from benchmarks.notebooks import nbclient_cells, set_source
from benchmarks.realistic import build
from benchmarks.sessions import daemon, make_project
from benchmarks.timing import Metric, Stats, Target, timed
from ipykeep.client.connection import DaemonClient

NAME = "plan_scale"
TITLE = "16. Plan scale: executing the plan after an early edit, per cell"

STATSMODELS = Path(__file__).resolve().parents[1] / "thirdparty" / "statsmodels_examples.ipynb"
#: the real notebook's frame of its first part (``sm.datasets.fair``), its columns
FAIR_COLUMNS = ("rate_marriage", "age", "yrs_married", "children", "religious", "educ")


def _write(path: Path, sources: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(src, id=f"c{i:05d}") for i, src in enumerate(sources)]
    nbformat.write(nb, path)


def _chain(path: Path, n: int) -> str:
    _write(path, ["v0 = 0"] + [f"v{i} = v{i - 1} + 1" for i in range(1, n)])
    return "c00000"


def _fan(path: Path, n: int) -> str:
    _write(path, ["v0 = 0"] + [f"v{i} = v0 + {i}" for i in range(1, n)])
    return "c00000"


def _sales(path: Path, n: int) -> str:
    build(path, n)
    return "cell004"


def _statsmodels(path: Path, n: int) -> str:
    nb = nbformat.read(STATSMODELS, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    after = nb.cells.index(code[7])
    checks = [
        nbformat.v4.new_code_cell(
            f"check_{k} = float(data[{FAIR_COLUMNS[k % len(FAIR_COLUMNS)]!r}]"
            f".quantile({0.05 + 0.9 * (k % 10) / 10:.2f}))",
            id=f"check{k:05d}",
        )
        for k in range(max(0, n - len(code)))
    ]
    nb.cells[after + 1 : after + 1] = checks
    nbformat.write(nb, path)
    return str(code[2].get("id"))


#: shape -> (writes the notebook of n code cells and returns the cell to edit, the edit)
SHAPES: dict[str, tuple[Callable[[Path, int], str], Callable[[str], str]]] = {
    "chain": (_chain, lambda _: "v0 = 100"),
    "fan": (_fan, lambda _: "v0 = 100"),
    "sales": (_sales, lambda src: src.replace("N = 60_000", "N = 59_000")),
    "statsmodels": (
        _statsmodels,
        lambda src: src.replace("load_pandas().data", "load_pandas().data.iloc[:6000]"),
    ),
}
#: a comma-separated subset of ``SHAPES`` to run (all of them by default)
SHAPES_VARIABLE = "IPYKEEP_BENCH_PLAN_SHAPES"
#: the acceptance covers the synthetic shapes (the realistic ones' cells cost what they compute)
TARGETED = frozenset({"chain", "fan"})


def _source(path: Path, cell_id: str) -> str:
    nb = nbformat.read(path, as_version=4)
    return str(next(c.source for c in nb.cells if c.get("id") == cell_id))


async def _one(client: DaemonClient, root: Path, shape: str, n: int) -> tuple[float, float, int]:
    """ipykeep's execute of the plan and nbclient's run of the same cells: (s, s, cells)."""
    write, edit = SHAPES[shape]
    nb = root / f"{shape}{n}.ipynb"
    edited = write(nb, n)
    rec = await client.acall(
        "create_kernel", notebook=str(nb), warm=True, wait=True, dataflow="static"
    )
    kid = rec["kernel_id"]
    try:
        if rec.get("warm", {}).get("failed"):
            raise RuntimeError(f"{shape} {n}: warm-up failed: {rec['warm']}")
        await anyio.to_thread.run_sync(set_source, nb, edited, edit(_source(nb, edited)))
        seconds, res = await timed(lambda: client.acall("run_stale", kernel_id=kid, execute=True))
        results = res.get("batch", {}).get("results", [])
        if not res.get("ok") or not results:
            raise RuntimeError(f"{shape} {n}: run_stale ran {len(results)}: {res.get('notices')}")
    finally:
        await client.acall("close_kernel", kernel_id=kid)
    ran = {r["cell_id"] for r in results}
    base_s, base_cells = await nbclient_cells(nb, ran)
    if base_cells != len(ran):
        raise RuntimeError(f"{shape} {n}: nbclient ran {base_cells} of the {len(ran)} cells")
    return seconds, base_s, len(ran)


async def run(ctx: RunContext) -> list[Metric]:
    sizes = ctx.size((250, 1000, 2000), (50, 200), (10, 20))
    shapes = ctx.size(tuple(SHAPES), ("chain", "fan", "sales"), ("chain", "fan"))
    if os.environ.get(SHAPES_VARIABLE):
        shapes = tuple(s for s in os.environ[SHAPES_VARIABLE].split(",") if s in SHAPES)
    root = make_project(ctx.workdir(NAME))
    # shape -> size -> [(ipykeep s, nbclient s, cells)]
    samples: dict[str, dict[int, list[tuple[float, float, int]]]] = {
        shape: {n: [] for n in sizes} for shape in shapes
    }
    with daemon(root) as client:
        # a kernel without a notebook keeps the daemon up while each size's kernel closes (the
        # daemon exits with its last kernel)
        await client.acall("create_kernel", warm=False)
        for _ in range(ctx.reps(1, 1)):
            for shape in shapes:
                for n in sizes:
                    samples[shape][n].append(await _one(client, root, shape, n))
    metrics: list[Metric] = []
    for shape in shapes:
        base_n = sizes[0]
        base_per_cell = Stats.of([s / c for s, _, c in samples[shape][base_n]])
        for n in sizes:
            runs = samples[shape][n]
            cells = runs[0][2]
            per_cell = [s / c for s, _, c in runs]
            extra = {
                "cells": cells,
                "ipykeep_ms_per_cell": round(1000 * Stats.of(per_cell).median, 2),
                "nbclient_ms_per_cell": round(
                    1000 * Stats.of([b / c for _, b, c in runs]).median, 2
                ),
            }
            metrics.append(
                Metric(
                    NAME,
                    f"{shape}, {n} cells, early edit: execute the plan ({cells} cells)",
                    "s",
                    Stats.of([s for s, _, _ in runs]),
                    "run_stale(execute)",
                    "nbclient, the same cells",
                    Stats.of([b for _, b, _ in runs]),
                    Target("ratio", "<=", 1.5) if shape in TARGETED else None,
                    extra=extra,
                )
            )
            if n != base_n:
                metrics.append(
                    Metric(
                        NAME,
                        f"{shape}, {n} cells: per executed cell",
                        "s",
                        Stats.of(per_cell),
                        f"{n} cells",
                        f"{base_n} cells",
                        base_per_cell,
                        Target("ratio", "<=", 1.2) if shape in TARGETED else None,
                        extra=extra,
                    )
                )
    return metrics
