"""Restore on notebooks we did not write: statsmodels' ``ols.ipynb`` and ``glm.ipynb``
(BSD-3-Clause, under tests/fixtures/thirdparty) with every cell checkpointed, the kernel
SIGKILLed, then ``start`` again. The restored kernel must hold what a fresh top-to-bottom run
in a separate interpreter gives (every comparable global) and plan nothing; after an edit, the
plan must be the one a kernel that was never lost makes, run exactly the same cells (skipping
the same ones at run time) and leave the kernel equal to a fresh run. Both dataflow modes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ipykeep.checkpoints.service import CheckpointService
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.kernel.inkernel import CHECKPOINT
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.checkpoints.kernel_loss import sigkill
from tests.staleness.test_staleness_acceptance import MODES, kinds
from tests.staleness.test_staleness_thirdparty import (
    FIXTURE,
    GLM,
    GLM_UNCOMPARABLE,
    UNCOMPARABLE,
    assert_matches_fresh_run,
    copy_thirdparty,
    edit_beta_and_run,
    edit_glm_fit_and_run,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    root = tmp_path_factory.mktemp("checkpoints_thirdparty")
    (root / ".git").mkdir()
    # every cell saved (the notebook's cells are all fast): the restore loads values, not re-runs
    eng = compose(ProjectPaths(root), Config(idle_timeout=0, checkpoint_min_cell_s=0)).engine
    yield eng
    await eng.shutdown()


def _layer(engine: Engine) -> CheckpointService:
    return next(o for o in engine.observers if isinstance(o, CheckpointService))


CASES = [pytest.param(fx, mode, id=f"{fx.stem}-{mode}") for fx in (FIXTURE, GLM) for mode in MODES]
#: per notebook: the names a fresh-run comparison cannot cover, and an edit whose plan runs
#: exactly what a kernel that was never lost runs (asserted inside)
EDITS = {FIXTURE: (UNCOMPARABLE, edit_beta_and_run), GLM: (GLM_UNCOMPARABLE, edit_glm_fit_and_run)}


@pytest.mark.parametrize(("fixture", "mode"), CASES)
async def test_statsmodels_notebook_restored_after_a_kill_equals_a_fresh_run(
    engine: Engine, fixture: Any, mode: str, tmp_path_factory: Any
) -> None:
    uncomparable, edit_and_run = EDITS[fixture]
    nb = copy_thirdparty(engine, tmp_path_factory, mode, fixture)
    await nb.start()
    try:
        session = engine.kernels[nb.kernel_id]
        assert await session.process.eval_silent(CHECKPOINT.call("flush", 60), timeout=70)
        await sigkill(session)
        rec = await engine.create_kernel(notebook=str(nb.path))  # `ipykeep start` again
        assert rec.kernel_id == nb.kernel_id
        report = _layer(engine).state(session).last_restore
        assert report is not None and report.restored, report
        restored = {c["cell_id"] for c in report.restored}
        rerun = {e["cell_id"] for e in report.rerun}
        # only what cannot be saved re-runs (the plots' figures and axes, the influence plot)
        assert len(restored) > len(rerun), (restored, rerun, report.not_restorable)
        assert kinds(await nb.plan()) == {}
        await assert_matches_fresh_run(nb, uncomparable)

        # an edit after the restore: exactly what test_staleness_thirdparty's live kernel runs.
        # In ols.ipynb the cells drawing from numpy's global generator are skipped at run time
        # because the generator states the restored runs recorded compare equal to the ones
        # this process's re-runs reach, and (ipyflow) because the tracer's evidence is replayed
        await edit_and_run(nb)
        await assert_matches_fresh_run(nb, uncomparable)
    finally:
        await nb.close()
