"""Checkpoints on real kernels: a lost kernel comes back with its fresh cells restored, the rest
re-run, and values equal to a fresh run of the notebook on disk; named checkpoints roll back.

One in-process engine for the module (real ipykernel kernels); each test has its own notebook
directory. The fresh-run oracle is the staleness acceptance suite's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ipykeep.checkpoints.store import TamperedCheckpointError
from ipykeep.engine.engine import Engine
from ipykeep.inspection.service import InspectionService
from tests.checkpoints.kernel_loss import sigkill
from tests.checkpoints.kit import composed_engine, flush, layer, started
from tests.staleness.test_staleness_acceptance import _KERNEL_VALUES, Nb, kinds

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

CSV = "x,y\n1,2\n3,4\n5,6\n"

CELLS = [
    ("load", 'import time\nimport pandas as pd\ntime.sleep(0.4)\ndf = pd.read_csv("data.csv")'),
    ("mut", 'df["z"] = df["x"] * 10'),
    ("tot", 'total = int(df["z"].sum())'),
    ("gen", "stream = (i * i for i in range(5))"),
    (
        "base",
        "time.sleep(0.3)\nbase = list(range(10))\nclass Box:\n    def __init__(self, v):\n"
        "        self.v = v\nbox = Box(sum(base))",
    ),
    ("use", "boxed = [Box(v) for v in base[:3]]\nn = total + box.v"),
]

EXPRS = (
    "df.to_dict()",
    "total",
    "sorted(base)",
    "box.v",
    "[b.v for b in boxed]",
    "type(boxed[0]) is Box",
    "n",
    "list(stream)",
)


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    async with composed_engine(tmp_path_factory, "checkpoints", dataflow="static") as eng:
        yield eng


def inspection(engine: Engine) -> InspectionService:
    return next(o for o in engine.observers if isinstance(o, InspectionService))


async def make(engine: Engine, name: str) -> Nb:
    return await started(engine, name, "static", CELLS, {"data.csv": CSV})


def cell_runs(nb: Nb) -> list[str]:
    """Notebook cells the kernel executed (restored cells are not executed)."""
    entry = nb.engine.kernels[nb.kernel_id]
    return [
        ex.cell_id for ex in entry.executions.values() if ex.kind == "cell" and ex.state == "ok"
    ]


async def values_fresh(nb: Nb) -> None:
    await nb.engine.execute(_KERNEL_VALUES, kernel_id=nb.kernel_id)
    await nb.assert_fresh(*EXPRS[:-1])
    # the generator is not restorable: its cell re-ran, so it is whole again
    assert (await nb.values("list(stream)")) == (await nb.fresh_values("list(stream)"))


async def start_after_kill(nb: Nb) -> Any:
    entry = nb.engine.kernels[nb.kernel_id]
    await sigkill(entry)
    rec = await nb.engine.create_kernel(notebook=str(nb.path))  # `ipykeep start` again
    assert rec.kernel_id == nb.kernel_id and rec.state == "idle"
    return layer(nb.engine).state(entry).last_restore


async def test_kernel_killed_restores_fresh_cells(engine: Engine) -> None:
    nb = await make(engine, "killed")
    listing = await layer(engine).checkpoints(kernel_id=nb.kernel_id)
    by_id = {c.cell_id: c for c in listing.cells}
    assert not by_id["gen"].restorable and "cannot be pickled" in by_id["gen"].failed["stream"]
    assert by_id["load"].restorable and "df" in by_id["load"].values and by_id["load"].bytes > 0
    status = engine.kernel_record(engine.kernels[nb.kernel_id]).checkpoints or ""
    assert "5 cell(s) checkpointed" in status, status
    assert "not restorable (re-runs after a restart): cell 3" in status, status
    notes = (await inspection(engine).namespace(kernel_id=nb.kernel_id)).notes
    assert notes[0] == f"checkpoints: {status}", notes  # the words of status, in status's order
    assert any(n.startswith("checkpointed values: ") and "df " in n for n in notes), notes
    assert any("not saved: stream (cell 3: cannot be pickled" in n for n in notes), notes
    report = await start_after_kill(nb)
    assert report is not None
    assert {c["cell_id"] for c in report.restored} == {"load", "mut", "tot", "base", "use"}
    assert [e["cell_id"] for e in report.rerun] == ["gen"]  # its value did not pickle
    assert report.restore_s > 0 and all(c["run_s"] >= 0 for c in report.restored)
    assert cell_runs(nb)[len(CELLS) :] == ["gen"]  # warm-up ran only the plan: nothing needless
    assert kinds(await nb.plan()) == {}
    await values_fresh(nb)
    # a restart on request drops the state: no restore
    await engine.restart(kernel_id=nb.kernel_id)
    assert {e["cell_id"] for e in (await nb.plan()).stale} == {c for c, _ in CELLS}
    await nb.close()


async def test_stop_start_after_data_edit_reruns_only_readers(engine: Engine) -> None:
    nb = await make(engine, "stopstart")
    await nb.close()
    nb.rewrite_file("data.csv", "x,y\n7,8\n9,10\n")
    await nb.start()  # warm-up: restore what is fresh, run the plan
    report = layer(engine).state(engine.kernels[nb.kernel_id]).last_restore
    assert report is not None
    assert {c["cell_id"] for c in report.restored} == {"base"}
    rerun = {e["cell_id"]: {r["kind"] for r in e["reasons"]} for e in report.rerun}
    assert rerun["load"] == {"file_changed"} and rerun["gen"] == {"never_run"}
    assert set(rerun) == {"load", "mut", "tot", "gen", "use"}
    assert cell_runs(nb) == ["load", "mut", "tot", "gen", "use"]
    after = await nb.plan()
    assert kinds(after) == {}, after.stale
    await values_fresh(nb)
    await nb.close()


async def test_tampered_blob_is_refused_and_its_cell_reruns(engine: Engine) -> None:
    nb = await make(engine, "tampered")
    await nb.close()
    store = layer(engine).store
    manifest = store.read_manifest(store.cell_manifest_path(nb.path, "base"))
    blob = manifest["values"]["base"]["blob"]
    path = store.blob_path(blob)
    path.write_bytes(path.read_bytes() + b"\0")  # still loads as a pickle, but is not ours
    await nb.start()
    report = layer(engine).state(engine.kernels[nb.kernel_id]).last_restore
    assert report is not None
    assert "base" in report.not_restorable and "tampered" in report.not_restorable["base"]
    assert any("refused" in e and "authenticate" in e for e in report.errors)
    assert (store.root / "quarantine" / blob).exists()
    # base's other names (Box, box) are dropped with it; its readers re-run after it
    assert {c["cell_id"] for c in report.restored} == {"load", "mut", "tot"}
    assert cell_runs(nb) == ["gen", "base", "use"]
    await values_fresh(nb)
    await flush(nb)
    store.get_blob(blob)  # base re-ran: its true bytes are back and authenticate
    await nb.close()


async def test_rollback_restores_a_mutated_dataframe(engine: Engine) -> None:
    nb = await make(engine, "rollback")
    cp = layer(engine)
    made = await cp.checkpoint("before", kernel_id=nb.kernel_id)
    assert "df" in made.values and "stream" in made.failed
    original = await nb.values("df.to_dict()", "total")
    await nb.scratch('df.drop(index=0, inplace=True)\ndf["x"] = 0\nextra = 1')
    assert (await nb.values("df.to_dict()"))[0] != original[0]
    assert kinds(await nb.plan())  # the scratch mutation made cells stale
    res = await cp.restore("before", kernel_id=nb.kernel_id)
    assert "df" in res.restored and res.deleted == ["extra"]
    assert await nb.values("df.to_dict()", "total") == original
    assert await nb.values("extra") == ["<undefined>"]
    assert kinds(await nb.plan()) == {}  # the staleness record is rolled back too
    # a damaged checkpoint is refused whole, and nothing changes
    await nb.scratch('df["x"] = -1')
    store = cp.store
    manifest = store.read_manifest(store.named_manifest_path(nb.path, "before"))
    blob_path = store.blob_path(manifest["values"]["df"]["blob"])
    blob_path.write_bytes(blob_path.read_bytes() + b"\0")
    with pytest.raises(TamperedCheckpointError, match="do not authenticate"):
        await cp.restore("before", kernel_id=nb.kernel_id)
    assert json.loads(json.dumps(await nb.values("df['x'].tolist()"))) == ["[-1, -1, -1]"]
    await nb.close()


ALIAS_CELLS = [
    ("mk", "base = [1, 2, 3]"),
    ("al", "view = base"),  # another cell: `view` saved alone, its object is `base`'s
    ("pair", "left = {'k': 1}\nright = left"),  # one cell saving both names of one object
    ("other", "copy = list(base)"),  # equal, not the same object: must stay apart
]
ALIAS_EXPRS = (
    "base",
    "view",
    "view is base",
    "left",
    "right is left",
    "copy is base",
    "grown",
    "k",
)


async def test_names_of_one_object_are_one_object_after_restore(engine: Engine) -> None:
    """Values are saved per name; after a restore, names that held one object hold one object
    again, so a mutation through one shows through the others, as in a fresh run."""
    directory = engine.paths.root / "aliases"
    directory.mkdir()
    nb = Nb(engine, directory, "static")
    nb.write_cells(ALIAS_CELLS)
    await nb.start()
    await flush(nb)
    report = await start_after_kill(nb)
    assert report is not None and {c["cell_id"] for c in report.restored} == {
        c for c, _ in ALIAS_CELLS
    }
    await engine.execute(_KERNEL_VALUES, kernel_id=nb.kernel_id)
    assert await nb.values("view is base", "right is left", "copy is base") == [
        "True",
        "True",
        "False",
    ]
    # as in the lost kernel: a change through one name shows through the other
    await nb.scratch("view.append(9)\nright['k'] = 5")
    assert await nb.values("base", "left['k']", "copy") == ["[1, 2, 3, 9]", "5", "[1, 2, 3]"]
    nb.insert(4, "grow", "view.append(4)\nright['k'] = 2\ncopy.append(0)")
    nb.insert(5, "read", "grown = len(base)\nk = left['k']")
    ran = [e["cell_id"] for e in (await nb.execute_plan()).stale]
    assert (
        ran[-2:] == ["grow", "read"] and "mk" in ran
    )  # the scratch change to base is undone first
    assert kinds(await nb.plan()) == {}
    await nb.assert_fresh(*ALIAS_EXPRS)
    # a named checkpoint keeps them one object too
    await layer(engine).checkpoint("shared", kernel_id=nb.kernel_id)
    await nb.scratch("view = list(view)\nright = dict(right)")
    await layer(engine).restore("shared", kernel_id=nb.kernel_id)
    assert await nb.values("view is base", "right is left", "copy is base") == [
        "True",
        "True",
        "False",
    ]
    await nb.close()


async def test_a_change_right_after_a_snapshot_does_not_reach_its_blob(engine: Engine) -> None:
    """The snapshot step does not copy arrays (the writer thread reads them from the live
    objects); the next code to run first makes the writer copy what it has not read yet. Here
    the next cell changes a 64 MB array in place while the first cell's blob is being written:
    that blob must still hold the array as the first cell left it."""
    import pickle

    from ipykeep.checkpoints._inkernel import blobfmt

    directory = engine.paths.root / "live"
    directory.mkdir()
    nb = Nb(engine, directory, "static")
    nb.write_cells(
        [
            ("mk", "import numpy as np\narr = np.arange(8_000_000, dtype='float64')"),
            ("neg", "arr *= -1"),  # runs right after mk's snapshot step, in the same warm-up
        ]
    )
    await nb.start()
    await flush(nb)
    assert await nb.values("float(arr[-1])") == ["-7999999.0"]
    store = layer(engine).store
    manifest = store.read_manifest(store.cell_manifest_path(nb.path, "mk"))
    parts = blobfmt.split(store.get_blob(manifest["values"]["arr"]["blob"]))
    saved = pickle.loads(parts[0], buffers=parts[1:])
    assert float(saved.sum()) == 31999996000000.0 and float(saved[-1]) == 7999999.0
    await nb.close()
