"""Values whose pickling crashes or hangs, against a real daemon and kernel: the background
checkpoint costs the value, never the kernel, and a kernel lost anyway is reported."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ipykeep.client.checkpoint_words import NOT_RESTORABLE
from ipykeep.client.connection import DaemonClient
from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import STATIC, kernel_pid, start_project, wait_until, write_notebook

pytestmark = pytest.mark.kernel

BUDGET_S = 3
ENV = {**STATIC, "IPYKEEP_CHECKPOINT_MIN_CELL_S": "0", "IPYKEEP_CHECKPOINT_SNAPSHOT_BUDGET_S": "3"}

CELLS = [
    # c0: pickling ``boom`` ends the process that pickles it
    "import os\nclass Boom:\n    def __reduce__(self):\n        os._exit(3)\nboom = Boom()\nx = 41",
    # c1: pickling ``hang`` never ends
    "import time\n"
    "class Hang:\n"
    "    def __reduce__(self):\n"
    "        time.sleep(3600)\n"
    "hang = Hang()\n"
    "y = 1",
]


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, DaemonClient]]:
    root = tmp_path_factory.mktemp("ckpt-faults") / "p"
    client = start_project(root, ["z = 0"], env=ENV)
    write_notebook(root / "nb.ipynb", CELLS)  # after the warm-up: nothing runs at start
    yield root, client
    stop_daemon(root)


def _cell(client: DaemonClient, cell_id: str) -> dict:
    listing = client.call("checkpoints")
    return next(c for c in listing["cells"] if c["cell_id"] == cell_id)


def _value(client: DaemonClient, expr: str) -> str:
    rec = client.call("execute", code=expr)
    assert rec["state"] == "ok", rec
    return str(rec["output"]["text"]).strip()


def _checkpoint_children(pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(pid).children() if p.status() != psutil.STATUS_ZOMBIE]


def test_a_value_whose_pickling_ends_the_process_costs_its_checkpoint_not_the_kernel(proj):
    root, client = proj
    pid = kernel_pid(client)
    res = run_cli("run", "c0", cwd=root, env=ENV)
    assert res.returncode == 0, res.stdout + res.stderr
    assert kernel_pid(client) == pid
    assert _value(client, "x + 1") == "42"  # the kernel, and its state, are still there
    info = _cell(client, "c0")
    assert not info["restorable"]
    assert "ended the process that pickled it (exit status 3)" in info["failed"]["boom"]
    status = run_cli("status", cwd=root, env=ENV)
    assert f"{NOT_RESTORABLE}: cell 0" in status.stdout, status.stdout


def test_a_value_whose_pickling_hangs_is_stopped_at_the_budget(proj):
    root, client = proj
    pid = kernel_pid(client)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(r=run_cli("run", "c1", cwd=root, env=ENV)))
    runner.start()
    runner.join(BUDGET_S * 10)
    assert not runner.is_alive(), "the run stayed blocked past the snapshot budget"
    assert box["r"].returncode == 0, box["r"].stderr
    # the next call is not blocked, the kernel is not "busy", no pickling process is left
    assert _value(client, "y + 1") == "2"
    (kernel,) = client.call("list_kernels")
    assert kernel["state"] == "idle" and kernel_pid(client) == pid
    assert wait_until(lambda: not _checkpoint_children(pid), 10)
    why = _cell(client, "c1")["failed"]["hang"]
    assert "longer than the snapshot time budget (3 s)" in why
    # the same object is not tried again: a named checkpoint of every variable skips it
    named = client.call("checkpoint", name="after-hang")
    assert "not tried again" in named["failed"]["hang"]
    assert "x" in named["values"]


def test_a_kernel_lost_after_its_last_cell_makes_run_fail(tmp_path):
    # pickling in the kernel itself (as where os.fork does not exist): the crash reaches it
    env = {**ENV, "IPYKEEP_CHECKPOINT_PICKLE_IN": "kernel"}
    root = tmp_path / "p"
    start_project(root, ["z = 0"], env=env)
    try:
        write_notebook(root / "nb.ipynb", CELLS)
        res = run_cli("run", "c0", cwd=root, env=env)
        assert res.returncode == 7, res.stdout + res.stderr
        assert "the kernel died" in res.stderr
    finally:
        stop_daemon(root)


def test_a_full_checkpoint_store_is_reported_not_claimed(tmp_path: Path) -> None:
    """The store on a 3 MB filesystem, an 8 MB value: nothing claims it was saved."""
    from tests.conftest import make_project
    from tests.reliability.test_bad_input import _mount_tmpfs

    root = make_project(tmp_path / "p", example=False)
    store = root / ".ipykeep" / "checkpoints"
    why = _mount_tmpfs(store, size="3m")
    if why:
        pytest.skip(why)
    env = {**ENV, "IPYKEEP_CHECKPOINT_SNAPSHOT_BUDGET_S": "30"}
    try:
        write_notebook(root / "nb.ipynb", ["import os\nbig = os.urandom(8_000_000)", "small = 7"])
        started = run_cli("start", "nb.ipynb", cwd=root, env=env)
        assert started.returncode == 0, started.stderr
        out = started.stdout + started.stderr
        assert "disk full" in out, out
        assert "2 cell(s) checkpointed" not in out, out
        named = run_cli("checkpoint", "snap", cwd=root, env=env)
        assert named.returncode != 0, named.stdout
        assert "not saved" in named.stderr and "disk full" in named.stderr, named.stderr
        listed = run_cli("checkpoints", cwd=root, env=env)
        listing = listed.stdout
        assert "not restorable" in listing and "disk full" in listing, listed
        # a new daemon (the first one's word is gone): the cell is described, not never run
        stop_daemon(root)
        again = run_cli("start", "nb.ipynb", cwd=root, env=env)
        assert again.returncode == 0, again.stderr
        text = again.stdout + again.stderr
        assert "its checkpoint could not be written (disk full)" in text, text
    finally:
        stop_daemon(root)
        import subprocess

        subprocess.run(["umount", "-l", str(store)], capture_output=True)
