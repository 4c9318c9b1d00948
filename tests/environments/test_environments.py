"""Kernels run in the project's environment; packages are added to it; scripts import by path.

Real virtual environments (uv, packages from PyPI), real kernels, the in-process engine with
every service composed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from ipykeep.api.errors import InstallError, KernelStartError
from ipykeep.daemon.composition import Composition, compose
from ipykeep.environments import installer
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.scaffold.doctor import Status, run_doctor
from tests.conftest import make_project
from tests.environments.envs import make_venv

# environments are laid out as on POSIX (bin/python), as discovery expects them
pytestmark = [pytest.mark.kernel, pytest.mark.posix]

TOOL = """\
# /// script
# dependencies = ["six"]
# ///
import six

def answer():
    return 42
"""
CELLS = (
    'tool = import_path("scripts/tool.py")\nimport iniconfig',
    "x = tool.answer()",
    "y = x + 1",
)
PYPROJECT = """\
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = []

[tool.uv]
"""


def composed(root: Path, **config: Any) -> Composition:
    return compose(ProjectPaths(root), Config(idle_timeout=0, **config))


async def out(comp: Composition, kid: str, code: str) -> str:
    rec = await comp.engine.execute(code, kernel_id=kid)
    assert rec.state == "ok", rec
    return rec.output.text.strip()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def venv_kernel(tmp_path_factory):
    """A uv project with its own .venv (ipykernel, iniconfig 2.0.0) and a notebook."""
    root = make_project(tmp_path_factory.mktemp("envs") / "p", example=False)
    (root / "pyproject.toml").write_text(PYPROJECT)
    make_venv(root / ".venv", "ipykernel", "iniconfig==2.0.0")
    (root / "scripts").mkdir()
    (root / "scripts" / "tool.py").write_text(TOOL)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbformat.write(nb, root / "n.ipynb")
    comp = composed(root)
    rec = await comp.engine.create_kernel(notebook=str(root / "n.ipynb"))
    yield comp, rec.kernel_id, root
    await comp.engine.shutdown()


async def test_the_kernel_runs_in_the_project_venv_without_a_setting(venv_kernel) -> None:
    comp, kid, root = venv_kernel
    assert await out(comp, kid, "import sys; print(sys.prefix)") == str(root / ".venv")
    env = comp.engine.kernel_record(comp.engine.session(kid)).environment
    assert env is not None
    assert (env.kind, env.prefix, env.uv_project) == ("project_venv", str(root / ".venv"), True)
    report = {c.name: c for c in run_doctor(root, home=root / "home").checks}
    assert report["kernel environment"].status is Status.ok
    assert str(root / ".venv") in report["kernel environment"].detail
    assert str(root / ".venv" / "bin" / "python") in report["kernel python"].detail


async def test_import_path_installs_inline_dependencies_and_is_tracked(venv_kernel) -> None:
    comp, kid, root = venv_kernel
    batch = await comp.engine.run_cells(["0", "1", "2"], kernel_id=kid)
    assert batch.ok, batch
    assert await out(comp, kid, "import six; print(six.__file__.startswith(sys.prefix), y)") == (
        "True 43"
    )
    # the same module again; reload re-runs the file
    assert await out(comp, kid, 'print(import_path("scripts/tool.py") is tool)') == "True"
    assert await out(comp, kid, "import importlib; print(importlib.reload(tool) is tool)") == "True"
    assert "import_path" not in await out(comp, kid, "print(sorted(globals()))")
    events = [
        e
        for e in comp.engine.session(kid).archive.entries()
        if e["type"] == "event" and e["event"] == "packages_installed"
    ]
    assert any(c["name"] == "six" and c["before"] is None for e in events for c in e["changed"])
    # editing the script makes its importer stale, naming the file, and its readers after it
    (root / "scripts" / "tool.py").write_text(TOOL.replace("42", "41"))
    plan = await comp.staleness.run_stale(kernel_id=kid)
    stale = {e["index"]: e for e in plan.stale}
    assert sorted(stale) == [0, 1, 2]
    reasons = [r for r in stale[0]["reasons"] if r["kind"] == "file_changed"]
    assert reasons and reasons[0]["path"].endswith("scripts/tool.py"), stale[0]
    ran = await comp.staleness.run_stale(kernel_id=kid, execute=True)
    assert ran.ok, ran
    assert await out(comp, kid, "print(y)") == "42"
    assert (await comp.staleness.run_stale(kernel_id=kid)).stale == []


async def test_add_makes_a_package_importable_without_a_restart(venv_kernel) -> None:
    comp, kid, root = venv_kernel
    before = (root / "pyproject.toml").read_text()
    res = await comp.environments.add_packages(["tabulate"], kernel_id=kid)
    assert res.installer == "uv" and res.python == str(root / ".venv" / "bin" / "python")
    (change,) = [c for c in res.changed if c.name == "tabulate"]
    assert change.before is None and change.after
    assert res.restart_needed == [] and res.recorded is None
    assert "no restart needed" in res.message
    assert await out(comp, kid, "import tabulate; print(tabulate.__version__)") == change.after
    assert res.log and Path(res.log).is_file() and "tabulate" in Path(res.log).read_text()
    assert (root / "pyproject.toml").read_text() == before


async def test_upgrading_an_imported_package_says_restart_and_names_its_cells(venv_kernel) -> None:
    comp, kid, _ = venv_kernel
    assert await out(comp, kid, "print(iniconfig.__name__)") == "iniconfig"  # imported by cell 0
    res = await comp.environments.add_packages(["iniconfig==2.1.0"], kernel_id=kid)
    assert [(c.name, c.before, c.after) for c in res.changed] == [("iniconfig", "2.0.0", "2.1.0")]
    assert res.restart_needed == ["iniconfig"]
    cell0 = nbformat.read(comp.engine.session(kid).notebook, as_version=4).cells[0].id
    assert res.stale_cells == [cell0]
    assert "restart" in res.message
    record = comp.engine.kernel_record(comp.engine.session(kid))
    assert any("iniconfig" in n and "restart" in n for n in record.notices or [])


async def test_record_adds_to_pyproject_with_uv(venv_kernel) -> None:
    comp, kid, root = venv_kernel
    res = await comp.environments.add_packages(["six"], record=True, kernel_id=kid)
    assert res.recorded == "pyproject.toml"
    assert "six" in (root / "pyproject.toml").read_text()
    assert (root / "uv.lock").is_file()


@pytest.mark.parametrize(
    ("packages", "index_url", "said"),
    [
        (["ipykeep-no-such-package-4b1c"], None, "ipykeep-no-such-package-4b1c"),
        (["colorama"], "http://127.0.0.1:9/simple", "127.0.0.1:9"),
        (["--upgrade"], None, "not a requirement"),
    ],
)
async def test_bad_input_is_a_clear_error_and_records_nothing(
    venv_kernel, packages: list[str], index_url: str | None, said: str
) -> None:
    comp, kid, root = venv_kernel
    before = (root / "pyproject.toml").read_bytes()
    lock = (root / "uv.lock").read_bytes() if (root / "uv.lock").exists() else None
    with pytest.raises(InstallError) as err:
        await comp.environments.add_packages(
            packages,
            record=True,
            index_url=index_url,
            kernel_id=kid,
        )
    assert said in str(err.value), err.value
    assert (root / "pyproject.toml").read_bytes() == before
    assert ((root / "uv.lock").read_bytes() if lock is not None else None) == lock
    assert await out(comp, kid, "print(1 + 1)") == "2"


async def test_a_venv_without_ipykernel_gives_the_exact_fix_or_gets_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "bare", example=False)
    make_venv(root / ".venv")
    with pytest.raises(KernelStartError) as err:
        await composed(root).engine.create_kernel()
    fix = f"uv pip install --python {root}/.venv/bin/python ipykernel"
    assert fix in err.value.hint, err.value.hint
    report = {c.name: c for c in run_doctor(root, home=root / "home").checks}
    assert report["kernel environment"].status is Status.fail
    assert fix in report["kernel environment"].fix
    comp = composed(root, install_kernel=True)
    try:
        rec = await comp.engine.create_kernel()
        assert await out(comp, rec.kernel_id, "import sys; print(sys.prefix)") == str(
            root / ".venv"
        )
    finally:
        await comp.engine.shutdown()


async def test_a_system_or_broken_interpreter_is_refused_with_the_reason(tmp_path: Path) -> None:
    system = "/usr/bin/python3"
    if not Path(system).is_file() or sys.prefix == "/usr":
        pytest.skip("needs a distribution's system Python beside a virtual environment")
    result = await installer.install_with(system, ["six"], tmp_path / "logs")
    assert result["ok"] is False and result["error"] == "refused"
    assert "system interpreter" in result["message"]
    broken = await installer.install_with(str(tmp_path / "gone" / "python"), ["six"], tmp_path)
    assert broken["ok"] is False and "cannot be run" in broken["message"]


async def test_a_failed_record_leaves_pyproject_as_it_was(venv_kernel) -> None:
    comp, kid, root = venv_kernel
    # a [tool.uv] table and no [project]: uv installs, but `uv add` has no project to add to
    (root / "pyproject.toml").write_text("[tool.uv]\n")
    before = (root / "pyproject.toml").read_bytes(), (root / "uv.lock").read_bytes()
    with pytest.raises(InstallError) as err:
        await comp.environments.add_packages(["colorama"], record=True, kernel_id=kid)
    assert "installed but could not be recorded" in err.value.message
    assert ((root / "pyproject.toml").read_bytes(), (root / "uv.lock").read_bytes()) == before
    assert await out(comp, kid, "import colorama; print('ok')") == "ok"
    (event,) = [
        e
        for e in comp.engine.session(kid).archive.entries()
        if e["type"] == "event" and "colorama" in e.get("requirements", [])
    ]
    assert event["recorded"] is None and [c["name"] for c in event["changed"]] == ["colorama"]
