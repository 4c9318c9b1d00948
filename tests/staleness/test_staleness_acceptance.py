"""Staleness acceptance on real kernels, in both dataflow modes.

Each test binds a kernel (in-process engine, real ipykernel, with ipyflow or without) to a tiny
notebook, edits the notebook or its files on disk as an agent would, and checks the plan: the
exact cells, their reason kinds and evidence. It then executes the plan, checks that exactly
those cells ran, that the plan is empty afterwards, and that the kernel's values equal those of
a fresh top-to-bottom run of the notebook as it is on disk (run in a separate interpreter on a
copy of the data files). The criterion is in docs/staleness.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.service import StalenessService

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

MODES = ("ipyflow", "static")

# A fresh run: every code cell in order in one namespace, stopping at the first error (as a
# notebook run-all does), then the repr of each expression ("<undefined>" when it fails).
# The oracle: the notebook's code cells run top to bottom by IPython (notebook syntax such as
# ``!cmd`` and ``%run`` included) in a separate interpreter, stopping at the first error as
# nbclient does.
_FRESH_RUN = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
cells, exprs = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
for src in cells:
    if not shell.run_cell(src, store_history=False, silent=True).success:
        break
ns = shell.user_ns
out = []
for e in exprs:
    try:
        out.append(repr(eval(e, ns)))
    except Exception:
        out.append("<undefined>")
print(json.dumps(out))
"""

_KERNEL_VALUES = (
    "def _ipykeep_values(exprs):\n"
    "    import json\n"
    "    out = []\n"
    "    for e in exprs:\n"
    "        try:\n"
    "            out.append(repr(eval(e, globals())))\n"
    "        except Exception:\n"
    "            out.append('<undefined>')\n"
    "    return json.dumps(out)\n"
)


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    root = tmp_path_factory.mktemp("staleness_acceptance")
    (root / ".git").mkdir()
    eng = compose(ProjectPaths(root), Config(idle_timeout=0)).engine
    yield eng
    await eng.shutdown()


class Nb:
    """A notebook on disk bound to one kernel, edited the way an agent edits it."""

    def __init__(self, engine: Engine, directory: Path, mode: str) -> None:
        self.engine = engine
        self.dir = directory
        self.mode = mode
        self.path = directory / "nb.ipynb"
        self.kernel_id = ""

    # -- files -------------------------------------------------------------------------------
    def write_cells(self, cells: list[tuple[str, str]]) -> None:
        """``(cell_id, source)``; a source starting with ``md:`` makes a Markdown cell."""
        nb = nbformat.v4.new_notebook()
        for cid, src in cells:
            if src.startswith("md:"):
                cell = nbformat.v4.new_markdown_cell(src[3:])
            else:
                cell = nbformat.v4.new_code_cell(src)
            cell["id"] = cid
            nb.cells.append(cell)
        nbformat.write(nb, self.path)

    def _read(self) -> Any:
        return nbformat.read(self.path, as_version=4)

    def _save(self, nb: Any) -> None:
        nbformat.write(nb, self.path)

    def edit(self, cid: str, source: str) -> None:
        nb = self._read()
        hits = [c for c in nb.cells if c["id"] == cid]
        assert hits, f"no cell {cid}"
        hits[0]["source"] = source
        self._save(nb)

    def delete(self, cid: str) -> None:
        nb = self._read()
        nb.cells = [c for c in nb.cells if c["id"] != cid]
        self._save(nb)

    def insert(self, at: int, cid: str, source: str) -> None:
        nb = self._read()
        cell = nbformat.v4.new_code_cell(source)
        cell["id"] = cid
        nb.cells.insert(at, cell)
        self._save(nb)

    def move(self, cid: str, to: int) -> None:
        nb = self._read()
        cell = next(c for c in nb.cells if c["id"] == cid)
        nb.cells.remove(cell)
        nb.cells.insert(to, cell)
        self._save(nb)

    def order(self) -> list[str]:
        return [c["id"] for c in self._read().cells]

    def rewrite_file(self, name: str, text: str) -> None:
        path = self.dir / name
        before = path.stat().st_mtime_ns if path.exists() else 0
        path.write_text(text)
        # a later mtime even on coarse clocks, as an editor saving the file would leave
        bump = max(path.stat().st_mtime_ns, before + 2_000_000_000)
        os.utime(path, ns=(bump, bump))

    # -- kernel ------------------------------------------------------------------------------
    async def start(self) -> None:
        rec = await self.engine.create_kernel(notebook=str(self.path), dataflow=self.mode)
        assert rec.dataflow == self.mode
        self.kernel_id = rec.kernel_id
        await self.engine.execute(_KERNEL_VALUES, kernel_id=self.kernel_id)

    async def close(self) -> None:
        if self.kernel_id:
            await self.engine.close_kernel(kernel_id=self.kernel_id)

    @property
    def layer(self) -> Any:
        return next(o for o in self.engine.observers if isinstance(o, StalenessService))

    async def plan(self) -> Any:
        return await self.layer.run_stale(kernel_id=self.kernel_id)

    async def execute_plan(self) -> Any:
        return await self.layer.run_stale(kernel_id=self.kernel_id, execute=True)

    async def scratch(self, code: str) -> None:
        rec = await self.engine.execute(code, kernel_id=self.kernel_id)
        assert rec.state == "ok", rec

    async def run_cells(self, *cids: str) -> Any:
        return await self.engine.run_cells(list(cids), kernel_id=self.kernel_id)

    async def values(self, *exprs: str) -> list[str]:
        code = f"print(_ipykeep_values({list(exprs)!r}))"
        rec = await self.engine.execute(code, kernel_id=self.kernel_id)
        assert rec.state == "ok", rec
        return json.loads(rec.output.text.strip().splitlines()[-1])

    async def fresh_values(self, *exprs: str) -> list[str]:
        nb = self._read()
        cells = [c["source"] for c in nb.cells if c["cell_type"] == "code"]
        with tempfile.TemporaryDirectory() as tmp:
            for item in self.dir.iterdir():
                if item.is_file() and item.suffix != ".ipynb":
                    shutil.copy2(item, Path(tmp) / item.name)
                elif item.is_dir() and not item.name.startswith(".") and item.name != "__pycache__":
                    shutil.copytree(item, Path(tmp) / item.name)  # data directories
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _FRESH_RUN,
                cwd=tmp,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await proc.communicate(json.dumps([cells, list(exprs)]).encode())
        assert proc.returncode == 0, err.decode()
        return json.loads(out.decode().strip().splitlines()[-1])

    async def assert_fresh(self, *exprs: str) -> None:
        """The kernel holds what a fresh run of the notebook on disk would give."""
        kernel = await self.values(*exprs)
        fresh = await self.fresh_values(*exprs)
        assert dict(zip(exprs, kernel)) == dict(zip(exprs, fresh))
        assert "<undefined>" not in fresh


def kinds(res: Any) -> dict[str, set[str]]:
    """cell id -> reason kinds, for the planned cells (``stale``)."""
    return {e["cell_id"]: {r["kind"] for r in e["reasons"]} for e in res.stale}


def blocked_kinds(res: Any) -> dict[str, set[str]]:
    return {e["cell_id"]: {r["kind"] for r in e["reasons"]} for e in res.blocked}


def reason(res: Any, cid: str, kind: str) -> dict[str, Any]:
    for e in list(res.stale) + list(res.blocked):
        if e["cell_id"] == cid:
            found = [r for r in e["reasons"] if r["kind"] == kind]
            assert len(found) == 1, f"{cid}: expected one {kind} reason, got {e['reasons']}"
            return found[0]
    raise AssertionError(f"{cid} is not in the plan: {res.stale} {res.blocked}")


def rebuild_kinds(res: Any, producer: str) -> dict[str, set[str]]:
    """``kinds`` for a plan that rebuilds ``producer`` first, which may load its stored run from
    the memo instead of re-running it (``loads_from_memo``, docs/checkpoints.md): that run was
    stored before the cell below changed its value in place, so loading it rebuilds the value a
    fresh run has. No other cell may load (the edited cell and its readers have new inputs)."""
    got = kinds(res)
    loaders = {cid for cid, ks in got.items() if "loads_from_memo" in ks}
    assert loaders <= {producer}, f"only {producer} may load from the memo: {res.stale}"
    return {cid: ks - {"loads_from_memo"} for cid, ks in got.items()}


def ran(res: Any) -> list[str]:
    assert res.batch is not None, "nothing was executed"
    return [r.cell_id for r in res.batch.results]


async def execute_exactly(nb: Nb, expected: list[str]) -> Any:
    """Execute the plan; exactly ``expected`` ran, in that order, all ok; then the plan is empty."""
    res = await nb.execute_plan()
    assert ran(res) == expected
    assert res.ok, [r.error for r in res.batch.results if r.error]
    assert all(r.state == "ok" for r in res.batch.results)
    after = await nb.plan()
    assert kinds(after) == {}, after.stale
    assert after.blocked == []
    return res


@pytest_asyncio.fixture
async def make_nb(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    made: list[Nb] = []

    def make(mode: str, cells: list[tuple[str, str]], files: dict[str, str] | None = None) -> Nb:
        directory = engine.paths.root / tmp_path_factory.mktemp("nb", numbered=True).name
        directory.mkdir()
        for name, text in (files or {}).items():
            (directory / name).write_text(text)
        nb = Nb(engine, directory, mode)
        nb.write_cells(cells)
        made.append(nb)
        return nb

    yield make
    for nb in made:
        await nb.close()


# ----------------------------------------------------------------------------- notebooks

CSV = "k,v\na,1\nb,2\nc,3\n"

PIPELINE = [
    ("intro", "md:# Pipeline"),
    ("load", 'import csv\nwith open("data.csv") as f:\n    rows = list(csv.DictReader(f))'),
    ("clean", 'clean = [r for r in rows if r["v"] != ""]'),
    ("features", 'feats = [int(r["v"]) * 2 for r in clean]'),
    ("report", "total = sum(feats)"),
]
PIPELINE_VALUES = ("rows", "clean", "feats", "total")


# ----------------------------------------------------------------------------- 1. linear


@pytest.mark.parametrize("mode", MODES)
async def test_linear_pipeline_edit_middle(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, PIPELINE, {"data.csv": CSV})
    await nb.start()
    assert kinds(await nb.plan()) == {}

    nb.edit("clean", 'clean = [r for r in rows if r["v"] not in ("", "3")]')
    plan = await nb.plan()
    assert kinds(plan) == {
        "clean": {"source_changed"},
        "features": {"upstream"},
        "report": {"upstream"},
    }
    up = reason(plan, "features", "upstream")
    assert (up["cells"], up["symbols"]) == (["clean"], ["clean"])
    up = reason(plan, "report", "upstream")
    assert (up["cells"], up["symbols"]) == (["features"], ["feats"])
    assert plan.blocked == []

    await execute_exactly(nb, ["clean", "features", "report"])
    await nb.assert_fresh(*PIPELINE_VALUES)
    assert (await nb.values("total")) == ["6"]


# ----------------------------------------------------------------------------- 2. branches


@pytest.mark.parametrize("mode", MODES)
async def test_two_branches_stay_apart(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("load", "base = [1, 2, 3]"),
            ("a1", "a = [v + 1 for v in base]"),
            ("a2", "a_total = sum(a)"),
            ("b1", "b = [v * 10 for v in base]"),
            ("b2", "b_total = sum(b)"),
        ],
    )
    await nb.start()
    nb.edit("a1", "a = [v + 2 for v in base]")
    plan = await nb.plan()
    assert kinds(plan) == {"a1": {"source_changed"}, "a2": {"upstream"}}
    await execute_exactly(nb, ["a1", "a2"])

    nb.edit("b2", "b_total = sum(b) + 1")
    plan = await nb.plan()
    assert kinds(plan) == {"b2": {"source_changed"}}
    await execute_exactly(nb, ["b2"])

    nb.edit("b1", "b = [v * 100 for v in base]")
    assert kinds(await nb.plan()) == {"b1": {"source_changed"}, "b2": {"upstream"}}
    await execute_exactly(nb, ["b1", "b2"])
    await nb.assert_fresh("a", "a_total", "b", "b_total")


@pytest.mark.parametrize("mode", MODES)
async def test_a_cell_that_does_not_read_a_name_never_uses_it(make_nb: Any, mode: str) -> None:
    # ipyflow files the generator expression's ``x`` in e as a symbol and then reports it used
    # by the next cells that call a method (f, g): with a global x above, that read an edge
    # "uses x from cell x0" into cells that never name x. Only x0 is stale after its edit.
    nb = make_nb(
        mode,
        [
            ("a", "import numpy as np\nz0s = np.linspace(0, 1, 5)\nk = 3"),
            ("x0", "x = 100"),
            ("b", "y = z0s * k"),
            ("d", "lst = []\nlst.append(y)"),
            ("e", "s = sum(x.sum() for x in lst)"),
            ("f", "m = {'y': y}\nn = m['y'].sum()"),
            ("g", "p = [v * 2 for v in y]"),
            ("h", "first, second = p[:2]"),
        ],
    )
    await nb.start()
    nb.edit("x0", "x = 200")
    plan = await nb.plan()
    said = [r["message"] for e in plan.stale + plan.blocked for r in e["reasons"]]
    assert not [m for m in said if m.startswith("uses x ")], said
    assert kinds(plan) == {"x0": {"source_changed"}}
    await execute_exactly(nb, ["x0"])
    await nb.assert_fresh("x", "n", "p", "first")


# ----------------------------------------------------------------------------- 3. at rest


@pytest.mark.parametrize("mode", MODES)
async def test_cosmetic_edits_and_rest_after_warmup(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("md1", "md:# Sales"),
            ("load", 'import pandas as pd\ndf = pd.read_csv("data.csv")'),
            ("save", 'df.to_csv("out.csv", index=False)'),
            ("notes", 'notes = open("notes.txt").read()'),
            ("back", 'back = open("out.csv").read()'),
            ("report", "n = len(df) + len(notes)"),
        ],
        {"data.csv": CSV, "notes.txt": "hello\n"},
    )
    await nb.start()
    assert (nb.dir / "out.csv").exists()
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.blocked == []

    nb.edit(
        "load", '# load the data\nimport pandas as pd\n\ndf = pd.read_csv( "data.csv" )  # raw\n'
    )
    nb.edit("report", "n = (len(df)\n     + len(notes))\n\n\n")
    nb.edit("md1", "# Sales, edited heading")  # a Markdown cell
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.blocked == []
    res = await nb.execute_plan()
    assert res.batch is None and res.ok
    await nb.assert_fresh("df.to_dict()", "notes", "back", "n")

    # the written file is the writer's output and the reader's input
    nb.rewrite_file("data.csv", CSV + "d,4\n")
    plan = await nb.plan()
    assert kinds(plan) == {
        "load": {"file_changed"},
        "save": {"upstream"},
        "back": {"upstream"},
        "report": {"upstream"},
    }
    via_file = reason(plan, "back", "upstream")
    assert via_file["cells"] == ["save"] and Path(via_file["path"]).name == "out.csv"
    await execute_exactly(nb, ["load", "save", "back", "report"])
    await nb.assert_fresh("df.to_dict()", "notes", "back", "n")


# ----------------------------------------------------------------------------- 4. files


@pytest.mark.parametrize("mode", MODES)
async def test_rewritten_input_files(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        PIPELINE
        + [
            ("helper", "def read(p):\n    return open(p).read()"),
            ("notes", 'text = read("notes.txt")'),
            ("shout", "loud = text.upper()"),
        ],
        {"data.csv": CSV, "notes.txt": "hello\n"},
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}

    nb.rewrite_file("data.csv", CSV + "d,40\n")
    plan = await nb.plan()
    assert kinds(plan) == {
        "load": {"file_changed"},
        "clean": {"upstream"},
        "features": {"upstream"},
        "report": {"upstream"},
    }
    changed = reason(plan, "load", "file_changed")
    assert Path(changed["path"]).name == "data.csv"
    assert "data.csv" in changed["message"]
    await execute_exactly(nb, ["load", "clean", "features", "report"])
    assert (await nb.values("total")) == ["92"]

    nb.rewrite_file("notes.txt", "goodbye, and thanks\n")
    plan = await nb.plan()
    assert kinds(plan) == {"notes": {"file_changed"}, "shout": {"upstream"}}
    assert Path(reason(plan, "notes", "file_changed")["path"]).name == "notes.txt"
    await execute_exactly(nb, ["notes", "shout"])
    await nb.assert_fresh(*PIPELINE_VALUES, "text", "loud")


# ----------------------------------------------------------------------------- 5. failed


@pytest.mark.parametrize("mode", MODES)
async def test_a_cell_that_would_fail_again_is_blocked_until_its_source_changes(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(
        mode,
        [("a", "x = 4"), ("b", "y = x / 0"), ("c", "z = y + 1"), ("d", "k = 7")],
    )
    await nb.start()
    plan = await nb.plan()
    # same source, inputs and packages: b would raise again, so it is not run, nor its reader
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {"b": {"failed"}, "c": {"failed"}}
    assert "ZeroDivisionError" in reason(plan, "b", "failed")["message"]
    assert "would again" in reason(plan, "b", "failed")["message"]
    assert "NameError" in reason(plan, "c", "failed")["message"]
    again = await nb.plan()  # planning is read-only
    assert (kinds(again), blocked_kinds(again)) == ({}, blocked_kinds(plan))

    nb.edit("b", "y = x / 2")
    plan = await nb.plan()
    assert kinds(plan) == {"b": {"source_changed", "failed"}, "c": {"failed", "upstream"}}
    assert plan.blocked == []
    assert "would again" not in reason(plan, "b", "failed")["message"]
    await execute_exactly(nb, ["b", "c"])
    await nb.assert_fresh("x", "y", "z", "k")


# ----------------------------------------------------------------------------- 6. new edge


@pytest.mark.parametrize("mode", MODES)
async def test_unexecuted_edit_adds_a_dependency(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = 1")])
    await nb.start()
    nb.edit("c", "z = y + 1")
    assert kinds(await nb.plan()) == {"c": {"source_changed"}}

    nb.edit("b", "y = x + 2")
    plan = await nb.plan()
    assert kinds(plan) == {"b": {"source_changed"}, "c": {"source_changed", "upstream"}}
    up = reason(plan, "c", "upstream")
    assert (up["cells"], up["symbols"]) == (["b"], ["y"])
    await execute_exactly(nb, ["b", "c"])
    await nb.assert_fresh("x", "y", "z")
    assert (await nb.values("z")) == ["4"]


# ----------------------------------------------------------------------------- 7. run one


@pytest.mark.parametrize("mode", MODES)
async def test_running_one_cell_keeps_other_edits(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "w = y * 10"),
            ("d", "k = 5"),
            ("e", "m = k + 1"),
        ],
    )
    await nb.start()
    nb.edit("b", "y = x + 2")
    nb.edit("d", "k = 6")
    batch = await nb.run_cells("b")
    assert batch.ok and [r.cell_id for r in batch.results] == ["b"]
    plan = await nb.plan()
    assert kinds(plan) == {"c": {"state_changed"}, "d": {"source_changed"}, "e": {"upstream"}}
    changed = reason(plan, "c", "state_changed")
    assert (changed["cells"], changed["symbols"]) == (["b"], ["y"])
    await execute_exactly(nb, ["c", "d", "e"])

    batch = await nb.run_cells("a")  # unedited, re-run explicitly: x keeps its value
    assert batch.ok
    assert kinds(await nb.plan()) == {}

    await nb.scratch("x = 2")
    batch = await nb.run_cells("a")  # restores x = 1, the value b and c ran on
    assert batch.ok
    assert kinds(await nb.plan()) == {}

    nb.edit("a", "x = 3")
    batch = await nb.run_cells("a")
    assert batch.ok
    plan = await nb.plan()
    assert kinds(plan) == {"b": {"state_changed"}, "c": {"upstream"}}
    assert reason(plan, "b", "state_changed")["symbols"] == ["x"]
    await execute_exactly(nb, ["b", "c"])
    await nb.assert_fresh("x", "y", "w", "k", "m")


# ----------------------------------------------------------------------------- 8. redefinition


@pytest.mark.parametrize("mode", MODES)
async def test_edited_earlier_definer_restores_later_one(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [("a", "x = 1"), ("b", "y = x + 1"), ("c", "x = 10"), ("d", "z = x * 2")],
    )
    await nb.start()
    nb.edit("a", "x = 2")
    plan = await nb.plan()
    assert kinds(plan) == {"a": {"source_changed"}, "b": {"upstream"}, "c": {"restores"}}
    restores = reason(plan, "c", "restores")
    assert (restores["cells"], restores["symbols"]) == (["a"], ["x"])
    await execute_exactly(nb, ["a", "b", "c"])
    await nb.assert_fresh("x", "y", "z")
    assert (await nb.values("x", "y", "z")) == ["10", "3", "20"]


# ----------------------------------------------------------------------------- 9. mutation


@pytest.mark.parametrize("mode", MODES)
async def test_in_place_mutation_rebuilds_producer_first(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("load", 'import pandas as pd\ndf = pd.DataFrame({"a": [1, 2, 3]})'),
            ("mut", 'df["c"] = df["a"] * 2'),
            ("use", 's = int(df["c"].sum())'),
            ("mk", "lst = [1]"),
            ("app", "lst.append(2)"),
            ("size", "n = len(lst)"),
            ("nums", "nums = [5]"),
            ("helper", "def bump(xs):\n    xs.append(0)"),
            ("tweak", "bump(nums)"),
            ("nsum", "nt = (sum(nums), len(nums))"),
            ("cls", "class Model:\n    k = 1\n    def tune(self, k):\n        self.k = k"),
            ("model", "model = Model()"),
            ("tuned", "model.tune(2)"),
            ("score", "score = model.k * 10"),
        ],
    )
    await nb.start()
    nb.edit("mut", 'df["c"] = df["a"] * 3')
    plan = await nb.plan()
    assert rebuild_kinds(plan, "load") == {
        "load": {"restores"},
        "mut": {"source_changed"},
        "use": {"upstream"},
    }
    restores = reason(plan, "load", "restores")
    assert (restores["cells"], restores["symbols"]) == (["mut"], ["df"])
    await execute_exactly(nb, ["load", "mut", "use"])
    assert (await nb.values("s")) == ["18"]

    nb.edit("app", "lst.append(3)")
    plan = await nb.plan()
    assert rebuild_kinds(plan, "mk") == {
        "mk": {"restores"},
        "app": {"source_changed"},
        "size": {"upstream"},
    }
    restores = reason(plan, "mk", "restores")
    assert (restores["cells"], restores["symbols"]) == (["app"], ["lst"])
    await execute_exactly(nb, ["mk", "app", "size"])
    assert (await nb.values("lst")) == ["[1, 3]"]

    # the same through a function that changes its argument
    nb.edit("tweak", "bump(nums)\nbump(nums)")
    plan = await nb.plan()
    assert rebuild_kinds(plan, "nums") == {
        "nums": {"restores"},
        "tweak": {"source_changed"},
        "nsum": {"upstream"},
    }
    restores = reason(plan, "nums", "restores")
    assert (restores["cells"], restores["symbols"]) == (["tweak"], ["nums"])
    await execute_exactly(nb, ["nums", "tweak", "nsum"])
    await nb.assert_fresh("df.to_dict()", "s", "lst", "n", "nums", "nt")
    assert (await nb.values("nums")) == ["[5, 0, 0]"]

    # and through a method of a notebook class that changes its instance
    nb.edit("tuned", "model.tune(3)")
    plan = await nb.plan()
    assert rebuild_kinds(plan, "model") == {
        "model": {"restores"},
        "tuned": {"source_changed"},
        "score": {"upstream"},
    }
    await execute_exactly(nb, ["model", "tuned", "score"])
    await nb.assert_fresh("nums", "nt", "model.k", "score")
    assert (await nb.values("score")) == ["30"]


# ----------------------------------------------------------------------------- 10. scratch


@pytest.mark.parametrize("mode", MODES)
async def test_scratch_rebind_and_mutation(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "lst = [1, 2]"),
            ("d", "n = len(lst)"),
            ("e", "q = 3"),
        ],
    )
    await nb.start()
    await nb.scratch("x = 100")
    plan = await nb.plan()
    # y was computed from a's x, and the kernel saw the scratch code touch nothing else
    assert kinds(plan) == {"a": {"restores"}}
    assert reason(plan, "a", "restores")["symbols"] == ["x"]
    await execute_exactly(nb, ["a"])
    await nb.assert_fresh("x", "y")

    await nb.scratch("lst.append(99)")
    plan = await nb.plan()
    assert kinds(plan) == {"c": {"restores"}}
    assert reason(plan, "c", "restores")["symbols"] == ["lst"]
    await execute_exactly(nb, ["c"])
    await nb.assert_fresh("x", "y", "lst", "n", "q")
    await nb.assert_fresh("x", "y", "lst", "n", "q")


# ----------------------------------------------------------------------------- 11. structure


@pytest.mark.parametrize("mode", MODES)
async def test_new_moved_and_deleted_cells(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "k = 3"),
            ("d", "m = k * 2"),
            ("p", "v = 1"),
            ("q", "v = 2"),
            ("r", "u = v"),
        ],
    )
    await nb.start()

    nb.insert(7, "n", "extra = 7")
    assert kinds(await nb.plan()) == {"n": {"never_run"}}
    await execute_exactly(nb, ["n"])

    # an independent cell moved: a fresh run gives every name the same value
    nb.move("n", 0)
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.blocked == []

    # a consumer moved above its producer would fail in a fresh run
    nb.move("d", nb.order().index("c"))
    plan = await nb.plan()
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {"d": {"missing_producer"}}
    missing = reason(plan, "d", "missing_producer")
    assert (missing["cells"], missing["symbols"]) == (["c"], ["k"])
    nb.move("d", nb.order().index("c") + 1)  # and back
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.blocked == []

    # two definers of v swapped: the reader now reads the other one
    nb.move("q", nb.order().index("p"))
    plan = await nb.plan()
    # p now has the last word on v; r reads v from p (moved) and p re-runs (upstream)
    assert kinds(plan) == {"p": {"moved"}, "r": {"moved", "upstream"}}
    moved = reason(plan, "r", "moved")
    assert (sorted(moved["cells"]), moved["symbols"]) == (["p", "q"], ["v"])
    assert (reason(plan, "p", "moved")["cells"], reason(plan, "p", "moved")["symbols"]) == (
        ["q"],
        ["v"],
    )
    up = reason(plan, "r", "upstream")
    assert (up["cells"], up["symbols"]) == (["p"], ["v"])
    await execute_exactly(nb, ["p", "r"])
    await nb.assert_fresh("x", "y", "k", "m", "v", "u", "extra")
    assert (await nb.values("v", "u")) == ["1", "1"]

    # the producer deleted: its reader is blocked, not planned
    nb.delete("a")
    plan = await nb.plan()
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {"b": {"missing_producer"}}
    missing = reason(plan, "b", "missing_producer")
    assert (missing["cells"], missing["symbols"]) == (["a"], ["x"])
    res = await nb.execute_plan()
    assert res.batch is None and res.ok
    assert blocked_kinds(res) == {"b": {"missing_producer"}}


# ----------------------------------------------------------------------------- 12. execute


@pytest.mark.parametrize("mode", MODES)
async def test_execute_skips_dependents_of_a_failure(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "z = y + 1"),
            ("d", "k = 5"),
            ("e", "j = k + 1"),
        ],
    )
    await nb.start()
    nb.edit("b", "y = x / 0")
    nb.edit("d", "k = 6")
    plan = await nb.plan()
    assert kinds(plan) == {
        "b": {"source_changed"},
        "c": {"upstream"},
        "d": {"source_changed"},
        "e": {"upstream"},
    }
    res = await nb.execute_plan()
    assert not res.ok
    assert ran(res) == ["b", "d", "e"]
    states = {r.cell_id: r.state for r in res.batch.results}
    assert states == {"b": "failed", "d": "ok", "e": "ok"}
    assert [(s.cell_id, "b" in s.reason) for s in res.batch.skipped] == [("c", True)]

    # b would fail the same way again: blocked, not re-run, and so is c, which reads its y
    plan = await nb.plan()
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {"b": {"failed"}, "c": {"missing_producer"}}
    assert "would again" in reason(plan, "b", "failed")["message"]
    assert reason(plan, "c", "missing_producer")["cells"] == ["b"]
    nb.edit("b", "y = x * 3")
    await execute_exactly(nb, ["b", "c"])
    await nb.assert_fresh("x", "y", "z", "k", "j")


# ----------------------------------------------------------------------------- 13. restart


@pytest.mark.parametrize("mode", MODES)
async def test_kernel_restart_replans_everything(make_nb: Any, mode: str, engine: Engine) -> None:
    nb = make_nb(
        mode,
        [("h", "md:# Title"), ("a", "x = 1"), ("b", "y = x + 1"), ("c", "k = 3")],
    )
    await nb.start()
    session = engine.session(nb.kernel_id)
    await engine.restart_kernel(session, reason="test")
    plan = await nb.plan()
    assert set(kinds(plan)) == {"a", "b", "c"}
    for cid, found in kinds(plan).items():
        assert "kernel_restarted" in found, (cid, found)
        assert found <= {"kernel_restarted", "upstream"}, (cid, found)
    await execute_exactly(nb, ["a", "b", "c"])
    await nb.scratch(_KERNEL_VALUES)  # the value helper went with the old process
    await nb.assert_fresh("x", "y", "k")
