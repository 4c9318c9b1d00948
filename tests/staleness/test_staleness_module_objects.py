"""An object a module owns, changed in place by a cell that is then deleted, in both modes.

Found by the field test (``python -m benchmarks.field``, statsmodels' ``wls.ipynb``: a cell
inserted after ``from statsmodels.iolib.table import default_txt_fmt`` ran
``default_txt_fmt['field_edit'] = 1``, then was deleted). Re-running the import cell hands back
the same module-owned dict, so no cell can rebuild it: the plan re-runs the import as a restore,
then would say nothing is stale while the kernel holds a value no fresh run has. The plan
reports the import with the blocked cells instead (``needs_fresh``): only a fresh run undoes it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    _KERNEL_VALUES,
    MODES,
    blocked_kinds,
    engine,
    kinds,
    make_nb,
    reason,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

IMPORT = ("imp", "from json.decoder import BACKSLASH\nn = len(BACKSLASH)")
READER = ("reader", "m = len(BACKSLASH)")


@pytest.mark.parametrize("mode", MODES)
async def test_deleted_change_to_a_module_owned_object_needs_a_fresh_run(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(mode, [IMPORT, READER])
    await nb.start()
    nb.insert(1, "mutate", "BACKSLASH['x'] = 1")
    res = await nb.execute_plan()
    assert res.ok
    await nb.assert_fresh("'x' in BACKSLASH", "n", "m")  # the change is in the notebook
    nb.delete("mutate")
    # re-running the import would give back the changed dict and say nothing is stale: the
    # plan says a fresh run is needed instead, and runs nothing it cannot make right
    plan = await nb.plan()
    assert kinds(plan) == {}
    # the reader read the changed object: its value is made right by the fresh run too
    assert blocked_kinds(plan) == {"imp": {"restores"}, "reader": {"state_changed"}}
    why = reason(plan, "imp", "restores")
    assert why["needs_fresh"] is True and "run-stale --execute --fresh" in why["message"]
    res = await nb.execute_plan()
    assert res.batch is None
    assert set(blocked_kinds(await nb.plan())) == {"imp", "reader"}  # until the fresh run
    fresh = await nb.layer.run_stale(kernel_id=nb.kernel_id, execute=True, fresh=True)
    assert fresh.ok
    after = await nb.plan()
    assert kinds(after) == {} and after.blocked == []
    await nb.scratch(_KERNEL_VALUES)  # the helper the value checks call, gone with the restart
    await nb.assert_fresh("'x' in BACKSLASH", "n", "m")
    assert await nb.values("'x' in BACKSLASH") == ["False"]


@pytest.mark.parametrize("mode", MODES)
async def test_rewritten_change_to_a_module_owned_object_needs_a_fresh_run(
    make_nb: Any, mode: str
) -> None:
    """The cell that changed the module's object is edited to change it otherwise: re-running
    it on the object its old text already changed would keep both changes."""
    nb = make_nb(mode, [IMPORT, ("mutate", "BACKSLASH['x'] = 1"), READER])
    await nb.start()
    nb.edit("mutate", "BACKSLASH['y'] = 2")
    plan = await nb.plan()
    # re-running the edited cell on the dict its old text changed would keep both changes
    assert kinds(plan) == {}
    assert set(blocked_kinds(plan)) == {"imp", "mutate", "reader"}, plan.blocked
    assert reason(plan, "imp", "restores")["needs_fresh"] is True
    res = await nb.execute_plan()
    assert res.batch is None
    fresh = await nb.layer.run_stale(kernel_id=nb.kernel_id, execute=True, fresh=True)
    assert fresh.ok
    await nb.scratch(_KERNEL_VALUES)
    await nb.assert_fresh("'x' in BACKSLASH", "'y' in BACKSLASH", "n", "m")
