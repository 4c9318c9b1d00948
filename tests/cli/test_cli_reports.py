"""What the CLI reports, through the real CLI and daemon: an upgraded notebook said once, notices
that name only this notebook's inputs (shown once), batch counts in one vocabulary, restore after
a restart, and one checkpoint vocabulary everywhere."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import make_project, run_cli, stop_daemon

pytestmark = pytest.mark.kernel

UPGRADED = "upgraded from nbformat 4.4 to 4.5 (cell ids added)"


def old_notebook(path: Path, cells: list[str]) -> Path:
    """An nbformat 4.4 notebook: no cell ids, as Jupyter wrote them before 4.5."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in cells]
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    nbformat.write(nb, path, version=nbformat.NO_CONVERT)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory):
    root = make_project(tmp_path_factory.mktemp("reports") / "p", example=False)
    (root / "a_input.txt").write_text("a1")
    (root / "b_input.txt").write_text("b1")
    (root / "unread.txt").write_text("nobody reads this")
    old_notebook(
        root / "a.ipynb",
        [
            "x = 1",
            "text = open('a_input.txt').read()",
            "y = x + 1",
            "bad = 1 / 0",
            "w = bad + 1",
        ],
    )
    old_notebook(root / "b.ipynb", ["other = open('b_input.txt').read()"])
    yield root
    stop_daemon(root)


@pytest.fixture(scope="module")
def started(project: Path) -> tuple[Path, str]:
    res = run_cli("start", "a.ipynb", cwd=project)
    assert res.returncode == 0, res.stderr
    return project, res.stdout


def test_start_says_once_that_it_upgraded_the_notebook(started: tuple[Path, str]) -> None:
    root, text = started
    assert nbformat.read(root / "a.ipynb", as_version=4).nbformat_minor == 5
    assert text.count(UPGRADED) == 1, text
    # said once: status does not say it again
    assert UPGRADED not in run_cli("status", "a.ipynb", cwd=root).stdout
    # and in JSON, once
    res = run_cli("start", "b.ipynb", "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    notices = json.loads(res.stdout).get("notices") or []
    assert sum(UPGRADED in n for n in notices) == 1, notices
    assert nbformat.read(root / "b.ipynb", as_version=4).nbformat_minor == 5


def _notices(root: Path, notebook: str) -> list[str]:
    res = run_cli("status", notebook, "--json", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    st = json.loads(res.stdout)
    (kernel,) = st["kernels"]
    return list(kernel.get("notices") or [])


def _first_change_notices(root: Path, notebook: str, wait: float = 10) -> list[str]:
    """The notebook's "changed on disk" notices once there are any (each kernel's watcher
    reports on its own time), or none after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    seen: list[str] = []
    while time.monotonic() < deadline and not seen:
        time.sleep(0.3)
        seen = [n for n in _notices(root, notebook) if n.startswith("changed on disk:")]
    return seen


def test_a_change_notice_names_only_this_notebooks_inputs_and_is_shown_once(
    started: tuple[Path, str],
) -> None:
    root, _ = started
    # the two failed cells are stale already: the notice counts only what the change did
    for name in ("a_input.txt", "b_input.txt", "unread.txt"):
        (root / name).write_text(f"{name} changed")
    seen = _first_change_notices(root, "a.ipynb")
    assert seen == [
        "changed on disk: a_input.txt; 1 cell(s) stale because of it (the stale plan says why)"
    ], seen
    assert "b_input.txt" not in seen[0] and "unread.txt" not in seen[0]
    # shown once to the CLI: the next status does not repeat it
    assert not [n for n in _notices(root, "a.ipynb") if n.startswith("changed on disk:")]
    text = run_cli("status", "a.ipynb", cwd=root).stdout
    assert "changed on disk" not in text, text
    # the other notebook's own input is named on the other notebook only
    other = _first_change_notices(root, "b.ipynb")
    assert other and "b_input.txt" in other[0] and "a_input.txt" not in other[0], other
    # nor does the next exec, which takes the pending notices
    res = run_cli("exec", "1 + 1", "-n", "a.ipynb", cwd=root)
    text = res.stdout + res.stderr
    assert "changed on disk" not in text, text


def test_run_stale_execute_counts_agree(started: tuple[Path, str]) -> None:
    root, _ = started
    # bad would fail the same way again, so it is held back with w; edited (as a person does in
    # their editor), it is planned again with w, and fails again
    nb = nbformat.read(root / "a.ipynb", as_version=4)
    assert nb.cells[3].source == "bad = 1 / 0"
    nb.cells[3].source = "bad = 2 / 0"
    nbformat.write(nb, root / "a.ipynb")
    res = run_cli("run-stale", "a.ipynb", "--execute", cwd=root)
    assert res.returncode == 1, res.stderr  # a cell failed
    planned = re.search(r"^planned: (\d+) cell\(s\), in this order:$", res.stdout, re.M)
    tally = re.search(
        r"^(\d+) of (\d+) planned cell\(s\) ran \((\d+) failed\), (\d+) skipped at run time$",
        res.stdout,
        re.M,
    )
    assert planned and tally, res.stdout
    ran, of, failed, skipped = map(int, tally.groups())
    assert int(planned.group(1)) == of == ran + skipped, res.stdout
    # text (a_input.txt changed) and bad ran, bad failed, w was skipped when its turn came
    assert (ran, failed, skipped) == (2, 1, 1), res.stdout
    assert "stale: " not in res.stdout  # executed: the plan is what was planned, not stale


def _reason_kinds(root: Path) -> set[str]:
    plan = json.loads(run_cli("run-stale", "a.ipynb", "--json", cwd=root).stdout)
    return {r["kind"] for e in plan["stale"] + plan["blocked"] for r in e["reasons"]}


def test_restore_after_restart_brings_the_cells_back_or_says_why_not(
    started: tuple[Path, str],
) -> None:
    root, _ = started
    assert run_cli("checkpoint", "whole", "-n", "a.ipynb", cwd=root).returncode == 0
    restarted = run_cli("restart", "a.ipynb", cwd=root)
    assert restarted.returncode == 0
    assert "warmed" not in restarted.stdout, "the new process ran no cell: no warm-up to report"
    assert "kernel_restarted" in _reason_kinds(root)
    res = run_cli("restore", "whole", "-n", "a.ipynb", "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "still_lost" not in json.loads(res.stdout)
    assert "kernel_restarted" not in _reason_kinds(root)
    assert run_cli("exec", "print(x, y)", "-n", "a.ipynb", cwd=root).stdout.split() == ["1", "2"]

    # a value that cannot be saved: the cells stay lost, and the restore says why
    assert run_cli("exec", "gen = (i for i in range(3))", "-n", "a.ipynb", cwd=root).returncode == 0
    assert run_cli("checkpoint", "partial", "-n", "a.ipynb", cwd=root).returncode == 0
    assert run_cli("restart", "a.ipynb", cwd=root).returncode == 0
    res = run_cli("restore", "partial", "-n", "a.ipynb", cwd=root)
    assert res.returncode == 0, res.stderr
    assert re.search(
        r"\d+ cell\(s\) stay in the stale plan as lost in the kernel restart: "
        r"not every value came back \(gen\)",
        res.stdout,
    ), res.stdout
    assert "kernel_restarted" in _reason_kinds(root)


def test_checkpoint_lines_use_one_vocabulary(started: tuple[Path, str]) -> None:
    root, _ = started
    run_cli("run-stale", "a.ipynb", "--execute", cwd=root)  # a warm kernel again
    status = run_cli("status", "a.ipynb", cwd=root).stdout
    (line,) = [ln.strip() for ln in status.splitlines() if ln.strip().startswith("checkpoints: ")]
    summary = line.removeprefix("checkpoints: ")
    listing = run_cli("checkpoints", "-n", "a.ipynb", cwd=root).stdout.splitlines()
    namespace = run_cli("namespace", "-n", "a.ipynb", cwd=root).stdout
    assert listing[1].strip() == summary, (listing, summary)
    assert f"note: checkpoints: {summary}" in namespace, namespace
    for text in (status, "\n".join(listing), namespace):
        assert "cheap" not in text and " 0 B;" not in text and " — 0 B" not in text, text
    # each cell's line says one of the summary's states
    states = ("checkpointed", "re-run on restore (quicker than loading)", "not restorable")
    cells = [ln for ln in listing if ln.startswith("  cell ")]
    assert cells and all(ln.split(": ", 1)[1].startswith(states) for ln in cells), cells
