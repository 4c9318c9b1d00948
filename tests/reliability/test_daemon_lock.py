"""One daemon per project, found even when its descriptor is damaged, stopped by ``stop --all``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_project, run_cli, stop_daemon
from tests.reliability.helpers import STATIC, kernel_pid, pid_alive, start_project, wait_until

DAMAGED = {
    "garbage": b"\x00\xffnot json at all",
    "empty": b"",
    "truncated": b'{"pid": 12, "host": "127.0.0.1", "po',
    "wrong types": json.dumps({"pid": "x", "host": 5, "port": [], "token": None}).encode(),
}


def daemons_of(root: Path) -> list[int]:
    """Pids of every ipykeep daemon process launched for ``root``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ipykeep.daemon" in argv and str(root).encode() in argv:
            found.append(int(proc.name))
    return found


@pytest.fixture
def proj(tmp_path: Path):
    root = tmp_path / "p"
    client = start_project(root, ["x = 41"])
    yield root, client
    stop_daemon(root)


@pytest.mark.posix  # the daemon is asked to publish again with SIGUSR1
def test_a_damaged_descriptor_does_not_orphan_the_daemon(proj) -> None:
    root, client = proj
    pid = client.descriptor.pid
    descriptor = root / ".ipykeep" / "run" / "daemon.json"
    for what, content in DAMAGED.items():
        descriptor.write_bytes(content)
        res = run_cli("exec", "x + 1", cwd=root, env=STATIC)
        assert res.returncode == 0 and "42" in res.stdout, (what, res.stdout, res.stderr)
        assert json.loads(descriptor.read_text())["pid"] == pid, what  # published again
    descriptor.unlink()
    res = run_cli("status", "--json", cwd=root, env=STATIC)
    assert res.returncode == 0 and json.loads(res.stdout)["kernels"], res.stderr
    # `start` reaches the running daemon: never a second one for the project
    descriptor.write_bytes(DAMAGED["garbage"])
    res = run_cli("start", "nb.ipynb", "--json", cwd=root, env=STATIC)
    assert res.returncode == 0, res.stderr
    assert daemons_of(root) == [pid]


def test_stop_all_stops_a_daemon_whose_descriptor_is_damaged(proj) -> None:
    root, client = proj
    daemon, kernel = client.descriptor.pid, kernel_pid(client)
    (root / ".ipykeep" / "run" / "daemon.json").write_bytes(DAMAGED["truncated"])
    res = run_cli("stop", "--all", cwd=root, env=STATIC)
    assert res.returncode == 0, res.stderr
    assert wait_until(lambda: not pid_alive(daemon) and not pid_alive(kernel), 10)
    assert daemons_of(root) == []


def test_a_daemon_that_published_nothing_is_still_stopped_by_stop_all(proj) -> None:
    root, client = proj
    daemon, kernel = client.descriptor.pid, kernel_pid(client)
    # Its descriptor replaced by another process's (a copy from elsewhere): nothing reaches it
    # by the descriptor, and `stop --all` finds it by the lock.
    (root / ".ipykeep" / "run" / "daemon.json").write_text(
        json.dumps({"pid": 1, "host": "127.0.0.1", "port": 9, "token": "t", "version": "0"})
    )
    res = run_cli("stop", "--all", cwd=root, env=STATIC)
    assert res.returncode == 0, res.stderr
    assert wait_until(lambda: not pid_alive(daemon) and not pid_alive(kernel), 10)


def test_two_daemons_launched_at_once_leave_exactly_one(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", example=False)
    launch = [sys.executable, "-m", "ipykeep.daemon", "--root", str(root)]
    procs = [
        subprocess.Popen(launch, cwd=root, env=STATIC, stderr=subprocess.PIPE) for _ in range(2)
    ]
    try:
        assert wait_until(lambda: any(p.poll() is not None for p in procs), 30)
        loser = next(p for p in procs if p.poll() is not None)
        winner = next(p for p in procs if p is not loser)
        assert loser.returncode == 3, loser.stderr.read() if loser.stderr else ""
        assert winner.poll() is None and daemons_of(root) == [winner.pid]
        res = run_cli("stop", "--all", cwd=root, env=STATIC)
        assert res.returncode == 0, res.stderr
        assert winner.wait(20) is not None and daemons_of(root) == []
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.posix
def test_daemon_start_collects_cut_writes_and_tightens_modes(tmp_path: Path) -> None:
    import stat

    root = make_project(tmp_path / "p", example=False)
    state = root / ".ipykeep"
    blobs = state / "checkpoints" / "blobs"
    blobs.mkdir(parents=True)
    # What a SIGKILL leaves: a blob being written by the kernel, an atomic write's temp file.
    cut_blob = blobs / ".4242.0123456789ab.tmp"
    cut_blob.write_bytes(b"\0" * 4096)
    cut_write = state / ".counters.json.x1y2.ipykeep-tmp"
    cut_write.write_text("{")
    kept = blobs / "kept-blob"
    kept.write_bytes(b"blob")
    os.chmod(kept, 0o644)
    os.chmod(blobs, 0o755)
    client = start_project(root, ["x = 1"])
    try:
        assert not cut_blob.exists() and not cut_write.exists()
        assert kept.read_bytes() == b"blob"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(blobs.stat().st_mode) == 0o700
        assert client.call("ping")["pid"] == client.descriptor.pid
    finally:
        stop_daemon(root)
