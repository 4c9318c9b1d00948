"""Cells that raise, on real kernels: a failed run is judged by what it did before raising (a
failed ``t[1] = 4`` on a tuple changed nothing), a cell that failed and would fail again on the
same source, inputs and packages is reported, not re-run with its producers, and it runs again
once packages are added to the kernel's environment (helpers from test_staleness_acceptance)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ipykeep.daemon.composition import compose
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project
from tests.environments.envs import make_venv
from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    engine,
    kinds,
    make_nb,
    ran,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

TUPLE_CELLS = [
    ("t", "t = (1, 2, 3)"),
    ("item", "t[1] = 4"),
    ("append", "t.append(4)"),
    ("u", "u = t[0] + 1"),
]


def tag_raises(path: Path, *cids: str) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell["id"] in cids:
            cell["metadata"]["tags"] = ["raises-exception"]
    nbformat.write(nb, path)


def executed(res: Any) -> list[str]:
    """The cells an execute ran (none: it had nothing to run)."""
    return [] if res.batch is None else ran(res)


def blocked_reasons(res: Any) -> dict[str, dict[str, str]]:
    return {e["cell_id"]: {r["kind"]: r["message"] for r in e["reasons"]} for e in res.blocked}


@pytest.mark.parametrize("mode", MODES)
async def test_a_tagged_failed_item_assignment_on_a_tuple_plans_nothing(
    make_nb: Any, mode: str
) -> None:
    nb = make_nb(mode, TUPLE_CELLS)
    tag_raises(nb.path, "item", "append")
    await nb.start()
    plan = await nb.plan()
    assert (kinds(plan), plan.conditional, plan.blocked) == ({}, [], [])
    nb.edit("u", "u = t[0] + 2")
    res = await nb.execute_plan()
    assert ran(res) == ["u"]
    after = await nb.plan()
    assert (kinds(after), after.conditional, after.blocked) == ({}, [], [])
    # a fresh run goes on past a cell tagged raises-exception (nbval, nbsphinx)
    assert await nb.values("t", "u") == ["(1, 2, 3)", "3"]


@pytest.mark.parametrize("mode", MODES)
async def test_untagged_failing_cells_are_reported_not_re_run(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, TUPLE_CELLS)
    await nb.start()
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.conditional == []
    reasons = blocked_reasons(plan)
    assert set(reasons) == {"item", "append"}
    assert "TypeError" in reasons["item"]["failed"]
    assert "would again" in reasons["item"]["failed"]
    res = await nb.execute_plan()
    assert executed(res) == []


FAILING_IMPORT = [
    ("slow", "import time\ntime.sleep(0.2); y = [1, 2]"),
    ("imp", "import nosuchmodule_zz; z = len(y)"),
    ("grow", "y = y + [3]"),
]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_import_does_not_drag_its_producer(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, FAILING_IMPORT)
    await nb.start()
    plan = await nb.plan()
    assert kinds(plan) == {} and plan.conditional == []
    assert set(blocked_reasons(plan)) == {"imp"}
    assert "ModuleNotFoundError" in blocked_reasons(plan)["imp"]["failed"]
    res = await nb.execute_plan()
    assert executed(res) == []
    # an edit of an input it reads makes it run again, with what it needs restored
    nb.edit("slow", "import time\ntime.sleep(0.2); y = [1, 2, 5]")
    plan = await nb.plan()
    assert "slow" in kinds(plan) and "grow" in kinds(plan)
    res = await nb.execute_plan()
    assert "slow" in ran(res) and "imp" in ran(res)
    after = await nb.plan()
    assert kinds(after) == {} and after.conditional == []
    assert set(blocked_reasons(after)) == {"imp"}
    assert await nb.values("y") == ["[1, 2, 5, 3]"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_never_run_reader_of_a_deleted_producer_is_blocked(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, [("a", "a = 1"), ("b", "b = a + 1")])
    await nb.start()
    nb.delete("a")
    nb.insert(1, "c", "c = a * 3")
    plan = await nb.plan()
    assert kinds(plan) == {}
    assert set(blocked_reasons(plan)) == {"b", "c"}
    res = await nb.execute_plan()
    assert executed(res) == []
    assert kinds(await nb.plan()) == {}


def local_wheel(directory: Path, module: str, code: str) -> Path:
    """A pure-Python wheel holding one module, made by hand (no build backend, no network)."""
    dist = f"{module}-1.0.dist-info"
    files = {
        f"{module}.py": code,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = directory / f"{module}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


@pytest.mark.posix
async def test_adding_the_missing_package_runs_the_failed_cell(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", example=False)
    make_venv(root / ".venv", "ipykernel")
    wheel = local_wheel(tmp_path, "nosuchmodule_zz", "ANSWER = 42\n")
    nb = nbformat.v4.new_notebook()
    for cid, src in FAILING_IMPORT:
        cell = nbformat.v4.new_code_cell(src)
        cell["id"] = cid
        nb.cells.append(cell)
    nbformat.write(nb, root / "n.ipynb")
    comp = compose(ProjectPaths(root), Config(idle_timeout=0))
    try:
        rec = await comp.engine.create_kernel(notebook=str(root / "n.ipynb"))
        kid = rec.kernel_id
        plan = await comp.staleness.run_stale(kernel_id=kid)
        assert plan.stale == [] and [e["cell_id"] for e in plan.blocked] == ["imp"]
        res = await comp.environments.add_packages([str(wheel)], kernel_id=kid)
        assert [c.name for c in res.changed] == ["nosuchmodule-zz"] or res.changed
        plan = await comp.staleness.run_stale(kernel_id=kid)
        # it reads y as the first cell left it: that cell re-runs first, the later one after
        assert kinds(plan) == {"slow": {"restores"}, "imp": {"failed"}, "grow": {"restores"}}
        res = await comp.staleness.run_stale(kernel_id=kid, execute=True)
        assert ran(res) == ["slow", "imp", "grow"] and res.ok
        check = await comp.engine.execute("print(z, y, nosuchmodule_zz.ANSWER)", kernel_id=kid)
        assert check.output.text.strip() == "2 [1, 2, 3] 42"
        after = await comp.staleness.run_stale(kernel_id=kid)
        assert (after.stale, after.conditional, after.blocked) == ([], [], [])
    finally:
        await comp.engine.shutdown()
