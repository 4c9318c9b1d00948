"""run-stale, watch, inspect and namespace as a person at a shell uses them.

Real CLI, daemon and kernel.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import make_project, run_cli, stop_daemon

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("cli-plan") / "p", example=False)
    (root / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (root / "extra.txt").write_text("v1")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import pandas as pd\nraw = pd.read_csv('data.csv')", id="load"),
        nbformat.v4.new_code_cell("total = int(raw['a'].sum())", id="total"),
        nbformat.v4.new_code_cell("double = total * 2\nprint(double)", id="double"),
        nbformat.v4.new_code_cell("other = 1", id="other"),
    ]
    nbformat.write(nb, root / "nb.ipynb")
    res = run_cli("start", "nb.ipynb", cwd=root)
    assert res.returncode == 0, res.stderr
    yield root
    stop_daemon(root)


def edit(path: Path, cell_id: str, source: str) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.id == cell_id:
            cell.source = source
    nbformat.write(nb, path)


def test_plan_table_json_and_execute(project):
    path = project / "nb.ipynb"
    res = run_cli("run-stale", cwd=project)
    assert res.returncode == 0 and "nothing is stale" in res.stdout
    edit(path, "total", "total = int(raw['a'].sum()) + 1")
    table = run_cli("run-stale", cwd=project)
    assert table.returncode == 0
    assert "source_changed" in table.stdout and "uses total from cell 1" in table.stdout
    plan = json.loads(run_cli("run-stale", "--json", cwd=project).stdout)
    assert [e["cell_id"] for e in plan["stale"]] == ["total", "double"]
    assert {"cell_id", "index", "reasons", "produces"} <= set(plan["stale"][0])
    assert (
        plan["stale"][1]["reasons"][0]["kind"] == "upstream"
        and "total" in plan["stale"][1]["reasons"][0]["symbols"]
    )
    assert {f["cell_id"] for f in plan["fresh"]} == {"load", "other"}
    status = json.loads(run_cli("status", "--json", cwd=project).stdout)
    states = {c["cell_id"]: c["state"] for c in status["kernels"][0]["cells"]}
    assert states == {"load": "ok", "total": "stale", "double": "stale", "other": "ok"}
    done = run_cli("run-stale", "--execute", "--json", cwd=project)
    assert done.returncode == 0
    ran = [r["cell_id"] for r in json.loads(done.stdout)["batch"]["results"]]
    assert ran == ["total", "double"]
    assert run_cli("exec", "print(double)", cwd=project).stdout.strip() == "10"
    assert json.loads(run_cli("run-stale", "--json", cwd=project).stdout)["stale"] == []


def test_execute_exit_code_when_a_cell_fails(project):
    path = project / "nb.ipynb"
    edit(path, "total", "total = undefined_name")
    res = run_cli("run-stale", "--execute", cwd=project)
    assert res.returncode == 1
    assert "NameError" in res.stdout and "skipped cell 2 (double)" in res.stdout
    edit(path, "total", "total = int(raw['a'].sum())")
    assert run_cli("run-stale", "--execute", cwd=project).returncode == 0


def test_data_file_change_and_watch(project):
    time.sleep(0.01)
    (project / "data.csv").write_text("a,b\n10,2\n30,4\n")
    plan = json.loads(run_cli("run-stale", "--json", cwd=project).stdout)
    first = plan["stale"][0]
    assert first["cell_id"] == "load" and first["reasons"][0]["kind"] == "file_changed"
    assert first["reasons"][0]["path"].endswith("data.csv")
    assert run_cli("run-stale", "--execute", cwd=project).returncode == 0
    res = run_cli("watch", "extra.txt", cwd=project)
    assert res.returncode == 0 and "watching" in res.stdout
    (project / "extra.txt").write_text("v2 changed")
    plan = json.loads(run_cli("run-stale", "--json", cwd=project).stdout)
    assert plan["stale"] and all(
        any(r["kind"] == "file_changed" for r in e["reasons"]) for e in plan["stale"][:1]
    )
    assert run_cli("run-stale", "--execute", cwd=project).returncode == 0


def test_inspect_and_namespace(project):
    res = run_cli("inspect", "raw", "--json", cwd=project)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["shape"] == [2, 2] and summary["cell"] == "load"
    assert "\n" not in res.stdout.strip()  # compact JSON
    text = run_cli("inspect", 'raw["a"]', cwd=project)
    assert text.returncode == 0 and "int64" in text.stdout
    bad = run_cli("inspect", "totl", cwd=project)
    assert bad.returncode == 5 and "total" in bad.stderr
    code = (
        "for i in range(150):\n    globals()[f'gv_{i}'] = i\nexec('made_by_exec = 1')\n"
        + "\n".join(f"v_{i} = [{i}]" for i in range(50))
    )
    assert run_cli("exec", code, cwd=project).returncode == 0
    listing = json.loads(run_cli("namespace", "--json", cwd=project).stdout)
    names = {e["name"] for e in listing["entries"]}
    assert {"gv_0", "gv_149", "made_by_exec", "v_49", "raw", "total"} <= names
    assert not any(n.startswith("_") for n in names) and "In" not in names


def test_inspect_10m_rows_is_bounded(project):
    code = (
        "import numpy as np\nbig = pd.DataFrame({'x': np.arange(10_000_000), 'y': "
        "np.ones(10_000_000), 'k': np.zeros(10_000_000, dtype='int8')})"
    )
    assert run_cli("exec", code, cwd=project, timeout=300).returncode == 0
    res = run_cli("inspect", "big", "--json", cwd=project)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.encode()) < 4096
    assert json.loads(res.stdout)["shape"] == [10_000_000, 3]
    assert run_cli("exec", "del big", cwd=project).returncode == 0
