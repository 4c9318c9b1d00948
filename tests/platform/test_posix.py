"""The seam's POSIX branches, for real: locks held against another process, mode bits, pid
liveness, process groups, signals. Not run on Windows (the ``posix`` marker)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ipykeep.platform import files, locks, processes, system, transport

pytestmark = [
    pytest.mark.posix,
    pytest.mark.skipif(system.IS_WINDOWS, reason="POSIX behaviour"),
]

TRY_LOCK = """
import fcntl, sys
fd = open(sys.argv[1], "a+") if sys.argv[2] == "file" else __import__("os").open(sys.argv[1], 0)
try:
    fcntl.flock(fd if isinstance(fd, int) else fd.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("got")
except BlockingIOError:
    print("held")
"""


def other_process_gets(path: Path, kind: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(path), kind], capture_output=True, text=True
    )
    return run.stdout.strip()


def test_file_lock_excludes_another_process_until_released(tmp_path: Path) -> None:
    path = tmp_path / "start.lock"
    with open(path, "a+") as fh:
        with locks.exclusive_lock(fh):
            assert other_process_gets(path, "file") == "held"
        assert other_process_gets(path, "file") == "got"


def test_directory_lock_locks_the_directory_and_creates_no_file(tmp_path: Path) -> None:
    with locks.directory_lock(tmp_path):
        assert other_process_gets(tmp_path, "dir") == "held"
        assert list(tmp_path.iterdir()) == []
    assert other_process_gets(tmp_path, "dir") == "got"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_private_paths_are_0700_and_0600(tmp_path: Path) -> None:
    made = files.private_dir(tmp_path / "a" / "run")
    assert mode(made) == 0o700
    secret = made / "daemon.json"
    secret.write_text("{}")
    secret.chmod(0o644)
    files.make_private(secret)
    assert mode(secret) == 0o600
    files.set_mode(secret, 0o640)
    assert mode(secret) == 0o640
    assert files.others_can_access(secret.stat())
    files.make_private(secret)
    assert not files.others_can_access(secret.stat())


def test_user_temp_dir_is_per_uid_and_private(tmp_path: Path) -> None:
    made = files.user_temp_dir("ipykeep-test")
    assert made.name == f"ipykeep-test-{os.getuid()}"
    assert mode(made) == 0o700
    made.rmdir()


def test_umask_is_read_without_changing_it() -> None:
    mask = os.umask(0o027)
    try:
        assert files.current_umask() == 0o027
        assert files.current_umask() == 0o027
    finally:
        os.umask(mask)


def test_kernels_use_ipc_in_their_runtime_dir(tmp_path: Path) -> None:
    assert transport.kernel_transport(tmp_path) == ("ipc", str(tmp_path / "ipc"))


def test_pid_alive_sees_a_live_process_a_zombie_and_a_reaped_one() -> None:
    assert processes.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    if system.IS_LINUX:  # unreaped: a zombie, which counts as dead where /proc shows it
        while processes.pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not processes.pid_alive(child.pid)
    child.wait()
    assert not processes.pid_alive(child.pid)


def sleeper_group() -> tuple[subprocess.Popen[bytes], int]:
    """A session leader with a child of its own; returns it and the child's pid."""
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"],
        stdout=subprocess.PIPE,
        **processes.detached_popen_kwargs(),
    )
    assert leader.stdout is not None
    return leader, int(leader.stdout.readline())


def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while processes.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not processes.pid_alive(pid)


def test_detached_child_leads_its_own_group() -> None:
    leader, grandchild = sleeper_group()
    try:
        assert os.getpgid(leader.pid) == leader.pid != os.getpgid(0)
        assert os.getpgid(grandchild) == leader.pid
    finally:
        processes.ProcessTree.adopt(leader.pid).kill()
        leader.wait()


def test_process_tree_kill_takes_the_children_too() -> None:
    leader, grandchild = sleeper_group()
    processes.ProcessTree.adopt(leader.pid).kill()
    assert leader.wait(10) == -signal.SIGKILL
    assert wait_gone(grandchild)


#: A leader and its child that both die of SIGINT: Python's default handler (a shell's
#: background job would ignore SIGINT, as POSIX has non-interactive shells do).
#: Both processes take SIGINT as Python's KeyboardInterrupt even when the tests run in a
#: shell's background job, whose children start with SIGINT ignored (Python then installs no
#: handler of its own).
_INTERRUPTIBLE = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); print(1, flush=True); "
    "time.sleep(60)'], stdout=subprocess.PIPE)\n"
    "child.stdout.readline()\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_interrupt_reaches_the_whole_group() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE],
        stdout=subprocess.PIPE,
        **processes.detached_popen_kwargs(),
    )
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())
    try:
        processes.interrupt_process_group(grandchild)
        assert leader.wait(10) == -signal.SIGINT
        assert wait_gone(grandchild)
    finally:
        processes.ProcessTree.adopt(leader.pid).kill()


def test_interrupting_a_gone_process_says_so() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        processes.interrupt_process_group(child.pid)


def test_try_lock_is_exclusive_against_another_process_and_shared_probes_share(
    tmp_path: Path,
) -> None:
    path = tmp_path / "daemon.lock"
    with open(path, "a+") as mine:
        assert locks.try_lock_fd(mine.fileno(), shared=True)
        with open(path) as other:  # a second open file: flock is per open file
            assert locks.try_lock_fd(other.fileno(), shared=True)
            assert not locks.try_lock_fd(other.fileno())
        locks.unlock_fd(mine.fileno())
        assert locks.try_lock_fd(mine.fileno())
        assert other_process_gets(path, "file") == "held"


def test_open_private_resets_an_existing_files_mode(tmp_path: Path) -> None:
    path = tmp_path / "start.lock"
    path.write_text("")
    path.chmod(0o644)
    fd = files.open_private(path, os.O_RDWR)
    try:
        assert mode(path) == 0o600
        assert not os.get_inheritable(fd)
        files.write_at(fd, b"4242\n", 0)
        assert files.read_at(fd, 32, 0) == b"4242\n"
    finally:
        os.close(fd)


def test_linux_sees_command_lines_and_stopped_processes() -> None:
    if not system.IS_LINUX:
        pytest.skip("/proc is Linux's")
    child = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while b"sleep" not in (processes.command_line(child.pid) or []):  # until it has exec'd
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert processes.command_line(child.pid) == [b"sleep", b"60", b""]
        assert not processes.process_stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        while not processes.process_stopped(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes.process_stopped(child.pid)
    finally:
        child.kill()
        child.wait()
    assert processes.fork_is_safe()


async def test_the_user_signal_reaches_its_handler() -> None:
    loop = asyncio.get_running_loop()
    got = asyncio.Event()
    processes.on_user_signal(loop, got.set)
    try:
        processes.send_user_signal(os.getpid())
        await asyncio.wait_for(got.wait(), 5)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)


def test_kill_now_is_sigkill() -> None:
    child = subprocess.Popen(["sleep", "60"])
    processes.kill_now(child.pid)
    assert child.wait(10) == -signal.SIGKILL


async def test_stop_handlers_turn_sighup_into_a_stop() -> None:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    processes.add_stop_handlers(loop, stopping.set)
    try:
        os.kill(os.getpid(), signal.SIGHUP)
        await asyncio.wait_for(stopping.wait(), 5)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
