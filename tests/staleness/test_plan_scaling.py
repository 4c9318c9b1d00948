"""Executing a plan does the same per-notebook work at 400 cells as at 40: counted, not timed.

A chain notebook (``v{i} = v{i-1} + 1``, each cell reads the one above) is warmed, its first
cell edited, and ``run_stale(execute=True)`` runs every cell. While it runs, the operations
whose cost is proportional to the notebook's size are counted: full re-plans, notebook parses
and writes, scans of the kernel's record. Their counts must not grow with the number of cells
(a re-plan before each cell made executing a plan quadratic); the per-cell work (one tracker
record per cell run) must, which shows the counters see the execute. So must not the round
trips to the kernel the batch waits for besides the cells' own (a saved cell's snapshot answer
is taken in while the next cell runs).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from ipykeep.checkpoints.state import KernelCheckpoints
from ipykeep.daemon.composition import compose
from ipykeep.engine.archive import KernelArchive
from ipykeep.engine.engine import Engine
from ipykeep.kernel.driver import KernelProcess
from ipykeep.project import notebook as notebook_module
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.service import StalenessService
from ipykeep.staleness.tracker import StalenessTracker
from tests.conftest import make_project

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(900)]

#: operations whose cost grows with the notebook (or the record): name -> (owner, attribute)
PER_NOTEBOOK: dict[str, tuple[Any, str]] = {
    "full re-plans": (StalenessTracker, "plan"),
    "notebook parses": (notebook_module, "_parse_json"),
    "notebook writes": (notebook_module, "replace_file"),
    "record scans": (KernelArchive, "entries"),
    "record reads": (KernelArchive, "execution_entry"),
}
#: round trips to the kernel the batch waits for besides the cells' own: a saved cell's
#: snapshot request is answered while the batch goes on (the kernel takes it before the next
#: cell), so a chain whose cells are saved one by one waits for none of them
WAITED_ROUND_TRIPS: dict[str, tuple[Any, str]] = {
    "helper round trips waited for": (KernelProcess, "eval_silent")
}
#: work done once per cell run
PER_CELL: dict[str, tuple[Any, str]] = {"cell runs recorded": (StalenessTracker, "record_cell_run")}

#: a file watcher may notice the edit of the first cell while the plan runs and re-plan once
#: for its notice: work per event, not per cell
WATCHER_SLACK = 2
#: the helper round trips also serve timed work (the checkpoint writer's flush, the kernel's
#: memory look), which a loaded machine calls a few more times during the longer batch; one per
#: cell would add 360 between the two sizes, so a tenth of that is allowed
TIMED_SLACK = 36


def _chain(path: Path, cells: int, first: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first, id="c0000")] + [
        nbformat.v4.new_code_cell(f"v{i} = v{i - 1} + 1", id=f"c{i:04d}") for i in range(1, cells)
    ]
    nbformat.write(nb, path)


def _counting(counts: Counter[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1
        return fn(*args, **kwargs)

    return counted


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    root = make_project(tmp_path_factory.mktemp("plan_scaling") / "p", example=False)
    # every cell saved with its values, whatever the machine's speed: the snapshot answers are
    # the round trips a batch could wait for one per cell
    config = Config(idle_timeout=0, dataflow="static", checkpoint_min_cell_s=0.0)
    eng = compose(ProjectPaths(root), config).engine
    yield eng
    await eng.shutdown()


async def _execute_counts(engine: Engine, cells: int, monkeypatch: pytest.MonkeyPatch) -> Counter:
    nb = engine.paths.root / f"chain{cells}.ipynb"
    _chain(nb, cells, "v0 = 0")
    kid = (await engine.create_kernel(notebook=str(nb), warm=True, wait=True)).kernel_id
    _chain(nb, cells, "v0 = 100")  # the first cell edited: every cell below reads the change
    staleness = next(o for o in engine.observers if isinstance(o, StalenessService))
    counts: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        for name, (owner, attr) in {**PER_NOTEBOOK, **WAITED_ROUND_TRIPS, **PER_CELL}.items():
            patch.setattr(owner, attr, _counting(counts, name, getattr(owner, attr)))
        result = await staleness.run_stale(kernel_id=kid, execute=True)
    assert result.ok and result.batch is not None
    assert len(result.batch.results) == cells and not result.batch.skipped
    # every cell's checkpoint is taken in by the time the execute returns (saved or cheap)
    saved = engine.session(kid).features.of(KernelCheckpoints).cells
    assert set(saved) == {f"c{i:04d}" for i in range(cells)}
    counts["cells saved with values"] = sum(not c.cheap for c in saved.values())
    await engine.close_kernel(kernel_id=kid)
    return counts


async def test_executing_a_plan_does_no_per_notebook_work_per_cell(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = await _execute_counts(engine, 40, monkeypatch)
    large = await _execute_counts(engine, 400, monkeypatch)
    assert small["cell runs recorded"] == 40 and large["cell runs recorded"] == 400
    # the long chain's cells are all saved: waiting for each snapshot's answer would make the
    # round trips counted below one per cell
    assert large["cells saved with values"] == 400, dict(large)
    slack = {
        **dict.fromkeys(PER_NOTEBOOK, WATCHER_SLACK),
        **dict.fromkeys(WAITED_ROUND_TRIPS, TIMED_SLACK),
    }
    grown = {
        name: (small[name], large[name])
        for name, allowed in slack.items()
        if large[name] > small[name] + allowed
    }
    assert not grown, f"per-notebook work grew with the notebook (40 cells, 400 cells): {grown}"
    # and it is a handful per execute, not one per cell
    assert all(large[name] <= 10 for name in PER_NOTEBOOK), dict(large)
    assert all(large[name] <= 10 + TIMED_SLACK for name in WAITED_ROUND_TRIPS), dict(large)
