"""Staleness on real kernels for state cells share without naming it, in both dataflow modes.

Process-wide settings (numpy print options, pandas options, matplotlib's style) are inputs and
outputs the runtime evidence observes; a read that fills a cache (``repr(fig)``, statsmodels'
``res.HC0_se``, a ``cached_property``) is no change, while a real change still is; a shell
command's text is never a file the cell read. Each test asserts the plan, the cells executed,
equality with a fresh top-to-bottom run in a separate interpreter and an empty plan afterwards
(helpers from test_staleness_acceptance).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    engine,
    execute_exactly,
    kinds,
    make_nb,
    reason,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

AGG = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt"


# ----------------------------------------------------------------------------- settings


@pytest.mark.parametrize("mode", MODES)
async def test_numpy_print_options_are_an_input_of_the_cell_that_formats(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np"),
            ("opts", "np.set_printoptions(precision=2)"),
            ("w", "weights = np.array([0.123456, 2.5])"),
            ("rep", 'report = f"weights: {weights}"'),
            ("tot", "total = float(weights.sum())"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    assert await nb.values("report") == ["'weights: [0.12 2.5 ]'"]
    nb.edit("opts", "np.set_printoptions(precision=4)")
    plan = await nb.plan()
    # the array and the sum do not format anything: only the f-string reads the options
    assert kinds(plan) == {"opts": {"source_changed"}, "rep": {"upstream"}}
    message = reason(plan, "rep", "upstream")["message"]
    assert "numpy print options" in message and "cell 1" in message, message
    await execute_exactly(nb, ["opts", "rep"])
    await nb.assert_fresh("report", "total")
    assert await nb.values("report") == ["'weights: [0.1235 2.5   ]'"]


@pytest.mark.parametrize("mode", MODES)
async def test_pandas_options_and_matplotlib_style(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", f"import pandas as pd\n{AGG}"),
            ("popt", 'pd.set_option("display.precision", 2)'),
            ("style", 'plt.style.use("ggplot")'),
            ("df", 'df = pd.DataFrame({"x": [1.234567, 2.5]})'),
            ("text", "text = df.to_string()"),
            ("fig", "fig, ax = plt.subplots()\nline, = ax.plot([1, 2])"),
            ("look", "look = (line.get_linewidth(), ax.get_facecolor())"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    nb.edit("popt", 'pd.set_option("display.precision", 4)')
    plan = await nb.plan()
    assert kinds(plan) == {"popt": {"source_changed"}, "text": {"upstream"}}
    assert "pandas display options" in reason(plan, "text", "upstream")["message"]
    await execute_exactly(nb, ["popt", "text"])
    await nb.assert_fresh("text", "look")

    nb.edit("style", 'plt.style.use("classic")')
    plan = await nb.plan()
    assert set(kinds(plan)) == {"style", "fig"} | ({"look"} if "look" in kinds(plan) else set())
    assert "matplotlib rcParams" in reason(plan, "fig", "upstream")["message"]
    res = await nb.execute_plan()
    assert res.ok
    assert kinds(await nb.plan()) == {}
    await nb.assert_fresh("text", "look", "line.get_color()")


# ----------------------------------------------------------------------------- cache fills


@pytest.mark.parametrize("mode", MODES)
async def test_reading_a_figure_is_no_change_of_it(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", AGG),
            ("p1", "fig1, ax1 = plt.subplots()\nax1.plot([1, 2, 3])"),
            ("p2", "fig2, ax2 = plt.subplots()\nax2.hist([1, 2, 2, 3])"),
            ("n", "n = len(ax1.lines) + len(ax2.patches)"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    # scratch code that only reads the figures (their repr sizes the bounding boxes)
    await nb.scratch("repr(fig1); repr(fig2); print(fig1, ax2)")
    assert kinds(await nb.plan()) == {}
    await nb.scratch("fig1.canvas.draw()")  # drawing fills renderer caches, changes nothing
    assert kinds(await nb.plan()) == {}

    # sound: a real change of a figure still makes its producer restore it
    await nb.scratch("ax1.set_title('changed')")
    plan = await nb.plan()
    assert "restores" in kinds(plan)["p1"], kinds(plan)
    assert "p2" not in kinds(plan)
    res = await nb.execute_plan()
    assert res.ok
    assert kinds(await nb.plan()) == {}
    await nb.assert_fresh("ax1.get_title()", "n", "len(ax1.lines)")


@pytest.mark.parametrize("mode", MODES)
async def test_declared_caches_and_attributes_added_by_a_read(make_nb: Any, mode: str) -> None:
    pytest.importorskip("statsmodels")
    nb = make_nb(
        mode,
        [
            ("imp", "import functools\nimport numpy as np\nimport statsmodels.api as sm"),
            (
                "fit",
                "X = sm.add_constant(np.arange(20.0))\n"
                "y = 2 * np.arange(20.0) + np.sin(np.arange(20.0))\n"
                "res = sm.OLS(y, X).fit()",
            ),
            ("se", "se = [round(v, 6) for v in res.HC0_se]"),
            ("params", "params = [round(v, 6) for v in res.params]"),
            (
                "cls",
                "class Box:\n"
                "    def __init__(self, base):\n"
                "        self.base = base\n"
                "    @functools.cached_property\n"
                "    def square(self):\n"
                "        return self.base ** 2",
            ),
            ("box", "box = Box(3)"),
            ("sq", "sq = box.square"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    # reading res.HC0_se sets res.het_scale and fills its cache: the reader's edit re-runs it
    # alone, not the fit and the fit's other readers
    nb.edit("se", "se = [round(float(v), 6) for v in res.HC0_se]")
    assert kinds(await nb.plan()) == {"se": {"source_changed"}}
    await execute_exactly(nb, ["se"])
    await nb.scratch("res.HC0_se; res.bse; print(res.rsquared)")
    assert kinds(await nb.plan()) == {}
    await nb.scratch("box.square")
    assert kinds(await nb.plan()) == {}

    # sound: changing existing state, or adding an attribute by assignment, still counts
    await nb.scratch("box.base = 10")
    assert "restores" in kinds(await nb.plan())["box"]
    await nb.execute_plan()
    assert kinds(await nb.plan()) == {}
    await nb.scratch("res.note = 'x'")
    assert "restores" in kinds(await nb.plan())["fit"]
    res = await nb.execute_plan()
    assert res.ok
    assert kinds(await nb.plan()) == {}
    await nb.assert_fresh("se", "params", "sq", "box.base", "hasattr(res, 'note')")


# ----------------------------------------------------------------------------- shell text


@pytest.mark.parametrize("mode", MODES)
async def test_a_shell_command_is_no_path_the_cell_read(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("c1", "__import__('os').system('echo c1 >> run.log')"),
            ("c2", "!echo c2 >> run.log"),
            ("c3", "__import__('os').system('echo c3 >> run.log')"),
            ("n", "n = 1"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    nb.edit("c1", "__import__('os').system('echo c1-edited >> run.log')")
    plan = await nb.plan()
    # the other shell cells read no file: nothing is "rewritten" under them
    assert kinds(plan) == {"c1": {"source_changed"}}, plan.stale
    assert not any("echo" in r["message"] for e in plan.stale for r in e["reasons"])
    await execute_exactly(nb, ["c1"])
    await nb.assert_fresh("n")
