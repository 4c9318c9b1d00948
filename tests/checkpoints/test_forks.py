"""Forks on real kernels: a fork holds its parent's variables and plan, bound to a copy of the
notebook; what it runs stays out of the parent, and feeds the memo the parent then loads from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ipykeep.engine.engine import Engine
from tests.checkpoints.kit import composed_engine, flush, layer
from tests.checkpoints.test_memo import REVERT, execute, loaded, memo_cells
from tests.staleness.test_staleness_acceptance import _KERNEL_VALUES, Nb

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

K3 = "k = 3\nscaled = [x * k for x in data]\ntime.sleep(0.3)"


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    async with composed_engine(tmp_path_factory, "forks") as eng:
        yield eng


@pytest.mark.parametrize("mode", ["static", "ipyflow"])
async def test_fork_runs_apart_and_feeds_the_parent(engine: Engine, mode: str) -> None:
    directory = engine.paths.root / f"fork-{mode}"
    directory.mkdir()
    parent = Nb(engine, directory, mode)
    parent.write_cells(REVERT)
    await parent.start()
    await flush(parent)
    await parent.scratch("extra = 5")
    original = parent.path.read_bytes()

    made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
    assert (made.how, made.fallback_reason) == ("process", None)
    assert Path(made.notebook) == directory / "nb.fork-1.ipynb"
    assert {"data", "k", "scaled", "total", "extra"} <= set(made.values)
    child = Nb(engine, directory, mode)
    child.path, child.kernel_id = Path(made.notebook), made.kernel_id
    try:
        await engine.execute(_KERNEL_VALUES, kernel_id=child.kernel_id)
        # the fork holds the parent's variables, and its plan starts where the parent's is
        assert await child.values("k", "total", "extra") == ["2", "3998000", "5"]
        assert (await child.plan()).stale == []
        status = engine.kernel_record(engine.kernels[child.kernel_id]).checkpoints or ""
        assert f"fork of {parent.kernel_id}" in status

        # the fork tries k = 3; the parent is unaffected (values, notebook, plan)
        child.edit("scale", K3)
        res = await execute(child)
        assert {r.cell_id for r in res.batch.results} == {"scale", "agg"}
        assert await child.values("k", "total") == ["3", "5997000"]
        assert await parent.values("k", "total", "extra") == ["2", "3998000", "5"]
        assert parent.path.read_bytes() == original
        assert (await parent.plan()).stale == []

        diff = await layer(engine).diff_fork(kernel_id=child.kernel_id)
        assert [(c["cell_id"], c["change"]) for c in diff.cells] == [("scale", "edited")]
        assert {n["name"]: n["change"] for n in diff.names} == {
            "k": "different",
            "scaled": "different",
            "total": "different",
        }

        # the winning edit applied to the parent loads the runs the fork made
        await flush(child)
        parent.edit("scale", K3)
        assert memo_cells(await parent.plan()) == {"scale", "agg"}
        res = await execute(parent)
        assert loaded(res) == {"scale", "agg"}
        await parent.assert_fresh("k", "total", "scaled[:3]")
    finally:
        await child.close()
        await parent.close()
