"""Memoized cell runs on real kernels: an edit reverted loads the cells' stored runs instead of
re-running them, with values equal to a fresh run in a separate interpreter, in both dataflow
modes; what the key cannot cover is never loaded.

One in-process engine for the module; each test has its own notebook directory. The oracle is
the staleness acceptance suite's fresh run of the notebook on disk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ipykeep.engine.engine import Engine
from ipykeep.project.notebook import read_notebook
from tests.checkpoints.kit import composed_engine, flush, layer, started
from tests.staleness.test_staleness_acceptance import Nb

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

MODES = ["static", "ipyflow"]

REVERT = [
    ("load", "import time\ntime.sleep(0.6)\ndata = list(range(2000))"),
    ("scale", "k = 2\nscaled = [x * k for x in data]\ntime.sleep(0.3)"),
    ("agg", "time.sleep(0.6)\ntotal = sum(scaled)\nprint('total', total)"),
]


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    # every cell saved (the 3-cell revert loads the cheap one too)
    async with composed_engine(tmp_path_factory, "memo") as eng:
        yield eng


async def make(engine: Engine, name: str, mode: str, cells: list[tuple[str, str]]) -> Nb:
    return await started(engine, name, mode, cells)


def loaded(res: Any) -> set[str]:
    """Cells of an executed plan that were loaded from the memo, not run."""
    if res.batch is None:  # nothing was stale
        return set()
    return {r.cell_id for r in res.batch.results if "loaded from memo" in r.output.text}


def memo_cells(res: Any) -> set[str]:
    return {e["cell_id"] for e in res.stale + res.conditional if "memo" in e}


async def execute(nb: Nb) -> Any:
    res = await nb.execute_plan()
    assert res.ok, res
    await flush(nb)
    return res


@pytest.mark.parametrize("mode", MODES)
async def test_reverted_edit_loads_both_cells(engine: Engine, mode: str) -> None:
    nb = await make(engine, f"revert-{mode}", mode, REVERT)
    try:
        nb.edit("scale", "k = 3\nscaled = [x * k for x in data]\ntime.sleep(0.3)")
        res = await execute(nb)
        assert not loaded(res)  # k = 3 never ran: nothing to load
        await nb.assert_fresh("k", "total", "scaled[:4]")
        nb.edit("scale", "k = 2\nscaled = [x * k for x in data]\ntime.sleep(0.3)")
        plan = await nb.plan()
        assert memo_cells(plan) == {"scale", "agg"}, plan.stale
        agg = next(e for e in plan.stale if e["cell_id"] == "agg")
        assert agg["memo"]["load_s"] <= 0.05 * agg["memo"]["run_s"] * 2
        assert any(r["kind"] == "loads_from_memo" for r in agg["reasons"])
        assert plan.cost and plan.cost["memo_saved_s"] > 0
        # status and list_cells say it too; `ipykeep checkpoints` lists the stored runs
        session = engine.kernels[nb.kernel_id]
        states = {c.cell_id: c for c in engine.cell_states(session, read_notebook(nb.path))}
        assert any(r["kind"] == "loads_from_memo" for r in states["agg"].reasons or [])
        listing = await layer(engine).checkpoints(kernel_id=nb.kernel_id)
        memo_of = {m["cell_id"]: m for m in listing.memo}
        assert any(r["matches_now"] and r["loadable"] for r in memo_of["agg"]["runs"])
        assert len(memo_of["agg"]["runs"]) == 2  # one per value of k
        res = await execute(nb)
        assert loaded(res) == {"scale", "agg"}
        # the memoized run's output comes back with it
        agg_record = next(r for r in res.batch.results if r.cell_id == "agg")
        assert "total 3998000" in agg_record.output.text
        await nb.assert_fresh("k", "total", "scaled[:4]", "len(scaled)")
        assert (await nb.plan()).stale == []
    finally:
        await nb.close()


@pytest.mark.parametrize(
    "source",
    [
        "import random\nrng = random.Random()\nnoise = rng.random() + n",
        "import time\nnoise = time.time() + n",
        "import numpy as np\nnoise = float(np.random.rand()) + n",
    ],
    ids=["unseeded-generator", "clock", "global-generator"],
)
async def test_uncovered_runs_are_not_loaded(engine: Engine, source: str) -> None:
    name = "uncovered-" + str(abs(hash(source)) % 10_000)
    cells = [
        ("base", "import time\ntime.sleep(0.6)\nn = 1"),
        ("noisy", "time.sleep(0.6)\n" + source),
    ]
    nb = await make(engine, name, "static", cells)
    try:
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 2")
        await execute(nb)
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 1")
        plan = await nb.plan()
        assert memo_cells(plan) == {"base"}, plan.stale
        res = await execute(nb)
        assert loaded(res) == {"base"}
    finally:
        await nb.close()


@pytest.mark.parametrize("mode", MODES)
async def test_a_value_holding_an_input_is_re_run_not_loaded(engine: Engine, mode: str) -> None:
    """A loaded value would hold a copy of its input, not the input itself (a model holding
    its frame), and a loaded in-place change would rebind its name to a copy the holders do not
    see: the alias a fresh run has would be lost. Such runs are keyed (their readers may still
    load) but never loaded."""
    cells = [
        ("base", "import time\ntime.sleep(0.6)\nn = 1"),
        ("rows", "rows = list(range(n, n + 50))"),
        ("hold", "time.sleep(0.6)\nholder = {'data': rows}\nsize = len(rows)"),
        ("grow", "rows.append(-1)"),
    ]
    nb = await make(engine, f"holder-{mode}", mode, cells)
    try:
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 2")
        await execute(nb)
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 1")
        plan = await nb.plan()
        assert "base" in memo_cells(plan) and not {"hold", "grow"} & memo_cells(plan), plan.stale
        res = await execute(nb)
        assert "base" in loaded(res) and not {"hold", "grow"} & loaded(res)
        await nb.assert_fresh("holder['data'] is rows", "holder", "size", "rows[-1]")
        assert await nb.values("holder['data'][-1]") == ["-1"]
    finally:
        await nb.close()


async def test_seeded_generator_loads(engine: Engine) -> None:
    cells = [
        ("seed", "import numpy as np\nnp.random.seed(7)"),
        ("base", "import time\ntime.sleep(0.6)\nn = 1"),
        ("draw", "time.sleep(0.6)\nnoise = float(np.random.rand()) + n"),
    ]
    nb = await make(engine, "seeded", "static", cells)
    try:
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 2")
        await execute(nb)
        nb.edit("base", "import time\ntime.sleep(0.6)\nn = 1")
        res = await execute(nb)
        assert {"base", "draw"} <= loaded(res)
        await nb.assert_fresh("noise", "float(np.random.rand())")
    finally:
        await nb.close()


FUZZ_OPTIONS: dict[str, list[str]] = {
    "load": [
        "import time\ntime.sleep(0.4)\ndata = list(range(50))",
        "import time\ntime.sleep(0.4)\ndata = list(range(60))",
    ],
    "param": ["k = 1", "k = 2", "k = 3"],
    "noise": ["import random\nr = random.random() + k", "import random\nr = random.random() - k"],
    "seed": ["random.seed(0)", "random.seed(1)"],
    "draw": ["d = random.random() + k", "d = random.random() * k"],
    "scale": ["scaled = [x * k for x in data]", "scaled = [x + k for x in data]"],
    "agg": [
        "time.sleep(0.4)\ntotal = sum(scaled)\nprint('total', total)",
        "time.sleep(0.4)\ntotal = sum(scaled) * 2\nprint('total', total)",
    ],
}
FUZZ_EXPRS = ("k", "total", "scaled[:3]", "d", "len(data)")


@pytest.mark.parametrize("mode", MODES)
async def test_fuzz_edits_and_reverts(engine: Engine, mode: str) -> None:
    """Random edits, reverts (to any earlier version of a cell) and checkouts of an older
    notebook: after each execute the values equal a fresh run, the plan is empty, and the
    cell drawing from the unseeded generator is never loaded."""
    import random as stdlib_random

    rnd = stdlib_random.Random(f"memo-fuzz-{mode}")
    current = {cid: options[0] for cid, options in FUZZ_OPTIONS.items()}
    nb = await make(engine, f"fuzz-{mode}", mode, list(current.items()))
    history = [dict(current)]
    loads = 0
    try:
        # two edits, then back to the version two edits before; then a random walk
        scripted = [("param", 1), ("param", 2), ("param", 0)]
        for step in range(9):
            if step < len(scripted):
                cid, option = scripted[step]
                current[cid] = FUZZ_OPTIONS[cid][option]
                nb.edit(cid, current[cid])
            elif rnd.random() < 0.3:
                current = dict(rnd.choice(history[:-1]))  # `git checkout` of an older notebook
                nb.write_cells(list(current.items()))
            else:
                for cid in rnd.sample(list(FUZZ_OPTIONS), rnd.choice([1, 1, 2])):
                    others = [o for o in FUZZ_OPTIONS[cid] if o != current[cid]]
                    current[cid] = rnd.choice(others)
                    nb.edit(cid, current[cid])
            history.append(dict(current))
            res = await execute(nb)
            got = loaded(res)
            assert "noise" not in got, res
            loads += len(got)
            await nb.assert_fresh(*FUZZ_EXPRS)
            after = await nb.plan()
            assert after.stale == [] and after.conditional == [], after.stale
        assert loads > 0  # the walk revisited states: some runs came from the memo
    finally:
        await nb.close()
