"""Where a kernel keeps its input: in memory unless IPython's history database is asked for."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import nbformat
import pytest

from ipykeep.daemon.composition import compose
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

pytestmark = pytest.mark.kernel

HIST_FILE = "print(get_ipython().history_manager.hist_file)"


async def _hist_file_and_history(root: Path, config: Config) -> tuple[str, str]:
    engine = compose(ProjectPaths(root), config).engine
    try:
        kid = (await engine.create_kernel(notebook=str(root / "n.ipynb"))).kernel_id
        assert (await engine.execute("marker_value = 6 * 7", kernel_id=kid)).state == "ok"
        hist = await engine.execute(HIST_FILE, kernel_id=kid)
        # the kernel's own history still holds its input (In, %history)
        listed = await engine.execute("%history -n", kernel_id=kid)
        return hist.output.text.strip(), listed.output.text
    finally:
        await engine.shutdown()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # kernels inherit the daemon's environment: IPython's database goes to this test's profile
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    root = make_project(tmp_path / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("base = 1")]
    nbformat.write(nb, root / "n.ipynb")
    return root


async def test_input_stays_in_memory_by_default(project: Path, tmp_path: Path) -> None:
    hist_file, listed = await _hist_file_and_history(
        project, Config(idle_timeout=0, prestart_kernels=0)
    )
    assert hist_file == ":memory:"
    assert "marker_value = 6 * 7" in listed
    assert not list((tmp_path / "ipython").rglob("history.sqlite"))


async def test_ipython_history_keeps_input_in_the_profiles_database(
    project: Path, tmp_path: Path
) -> None:
    hist_file, listed = await _hist_file_and_history(
        project, Config(idle_timeout=0, prestart_kernels=0, ipython_history=True)
    )
    assert Path(hist_file).name == "history.sqlite"
    assert Path(hist_file).is_relative_to(tmp_path / "ipython")
    assert "marker_value = 6 * 7" in listed
    with sqlite3.connect(hist_file) as db:
        sources = [row[0] for row in db.execute("SELECT source FROM history")]
    assert "marker_value = 6 * 7" in sources
