"""Restores that keep aliases whole, on real kernels in both dataflow modes: a value that an
inserted cell mutates in place is rebuilt only when the kernel's value is not what a fresh run
has there; when it must be rebuilt, the cells that took a reference to the old object (a
container, a fitted model holding its frame) re-run too (helpers from
test_staleness_acceptance)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    engine,
    execute_exactly,
    kinds,
    make_nb,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]


@pytest.mark.parametrize("mode", MODES)
async def test_an_inserted_mutation_of_an_untouched_value_rebuilds_nothing(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("rows", "rows = [1, 2, 3]"),
            ("holder", "holder = {'data': rows}"),
            ("n", "n = len(rows)"),
        ],
    )
    await nb.start()
    nb.insert(2, "mut", "rows.append(4)")
    plan = await nb.plan()
    # nothing changed rows since its cell made it: the kernel holds what a fresh run has there
    assert kinds(plan) == {"mut": {"never_run"}, "n": {"upstream"}}
    await execute_exactly(nb, ["mut", "n"])
    assert await nb.values("holder", "n") == ["{'data': [1, 2, 3, 4]}", "4"]
    await nb.assert_fresh("rows", "holder", "n")


@pytest.mark.parametrize("mode", MODES)
async def test_a_rebuild_re_runs_the_cells_holding_the_old_object(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("rows", "rows = [1, 2, 3]"),
            ("holder", "holder = {'data': rows}"),
            ("keep", "def first():\n    return rows[0]"),
            ("n", "n = len(rows)"),
            ("later", "rows.append(5)"),
        ],
    )
    await nb.start()
    # the kernel's rows holds the later cell's 5: a fresh run has [1, 2, 3] where the inserted
    # cell appends, so rows is rebuilt, and holder must hold the new list
    nb.insert(2, "mut", "rows.append(4)")
    res = await nb.execute_plan()
    assert res.ok
    after = await nb.plan()
    assert kinds(after) == {}
    await nb.assert_fresh("rows", "holder", "n", "holder['data'] is rows", "first()")


@pytest.mark.parametrize("mode", MODES)
async def test_an_edited_mutation_rebuilds_the_value_and_its_holders(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("rows", "rows = [1, 2, 3]"),
            ("holder", "holder = {'data': rows}\npair = (rows, 0)"),
            ("mut", "rows.append(4)"),
            ("n", "n = len(rows)"),
        ],
    )
    await nb.start()
    nb.edit("mut", "rows.append(5)")
    plan = await nb.plan()
    assert kinds(plan) == {
        "rows": {"restores"},
        "holder": {"restores"},
        "mut": {"source_changed"},
        "n": {"upstream"},
    }
    await execute_exactly(nb, ["rows", "holder", "mut", "n"])
    await nb.assert_fresh("rows", "holder", "pair", "n", "holder['data'] is rows")


@pytest.mark.parametrize("rows", [40, 20_000])
@pytest.mark.parametrize("mode", MODES)
async def test_models_holding_a_frame_see_an_inserted_in_place_drop(
    make_nb: Any, mode: str, rows: int
) -> None:
    # 20,000 rows: the frame is fingerprinted in part (sampled), so nothing proves it unchanged
    # and it is rebuilt; the fitted models holding it re-run to take the new frame
    nb = make_nb(
        mode,
        [
            (
                "imp",
                "import numpy as np\nimport pandas as pd\nimport statsmodels.formula.api as smf",
            ),
            (
                "dc",
                "rng = np.random.default_rng(0)\n"
                f"dc = pd.DataFrame({{'x': rng.normal(size={rows})}})\n"
                f"dc['y'] = (dc['x'] + rng.normal(size={rows}) > 0).astype(float)",
            ),
            ("fit", "res_f = smf.glm('y ~ x', data=dc).fit()"),
            ("fit2", "res_f2 = smf.glm('y ~ x + I(x**2)', data=dc).fit()"),
            ("rep", "nobs = int(res_f.nobs)"),
        ],
    )
    await nb.start()
    nb.insert(4, "drop", "dc.drop(dc.index[-1], inplace=True)")
    res = await nb.execute_plan()
    assert res.ok
    assert kinds(await nb.plan()) == {}
    exprs = (
        "len(dc)",
        "len(res_f.model.data.frame)",
        "len(res_f2.model.data.frame)",
        "res_f.model.data.frame is dc",
        "nobs",
        "round(float(res_f.params['x']), 8)",
    )
    await nb.assert_fresh(*exprs)
