"""An object a module owns, changed in place by a cell that is then deleted, in both modes.

Found by the field test (``python -m benchmarks.field``, statsmodels' ``wls.ipynb``: a cell
inserted after ``from statsmodels.iolib.table import default_txt_fmt`` ran
``default_txt_fmt['field_edit'] = 1``, then was deleted). Re-running the import cell hands back
the same module-owned dict, so no cell can rebuild it: the plan re-runs the import as a restore,
then says nothing is stale while the kernel holds a value no fresh run has. Until a plan can say
so (or a restore that cannot restore is reported), this is a known silent wrong answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    engine,
    kinds,
    make_nb,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

IMPORT = ("imp", "from json.decoder import BACKSLASH\nn = len(BACKSLASH)")
READER = ("reader", "m = len(BACKSLASH)")


@pytest.mark.xfail(
    strict=True,
    reason="a deleted cell's in-place change of a module-owned object is not undone by "
    "re-running its import, and the plan does not say so",
)
@pytest.mark.parametrize("mode", MODES)
async def test_deleted_change_to_a_module_owned_object_is_undone_or_reported(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(mode, [IMPORT, READER])
    await nb.start()
    nb.insert(1, "mutate", "BACKSLASH['x'] = 1")
    res = await nb.execute_plan()
    assert res.ok
    nb.delete("mutate")
    res = await nb.execute_plan()
    assert res.ok
    after = await nb.plan()
    # either the kernel holds what a fresh run gives, or a plan says it cannot
    if not (kinds(after) or after.blocked or res.notices or after.notices):
        await nb.assert_fresh("'x' in BACKSLASH", "n", "m")
