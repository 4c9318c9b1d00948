"""Plans that settle, on real kernels in both dataflow modes: after executing a plan the next
plan is empty (or lists only blocked cells a fresh run also fails), and the values equal a fresh
top-to-bottom run in a separate interpreter (helpers from test_staleness_acceptance).

The classes: an in-place edit in a notebook that rebinds the name later; a re-run whose value
is not reproducible (``time.time()``, an unseeded generator) with its readers; a print-only
edit (its readers are conditional); a never-run cell reading or mutating a name whose producer
was deleted; switching the dataflow mode between sessions of one notebook.
"""

from __future__ import annotations

from typing import Any

import pytest

from ipykeep.engine.engine import Engine
from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    Nb,
    blocked_kinds,
    engine,
    execute_exactly,
    kinds,
    make_nb,
    ran,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]


def conditional(res: Any) -> dict[str, str]:
    """cell id -> condition, for the conditional cells of a plan."""
    return {e["cell_id"]: e["condition"] for e in res.conditional}


# ------------------------------------------------------------ 1. in-place edit, rebound later


@pytest.mark.parametrize("mode", MODES)
async def test_in_place_edit_in_a_notebook_that_rebinds_the_name_settles(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np"),
            ("a", "a = np.arange(5)"),
            ("s1", "s1 = int(a.sum())"),
            ("s2", "s2 = int(a.sum())"),
            ("a2", "a = np.arange(5)\ns3 = int(a.sum())"),
        ],
    )
    await nb.start()
    nb.insert(3, "mut", "a.flat[0] = 99")
    plan = await nb.plan()
    assert kinds(plan) == {
        "a": {"restores"},
        "mut": {"never_run"},
        "s2": {"upstream"},
        "a2": {"restores"},
    }
    await execute_exactly(nb, ["a", "mut", "s2", "a2"])
    assert await nb.values("s1", "s2", "s3") == ["10", "109", "10"]
    await nb.assert_fresh("a", "s1", "s2", "s3")

    # the tutorial shape: the same in-place edit again, the later definer rebinding the name
    nb.edit("mut", "a.flat[0] = 98")
    await execute_exactly(nb, ["a", "mut", "s2", "a2"])
    await nb.assert_fresh("a", "s1", "s2", "s3")


# ------------------------------------------------------------ 2. non-reproducible re-runs


@pytest.mark.parametrize("mode", MODES)
async def test_a_restore_that_redraws_time_brings_its_readers_along(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import time"),
            ("x", "x = [1, 2]"),
            ("s", "s = sum(x)"),
            ("x2", "x = [5]; stamp = time.time()"),
            ("z", "z = stamp * 2"),
        ],
    )
    await nb.start()
    nb.edit("s", "s = sum(x) + 1")
    plan = await nb.plan()
    assert kinds(plan) == {"x": {"restores"}, "s": {"source_changed"}, "x2": {"restores"}}
    # x2 re-ran to restore x, and its stamp came out new: the reader ran in the same execute
    await execute_exactly(nb, ["x", "s", "x2", "z"])
    assert await nb.values("z == stamp * 2") == ["True"]
    await nb.assert_fresh("x", "s", "z == stamp * 2")


@pytest.mark.parametrize("mode", MODES)
async def test_an_unseeded_generator_is_not_rebuilt_and_the_reader_runs(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np"),
            ("x", "x = [1, 2]"),
            ("s", "s = sum(x)"),
            ("x2", "x = [5]; stamp = np.random.random()"),
            ("z", "z = stamp * 2"),
        ],
    )
    await nb.start()
    nb.edit("s", "s = sum(x) + 1")
    plan = await nb.plan()
    # re-importing numpy cannot reset the global generator: not planned, and the drawing
    # cell's reason says so; its reader comes along, as the draw will differ
    assert kinds(plan) == {
        "x": {"restores"},
        "s": {"source_changed"},
        "x2": {"restores", "state_changed"},
        "z": {"upstream"},
    }
    x2 = next(e for e in plan.stale if e["cell_id"] == "x2")
    assert any("cannot rebuild it" in r["message"] for r in x2["reasons"])
    await execute_exactly(nb, ["x", "s", "x2", "z"])
    await nb.assert_fresh("x", "s", "z == stamp * 2")


@pytest.mark.parametrize(("first", "second"), [("ipyflow", "static"), ("static", "ipyflow")])
async def test_switching_the_dataflow_mode_is_a_clean_start(
    make_nb: Any, engine: Engine, first: str, second: str
) -> None:
    cells = [
        ("imp", "import numpy as np"),
        ("a", "a = np.arange(5)"),
        ("s1", "s1 = int(a.sum())"),
        ("mut", "a.flat[0] = 99"),
        ("s2", "s2 = int(a.sum())"),
        ("a2", "a = np.arange(5)\ns3 = int(a.sum())"),
        ("rng", "rng = np.random.default_rng(0)\nd = rng.normal(size=3)"),
        ("e", "e = d * 2"),
    ]
    nb = make_nb(first, cells)
    await nb.start()
    assert kinds(await nb.plan()) == {}
    await nb.close()
    later = Nb(engine, nb.dir, second)
    await later.start()
    try:
        # the other mode's checkpoints are not replayed: warm-up runs every cell
        warm = engine.session(later.kernel_id).warm
        assert warm is not None and (warm.done, warm.total) == (8, 8)
        plan = await later.plan()
        assert kinds(plan) == {} and plan.blocked == [] and plan.conditional == []
        await later.assert_fresh("s1", "s2", "s3", "d", "e")
        later.edit("s2", "s2 = int(a.sum()) + 1")
        await execute_exactly(later, ["a", "mut", "s2", "a2"])
        await later.assert_fresh("s1", "s2", "s3", "d", "e")
    finally:
        await later.close()
        nb.kernel_id = ""


# ------------------------------------------------------------ 5. print-only edits


@pytest.mark.parametrize("mode", MODES)
async def test_print_only_edit_reports_the_reader_as_conditional(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("x", "x = [1, 2, 3]"),
            ("t", "total = sum(x)\nprint('total', total)"),
            ("r", "r = total * 2"),
        ],
    )
    await nb.start()
    nb.edit("t", "total = sum(x)\nprint(f'the total is {total}')")
    plan = await nb.plan()
    assert kinds(plan) == {"t": {"source_changed"}}
    assert conditional(plan) == {"r": "re-runs only if total changes"}
    # the plan's cost counts what will run; the conditional cell's apart
    assert "conditional_s" in plan.cost
    res = await execute_exactly(nb, ["t"])
    assert [s.cell_id for s in res.batch.skipped] == ["r"]
    await nb.assert_fresh("total", "r")

    # an edit of what the cell computes: the reader will run
    nb.edit("t", "total = sum(x) + 1\nprint(f'the total is {total}')")
    plan = await nb.plan()
    assert kinds(plan) == {"t": {"source_changed"}, "r": {"upstream"}}
    assert conditional(plan) == {}
    await execute_exactly(nb, ["t", "r"])
    await nb.assert_fresh("total", "r")


# ------------------------------------------------------------ 6. deleted producers


@pytest.mark.parametrize("mode", MODES)
async def test_never_run_cells_on_a_deleted_producer_are_blocked(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np"),
            ("b", "b = np.arange(3)"),
            ("keep", "k = 1"),
            ("r", "c = int(b.sum())"),
        ],
    )
    await nb.start()
    nb.delete("b")
    nb.insert(2, "m", "b.flat[0] = 99")
    nb.insert(3, "rd", "w = int(b[0])")
    plan = await nb.plan()
    assert kinds(plan) == {} and conditional(plan) == {}
    blocked = blocked_kinds(plan)
    assert list(blocked) == ["m", "rd", "r"]
    assert all("missing_producer" in k for k in blocked.values()), blocked
    res = await nb.execute_plan()
    assert res.batch is None  # nothing to run
    after = await nb.plan()
    assert kinds(after) == {} and [e["cell_id"] for e in after.blocked] == ["m", "rd", "r"]
    # a fresh run fails at the first blocked cell too: what it defines before it, the kernel
    # holds as well
    assert await nb.values("k") == await nb.fresh_values("k") == ["1"]
    assert await nb.fresh_values("w") == ["<undefined>"]
    assert await nb.values("w") == ["<undefined>"]
