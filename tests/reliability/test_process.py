"""The daemon killed outright: no orphan processes, and the notebook is never half-written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from ipykeep.client.connection import find_daemon
from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import (
    STATIC,
    kernel_pid,
    pid_alive,
    start_project,
    wait_until,
    write_notebook,
)


@pytest.mark.posix
def test_sigkill_of_the_daemon_leaves_no_orphans_within_5_s(tmp_path: Path) -> None:
    root = tmp_path / "p"
    client = start_project(root, ["x = 1"])
    try:
        kpid = kernel_pid(client)
        rec = client.call(
            "execute",
            code=(
                "import subprocess, os\n"
                "child = subprocess.Popen(['sleep', '300'])\n"
                "forked = os.fork()\n"
                "if forked == 0:\n"
                "    import time\n"
                "    time.sleep(300)\n"
                "print(child.pid, forked)"
            ),
        )
        child, forked = map(int, rec["output"]["text"].split())
        assert pid_alive(child) and pid_alive(forked)
        os.kill(client.descriptor.pid, signal.SIGKILL)
        assert wait_until(lambda: not any(pid_alive(p) for p in (kpid, child, forked)), 5), [
            p for p in (kpid, child, forked) if pid_alive(p)
        ]
    finally:
        stop_daemon(root)


@pytest.mark.posix
@pytest.mark.posix
def test_sigkill_of_the_daemon_ends_a_kernel_forked_from_another_too(tmp_path: Path) -> None:
    """A fork made by forking its parent kernel's process is not the daemon's child: it ends
    its own process group when the daemon is gone, as a kernel the daemon started does."""
    root = tmp_path / "p"
    client = start_project(root, ["x = 1"])
    try:
        (kernel,) = client.call("list_kernels")
        made = client.call("fork_kernel", kernel_id=kernel["kernel_id"])
        assert made["how"] == "process", made
        (fork,) = [k for k in client.call("list_kernels") if k["kernel_id"] == made["kernel_id"]]
        rec = client.call(
            "execute",
            kernel_id=made["kernel_id"],
            code="import subprocess\nprint(subprocess.Popen(['sleep', '300']).pid)",
        )
        pids = (int(kernel["pid"]), int(fork["pid"]), int(rec["output"]["text"].split()[0]))
        assert all(pid_alive(p) for p in pids)
        os.kill(client.descriptor.pid, signal.SIGKILL)
        assert wait_until(lambda: not any(pid_alive(p) for p in pids), 10), [
            p for p in pids if pid_alive(p)
        ]
    finally:
        stop_daemon(root)


def test_sigkill_during_write_back_leaves_old_or_new_bytes_and_temp_files_are_cleaned(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    # Large outputs make each write-back take a while, so the kill lands inside one.
    sources = [f"print('{i}' * 400_000)" for i in range(12)]
    client = start_project(root, ["x = 1"])
    path = root / "nb.ipynb"
    write_notebook(path, sources)
    old = path.read_bytes()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ipykeep", "run", *[f"c{i}" for i in range(12)]],
        cwd=root,
        env=STATIC,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Kill while the write-back is under way: as soon as a temporary file appears.
        saw_tmp = wait_until(lambda: any(root.glob(".nb.ipynb.*.ipykeep-tmp")), 60, step=0.002)
        os.kill(client.descriptor.pid, signal.SIGKILL)
        proc.wait(30)
        data = path.read_bytes()
        assert data == old or nbformat.reads(data.decode(), as_version=4).cells[0].outputs
        json.loads(data)  # never a partial file
        assert saw_tmp
        # The killed writer's temporary files go with the next write at once (their writer is
        # gone); a live writer's stay; one without a writer's pid goes once stale.
        assert list(root.glob(f".nb.ipynb.{client.descriptor.pid}.*.ipykeep-tmp"))
        stale = root / ".nb.ipynb.killed.ipykeep-tmp"
        stale.write_text("partial")
        os.utime(stale, (time.time() - 3600, time.time() - 3600))
        live = root / f".nb.ipynb.{os.getpid()}.abc123.ipykeep-tmp"  # a writer still at it
        live.write_text("being written")
        write_notebook(path, ["y = 2"])
        assert run_cli("start", "nb.ipynb", cwd=root, env=STATIC).returncode == 0
        assert list(root.glob(".nb.ipynb.*.ipykeep-tmp")) == [live]
    finally:
        if proc.poll() is None:
            proc.kill()
        stop_daemon(root)
        if find_daemon(root) is not None:
            os.kill(find_daemon(root).pid, signal.SIGKILL)  # type: ignore[union-attr]


def _runtime_dir(kpid: int) -> Path:
    """The kernel's private runtime directory: where its connection file (``-f``) lives."""
    argv = psutil.Process(kpid).cmdline()
    return Path(argv[argv.index("-f") + 1]).parent


def test_a_sigkilled_daemons_kernel_runtime_dir_is_removed_at_the_next_start(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    # A temporary directory of this test's own: the daemons other tests start at the same time
    # collect the runtime directories of dead daemons under the shared one. Short, for the
    # kernels' socket paths.
    scratch = Path(tempfile.mkdtemp(prefix="ik", dir="/tmp"))
    env = {**STATIC, "TMPDIR": str(scratch)}
    client = start_project(root, ["x = 1"], env=env)
    try:
        kpid = kernel_pid(client)
        runtime = _runtime_dir(kpid)
        assert runtime.is_relative_to(scratch)
        assert (runtime / "kernel.json").is_file()
        os.kill(client.descriptor.pid, signal.SIGKILL)
        assert wait_until(lambda: not pid_alive(kpid), 5)
        assert runtime.is_dir()  # nothing was left to remove it
        # another project's daemon, alive, keeps its kernel's directory
        other = start_project(tmp_path / "q", ["y = 1"], env=env)
        live = _runtime_dir(kernel_pid(other))
        assert not runtime.exists()
        assert (live / "kernel.json").is_file()
        assert run_cli("start", "nb.ipynb", cwd=root, env=env).returncode == 0
        assert (live / "kernel.json").is_file()
    finally:
        stop_daemon(root)
        stop_daemon(tmp_path / "q")
        shutil.rmtree(scratch, ignore_errors=True)


def test_what_a_sigkilled_kernel_started_goes_when_its_death_is_noticed(tmp_path: Path) -> None:
    root = tmp_path / "p"
    client = start_project(root, ["x = 1"])
    try:
        kpid = kernel_pid(client)
        rec = client.call(
            "execute",
            code="import subprocess\nchild = subprocess.Popen(['sleep', '600'])\nprint(child.pid)",
        )
        child = int(rec["output"]["text"])
        assert pid_alive(child)
        os.kill(kpid, signal.SIGKILL)
        assert wait_until(lambda: client.call("list_kernels")[0]["state"] == "dead", 10)
        assert wait_until(lambda: not pid_alive(child), 2), "the cell's child outlived its kernel"
        assert pid_alive(client.descriptor.pid)  # the daemon lives on, and reports the death
    finally:
        stop_daemon(root)
