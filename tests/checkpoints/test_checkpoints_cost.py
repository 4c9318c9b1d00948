"""Store or recompute on real kernels: cheap cells are not checkpointed and re-run on restore,
expensive ones are restored, and the kernel equals a fresh run of the notebook on disk.

Default settings (``checkpoint_min_cell_s`` = 1 s). The fresh-run oracle is the staleness
acceptance suite's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ipykeep.api.checkpoints import RestoreReport
from ipykeep.checkpoints.service import CheckpointService
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.kernel.inkernel import CHECKPOINT
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.state import staleness_of
from tests.checkpoints.kernel_loss import sigkill
from tests.staleness.test_staleness_acceptance import Nb, kinds

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

CELLS = [
    # cheap, read by an expensive cell that mutates its value
    ("prep", "import time\nbase = list(range(10))"),
    # expensive: checkpointed (base included: it mutated it)
    ("slow", "time.sleep(1.2)\nbase.append(99)\ntotal = sum(base)"),
    # fast and reads a checkpointed value: cheap, re-run after the values are loaded
    ("after", "n = total + len(base)"),
    # cheap and independent
    ("label", "label = 'x' * 3"),
    # two cheap cells whose chain is not cheap: the second is checkpointed
    ("half1", "time.sleep(0.6)\nh = [1, 2]"),
    ("half2", "time.sleep(0.6)\nh2 = h + [3]"),
]
EXPRS = ("base", "total", "n", "label", "h", "h2")


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    root = tmp_path_factory.mktemp("checkpoint-cost")
    (root / ".git").mkdir()
    eng = compose(ProjectPaths(root), Config(idle_timeout=0, dataflow="static")).engine
    yield eng
    await eng.shutdown()


def _notebook(engine: Engine, name: str) -> Nb:
    """A static-mode notebook in its own directory of the module's project."""
    directory = engine.paths.root / name
    directory.mkdir()
    return Nb(engine, directory, "static")


def service(engine: Engine) -> CheckpointService:
    return next(o for o in engine.observers if isinstance(o, CheckpointService))


async def test_cheap_upstream_reruns_expensive_downstream_restores(engine: Engine) -> None:
    nb = _notebook(engine, "chain")
    nb.write_cells(CELLS)
    await nb.start()
    session = engine.kernels[nb.kernel_id]
    assert await session.process.eval_silent(CHECKPOINT.call("flush", 30), timeout=40)
    listing = await service(engine).checkpoints(kernel_id=nb.kernel_id)
    by_id = {c.cell_id: c for c in listing.cells}
    assert {c for c, info in by_id.items() if info.cheap} == {"prep", "after", "label", "half1"}
    assert by_id["prep"].bytes == 0 and by_id["prep"].values == []
    assert set(by_id["slow"].values) >= {"base", "total"} and by_id["slow"].bytes > 0
    assert by_id["half2"].recompute_s is not None and by_id["half2"].recompute_s >= 1.0
    status = engine.kernel_record(session).checkpoints or ""
    assert (
        "2 cell(s) checkpointed" in status
        and "re-run on restore (quicker than loading): cells 0, 2, 3, 4" in status
    ), status

    # twice: the cheap cells' re-runs keep their place in the run order, so a second loss
    # restores the same way
    for _ in range(2):
        await sigkill(session)
        before = len(session.executions)
        rec = await engine.create_kernel(notebook=str(nb.path))  # `ipykeep start` again
        assert rec.kernel_id == nb.kernel_id and rec.state == "idle"
        report = service(engine).state(session).last_restore
        assert report is not None
        assert [c["cell_id"] for c in report.recomputed] == ["prep", "after", "label", "half1"]
        assert {c["cell_id"] for c in report.restored} == {"slow", "half2"}
        assert report.rerun == []
        ran = [ex.cell_id for ex in list(session.executions.values())[before:] if ex.kind == "cell"]
        # only the cheap cells ran, the reader of the loaded value after the loads; the 1.2 s
        # cell did not
        assert ran == ["prep", "label", "half1", "after"]
        assert kinds(await nb.plan()) == {}
        await nb.scratch(_values_helper())
        await nb.assert_fresh(*EXPRS)  # base holds the 99 the restored cell appended
        assert await session.process.eval_silent(CHECKPOINT.call("flush", 30), timeout=40)
    await nb.close()


def _values_helper() -> str:
    from tests.staleness.test_staleness_acceptance import _KERNEL_VALUES

    return _KERNEL_VALUES


async def test_a_slow_numpy_import_cell_is_cheap_and_so_are_its_fast_readers(
    engine: Engine,
) -> None:
    nb = _notebook(engine, "imports")
    # the sleeps stand for a slow import (pandas on a loaded machine): over checkpoint_min_cell_s
    nb.write_cells(
        [
            ("imp", "import time\nimport numpy as np\ntime.sleep(1.1)"),
            ("use", "x = np.arange(3)"),
            # an import cell that also seeds numpy's global generator writes it, and its re-run
            # recreates that state as a fresh run does
            ("seeded", "import numpy as np\nnp.random.seed(0)\ntime.sleep(1.1)"),
        ]
    )
    await nb.start()
    session = engine.kernels[nb.kernel_id]
    # importing numpy alone is no write of its global generator; seeding it is
    assert staleness_of(session).tracker.last_writers().get("<numpy.random>") == "seeded"
    listing = await service(engine).checkpoints(kernel_id=nb.kernel_id)
    by_id = {c.cell_id: c for c in listing.cells}
    assert by_id["imp"].cheap and by_id["use"].cheap and by_id["seeded"].cheap, by_id
    assert by_id["use"].bytes == 0  # not pickled: it re-runs after the import on restore
    await nb.close()


async def _lose_and_restart(engine: Engine, nb: Nb) -> tuple[RestoreReport, list[str]]:
    """SIGKILL the notebook's kernel, start it again: the restore report and the cells run."""
    session = engine.kernels[nb.kernel_id]
    assert await session.process.eval_silent(CHECKPOINT.call("flush", 30), timeout=40)
    await sigkill(session)
    before = len(session.executions)
    rec = await engine.create_kernel(notebook=str(nb.path))
    assert rec.kernel_id == nb.kernel_id and rec.state == "idle"
    report = service(engine).state(session).last_restore
    assert report is not None
    ran = [ex.cell_id for ex in list(session.executions.values())[before:] if ex.kind == "cell"]
    return report, ran


async def test_a_chain_through_saved_values_saves_only_the_slow_cells(engine: Engine) -> None:
    """Fast cells below a saved one are cheap (their chain starts at the saved value): restore
    loads the slow cells' values and re-runs the fast ones after them, in the order they ran, so
    a loaded cell that read a re-run cell's value is not stale."""
    nb = _notebook(engine, "through-saved")
    nb.write_cells(
        [
            ("a", "import time\ntime.sleep(1.1)\nx = [1, 2]"),
            ("b", "y = x + [3]"),
            ("c", "time.sleep(1.1)\nz = y + [4]"),
            ("d", "w = len(z) + len(y)"),
        ]
    )
    await nb.start()
    listing = await service(engine).checkpoints(kernel_id=nb.kernel_id)
    assert {c.cell_id for c in listing.cells if c.cheap} == {"b", "d"}
    for _ in range(2):  # the re-runs keep their place in the run order: a second loss is alike
        report, ran = await _lose_and_restart(engine, nb)
        assert [c["cell_id"] for c in report.recomputed] == ["b", "d"]
        assert {c["cell_id"] for c in report.restored} == {"a", "c"}
        assert report.rerun == []
        assert ran == ["b", "d"]  # the slow cells were loaded, not run
        assert kinds(await nb.plan()) == {}
        await nb.scratch(_values_helper())
        await nb.assert_fresh("x", "y", "z", "w")
    await nb.close()


async def test_a_fast_reader_whose_input_a_later_cell_rebound_is_not_rerun_on_restore(
    engine: Engine,
) -> None:
    """``b`` read the ``x`` that ``a`` saved, but a later cheap cell rebinds ``x``: re-run after
    the loads it would read the wrong ``x``, so it is not restored, and the plan brings the
    kernel to a fresh run's values."""
    nb = _notebook(engine, "rebound")
    nb.write_cells(
        [
            ("a", "import time\ntime.sleep(1.1)\nx = [1, 2]"),
            ("b", "y = x + [3]"),
            ("e", "x = [0]"),
        ]
    )
    await nb.start()
    report, ran = await _lose_and_restart(engine, nb)
    assert "b" in report.not_restorable
    assert "b" in {c["cell_id"] for c in report.rerun}
    # e re-ran before the loads; then the plan: b reads the x that a made, so a re-runs first
    # and e after it again
    assert ran == ["e", "a", "b", "e"]
    res = await nb.execute_plan()
    assert res.ok, res
    assert kinds(await nb.plan()) == {}
    await nb.scratch(_values_helper())
    await nb.assert_fresh("x", "y")
    await nb.close()
