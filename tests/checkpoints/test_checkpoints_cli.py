"""Checkpoints through the real daemon and CLI: SIGKILL of the daemon, then ``start`` restores
the fresh cells and runs only the rest; ``checkpoint``/``restore`` roll a DataFrame back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import nbformat
import pytest

from ipykeep.client.connection import find_daemon, pid_alive
from tests.conftest import make_project, run_cli, stop_daemon
from tests.staleness.test_staleness_acceptance import Nb

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

CELLS = [
    ("load", 'import time\nimport pandas as pd\ntime.sleep(1.0)\ndf = pd.read_csv("data.csv")'),
    ("mut", 'df["z"] = df["x"] * 10'),
    ("other", "base = {'k': list(range(5))}"),
    ("tot", 'total = int(df["z"].sum()) + len(base["k"])'),
]


def write_nb(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    for cid, src in CELLS:
        cell = nbformat.v4.new_code_cell(src)
        cell["id"] = cid
        nb.cells.append(cell)
    nbformat.write(nb, path)


def kernel_value(root: Path, expr: str) -> str:
    res = run_cli("exec", f"print(repr({expr}))", cwd=root)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def wait_for_manifests(root: Path, n: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if len(list((root / ".ipykeep" / "checkpoints" / "notebooks").glob("*/cells/*.json"))) >= n:
            return
        time.sleep(0.1)
    raise AssertionError("cell checkpoints were not written")


@pytest.mark.posix
def test_sigkill_daemon_then_start_restores_and_rollback(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", example=False)
    (root / "data.csv").write_text("x,y\n1,2\n3,4\n")
    write_nb(root / "nb.ipynb")
    try:
        assert run_cli("start", "nb.ipynb", cwd=root).returncode == 0
        wait_for_manifests(root, len(CELLS))
        listing = json.loads(run_cli("checkpoints", "--json", cwd=root).stdout)
        assert (
            listing["enabled"]
            and all(c["restorable"] for c in listing["cells"])
            and listing["store_bytes"] > 0
        )

        # named checkpoint and rollback of a mutated DataFrame
        res = run_cli("checkpoint", "before", cwd=root)
        assert res.returncode == 0 and "checkpoint before:" in res.stdout, res.stderr
        original = kernel_value(root, "df.to_dict()")
        assert (
            run_cli(
                "exec",
                'df.loc[0, "x"] = -5\ndf.drop(columns=["y"], inplace=True)\nscratch = 1',
                cwd=root,
            ).returncode
            == 0
        )
        assert kernel_value(root, "df.to_dict()") != original
        res = run_cli("restore", "before", cwd=root)
        assert res.returncode == 0 and "deleted scratch" in res.stdout, res.stdout + res.stderr
        assert kernel_value(root, "df.to_dict()") == original
        missing = run_cli("restore", "nope", cwd=root)
        assert (
            missing.returncode == 5
            and "no checkpoint named 'nope'" in missing.stderr
            and "known: before" in missing.stderr
        )

        # the daemon is SIGKILLed (its kernel dies with it); the data file is edited
        desc = find_daemon(root)
        assert desc is not None
        os.kill(desc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(desc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        (root / "other_input.txt").write_text("unrelated")
        res = run_cli("start", "nb.ipynb", "--json", cwd=root)
        assert res.returncode == 0, res.stderr
        notices = " ".join(json.loads(res.stdout).get("notices") or [])
        # the cells after the slow load take microseconds: cheap, they re-run instead of being
        # saved (checkpoint_min_cell_s), "mut" and "tot" after the loaded frame
        assert "restored 1 cell(s)" in notices and ": 0;" in notices, notices
        assert (
            "3 re-run on restore (quicker than loading): 1, 2, 3" in notices
            and "0 cell(s) must re-run" in notices
        ), notices
        nb = Nb(None, root, "static")  # type: ignore[arg-type]
        exprs = ["df.to_dict()", "total", "base"]
        fresh = asyncio.run(nb.fresh_values(*exprs))
        assert [kernel_value(root, e) for e in exprs] == fresh
    finally:
        stop_daemon(root)


def test_stop_with_a_cell_still_running_takes_the_last_checkpoints_and_does_not_wait_for_it(
    tmp_path: Path,
) -> None:
    """The close-time flush of the checkpoint writer asks on a subshell: a cell that never ends
    on the main shell used to hold ``stop`` for the flush's whole timeout (20 s)."""
    root = make_project(tmp_path / "p", example=False)
    (root / "data.csv").write_text("x\n1\n2\n")
    write_nb(root / "analysis.ipynb")
    try:
        assert run_cli("start", "analysis.ipynb", cwd=root).returncode == 0
        wait_for_manifests(root, 1)  # the slow load cell is saved
        daemon = find_daemon(root)
        assert daemon is not None
        res = run_cli("exec", "--no-wait", "import time; time.sleep(600)", cwd=root)
        assert res.returncode == 0, res.stderr
        assert run_cli("stop", "--all", cwd=root).returncode == 0
        deadline = time.monotonic() + 60
        while pid_alive(daemon.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(daemon.pid)
        # the flush was answered (on a subshell), not left to time out behind the cell
        log = (root / ".ipykeep" / "run" / "daemon.log").read_text()
        assert "flush did not answer" not in log, log[-2000:]
    finally:
        stop_daemon(root)
