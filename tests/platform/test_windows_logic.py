"""Windows-logic tests: the seam's Windows branches, run on Linux with the OS calls substituted.

They prove that each Windows branch makes the calls it means to make (the right flags, the right
handles closed, the right fallbacks); they do NOT prove that Windows behaves as assumed, since
no Windows runs them here. docs/platforms.md says which guarantees are verified where.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from ipykeep.api.errors import PlatformNotSupportedError
from ipykeep.platform import files, locks, processes, system, transport, winapi


@pytest.fixture
def on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "IS_WINDOWS", True)
    monkeypatch.setattr(system, "IS_LINUX", False)
    monkeypatch.setattr(system, "IS_MACOS", False)


class FakeMsvcrt:
    LK_LOCK = 1
    LK_UNLCK = 0
    LK_NBLCK = 2

    def __init__(self, failures: int = 0, held: bool = False) -> None:
        self.calls: list[tuple[int, int, int]] = []
        self.offsets: list[int] = []
        self.failures = failures
        self.held = held

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        self.calls.append((fd, mode, nbytes))
        self.offsets.append(os.lseek(fd, 0, os.SEEK_CUR))
        if mode == self.LK_NBLCK and self.held:
            raise OSError(13, "Permission denied")
        if mode == self.LK_LOCK and self.failures:
            self.failures -= 1
            raise OSError(36, "Resource deadlock avoided")  # what LK_LOCK raises after 10 s


def test_windows_logic_file_lock_locks_one_byte_past_the_content_and_keeps_waiting(
    on_windows: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeMsvcrt(failures=2)
    monkeypatch.setattr(locks, "_msvcrt", lambda: fake)
    with open(tmp_path / "start.lock", "a+") as fh:
        fh.write("x")  # the position moves: the lock must stay on the same byte
        fh.flush()
        with locks.exclusive_lock(fh):
            pass
        fd = fh.fileno()
    assert fake.calls == [(fd, 1, 1)] * 3 + [(fd, 0, 1)]
    # Windows locks are mandatory: a lock on the content would keep others from reading it.
    assert fake.offsets == [locks.LOCK_OFFSET] * 4


def test_windows_logic_try_lock_says_whether_it_got_the_lock(
    on_windows: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fd = os.open(tmp_path / "daemon.lock", os.O_RDWR | os.O_CREAT)
    try:
        free = FakeMsvcrt()
        monkeypatch.setattr(locks, "_msvcrt", lambda: free)
        assert locks.try_lock_fd(fd) is True
        assert locks.try_lock_fd(fd, shared=True) is True  # no shared lock there: exclusive
        assert [mode for _, mode, _ in free.calls] == [free.LK_NBLCK] * 2
        held = FakeMsvcrt(held=True)
        monkeypatch.setattr(locks, "_msvcrt", lambda: held)
        assert locks.try_lock_fd(fd) is False
    finally:
        os.close(fd)


def test_windows_logic_private_open_and_positional_io(
    on_windows: None, icacls: list[list[str]], tmp_path: Path
) -> None:
    path = tmp_path / "daemon.lock"
    fd = files.open_private(path, os.O_RDWR)
    try:
        files.write_at(fd, b"4242\n", 0)
        os.lseek(fd, 100, os.SEEK_SET)
        assert files.read_at(fd, 32, 0) == b"4242\n"
    finally:
        os.close(fd)
    assert icacls == [[str(path), "/inheritance:r", "/grant:r", "alice:F"]]


def test_windows_logic_there_is_no_user_signal_and_no_fork(
    on_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "kill", lambda *a: pytest.fail("os.kill terminates on Windows"))
    monkeypatch.setattr(signal, "signal", lambda *a: pytest.fail("no SIGUSR1 on Windows"))
    processes.send_user_signal(4242)
    processes.ignore_user_signal()

    class Loop:
        def add_signal_handler(self, *args: Any) -> None:
            pytest.fail("the Windows event loop has no signal handlers")

    processes.on_user_signal(Loop(), print)  # type: ignore[arg-type]
    assert processes.fork_is_safe() is False
    assert processes.command_line(os.getpid()) is None
    assert processes.process_stopped(os.getpid()) is False


def test_macos_logic_no_proc_and_no_fork_of_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "IS_LINUX", False)
    monkeypatch.setattr(system, "IS_MACOS", True)
    assert processes.fork_is_safe() is False
    assert processes.command_line(os.getpid()) is None
    assert processes.process_stopped(os.getpid()) is False
    assert processes.pid_alive(os.getpid())


def test_windows_logic_directory_lock_is_a_lock_file_inside(
    on_windows: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeMsvcrt()
    monkeypatch.setattr(locks, "_msvcrt", lambda: fake)
    with locks.directory_lock(tmp_path):
        assert (tmp_path / locks.DIRECTORY_LOCK_NAME).is_file()
        assert [mode for _, mode, _ in fake.calls] == [fake.LK_LOCK]


@pytest.fixture
def icacls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    monkeypatch.setattr(files, "_run_icacls", calls.append)
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    return calls


def test_windows_logic_private_file_is_an_owner_only_acl(
    on_windows: None, icacls: list[list[str]], tmp_path: Path
) -> None:
    secret = tmp_path / "daemon.json"
    secret.write_text("{}")
    before = secret.stat().st_mode
    files.set_mode(secret, 0o600)
    assert icacls == [[str(secret), "/inheritance:r", "/grant:r", "alice:F"]]
    assert secret.stat().st_mode == before  # no chmod: mode bits mean nothing there


def test_windows_logic_private_dir_acl_is_inherited_by_its_contents(
    on_windows: None, icacls: list[list[str]], tmp_path: Path
) -> None:
    files.private_dir(tmp_path / "run")
    assert icacls == [[str(tmp_path / "run"), "/inheritance:r", "/grant:r", "alice:(OI)(CI)F"]]


def test_windows_logic_a_shared_mode_keeps_the_inherited_acl(
    on_windows: None, icacls: list[list[str]], tmp_path: Path
) -> None:
    notebook = tmp_path / "a.ipynb"
    notebook.write_text("{}")
    files.set_mode(notebook, 0o644)
    assert icacls == []


def test_windows_logic_mode_bits_are_not_evidence_of_exposure(
    on_windows: None, tmp_path: Path
) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"k")
    key.chmod(0o666)
    assert files.others_can_access(key.stat()) is False


def test_windows_logic_user_tag_is_the_user_name_made_path_safe(
    on_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "CORP\\J Doe")
    assert files.user_tag() == "CORP_J_Doe"


def test_windows_logic_umask_is_read_by_set_and_restore(on_windows: None) -> None:
    mask = os.umask(0o027)
    try:
        assert files.current_umask() == 0o027
        assert files.current_umask() == 0o027  # and it was restored
    finally:
        os.umask(mask)


def test_windows_logic_kernels_use_tcp_on_loopback(on_windows: None, tmp_path: Path) -> None:
    assert transport.kernel_transport(tmp_path) == ("tcp", "127.0.0.1")


def test_windows_logic_daemon_detaches_without_a_console(on_windows: None) -> None:
    flags = processes.detached_popen_kwargs()
    assert flags == {"creationflags": 0x00000008 | 0x00000200}


def test_windows_logic_interrupt_by_pid_is_refused_with_the_way_that_works(
    on_windows: None,
) -> None:
    with pytest.raises(PlatformNotSupportedError) as err:
        processes.interrupt_process_group(os.getpid())
    assert "ipykeep interrupt" in err.value.hint


def test_windows_logic_kill_now_is_terminate_process(
    on_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    processes.kill_now(4242)
    # os.kill on Windows calls TerminateProcess for any signal but the console ones.
    assert sent == [(4242, signal.SIGTERM)]


def test_windows_logic_stop_signals_go_through_signal_signal(
    on_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signal, "SIGBREAK", 21, raising=False)
    installed: dict[int, Any] = {}
    monkeypatch.setattr(signal, "signal", lambda sig, handler: installed.__setitem__(sig, handler))

    class Loop:
        def __init__(self) -> None:
            self.scheduled: list[Any] = []

        def call_soon_threadsafe(self, callback: Any) -> None:
            self.scheduled.append(callback)

    loop = Loop()
    stopped: list[bool] = []
    processes.add_stop_handlers(loop, lambda: stopped.append(True))  # type: ignore[arg-type]
    assert sorted(installed) == [signal.SIGINT, 21]
    installed[21](21, None)
    assert len(loop.scheduled) == 1
    loop.scheduled[0]()
    assert stopped == [True]


class FakeKernel32:  # its methods carry the Win32 names the seam calls
    """Records kernel32 calls; handles are small integers."""

    def __init__(self, *, open_process: int = 7, assign_ok: bool = True, exit_code: int = 0):
        self.calls: list[tuple[Any, ...]] = []
        self.open_process = open_process
        self.assign_ok = assign_ok
        self.exit_code = exit_code
        self.limit_flags: int | None = None

    def CreateJobObjectW(self, attrs: Any, name: Any) -> int:
        self.calls.append(("CreateJobObjectW",))
        return 3

    def SetInformationJobObject(self, job: int, cls: int, info: Any, size: int) -> int:
        self.limit_flags = info._obj.BasicLimitInformation.LimitFlags
        self.calls.append(("SetInformationJobObject", job, cls, size))
        return 1

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:
        self.calls.append(("OpenProcess", access, pid))
        return self.open_process

    def AssignProcessToJobObject(self, job: int, process: int) -> int:
        self.calls.append(("AssignProcessToJobObject", job, process))
        return int(self.assign_ok)

    def GetExitCodeProcess(self, handle: int, code: Any) -> int:
        code._obj.value = self.exit_code
        return 1

    def TerminateJobObject(self, job: int, code: int) -> int:
        self.calls.append(("TerminateJobObject", job))
        return 1

    def CloseHandle(self, handle: int) -> int:
        self.calls.append(("CloseHandle", handle))
        return 1


@pytest.fixture
def kernel32(monkeypatch: pytest.MonkeyPatch) -> FakeKernel32:
    fake = FakeKernel32()
    monkeypatch.setattr(winapi, "kernel32", lambda: fake)
    monkeypatch.setattr(winapi, "last_error", lambda: 5)
    return fake


def test_windows_logic_kernel_tree_is_a_kill_on_close_job(
    on_windows: None, kernel32: FakeKernel32
) -> None:
    tree = processes.ProcessTree.adopt(1234)
    assert kernel32.limit_flags == winapi.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    assert ("OpenProcess", winapi.PROCESS_SET_QUOTA | winapi.PROCESS_TERMINATE, 1234) in (
        kernel32.calls
    )
    assert ("AssignProcessToJobObject", 3, 7) in kernel32.calls
    assert kernel32.calls[-1] == ("CloseHandle", 7)  # the process handle, not the job
    kernel32.calls.clear()
    tree.kill()
    tree.kill()  # a second kill does nothing
    assert kernel32.calls == [("TerminateJobObject", 3), ("CloseHandle", 3)]


def test_windows_logic_a_failed_assignment_closes_the_job(
    on_windows: None, kernel32: FakeKernel32
) -> None:
    kernel32.assign_ok = False
    with pytest.raises(OSError):
        processes.ProcessTree.adopt(1234)
    closed = [c[1] for c in kernel32.calls if c[0] == "CloseHandle"]
    assert sorted(closed) == [3, 7]


@pytest.mark.parametrize(
    ("open_process", "last_error", "exit_code", "alive"),
    [
        (7, 0, winapi.STILL_ACTIVE, True),
        (7, 0, 0, False),
        (0, winapi.ERROR_ACCESS_DENIED, 0, True),  # another user's process exists
        (0, 87, 0, False),  # ERROR_INVALID_PARAMETER: no such pid
    ],
)
def test_windows_logic_pid_liveness_reads_the_exit_code(
    on_windows: None,
    monkeypatch: pytest.MonkeyPatch,
    open_process: int,
    last_error: int,
    exit_code: int,
    alive: bool,
) -> None:
    fake = FakeKernel32(open_process=open_process, exit_code=exit_code)
    monkeypatch.setattr(winapi, "kernel32", lambda: fake)
    monkeypatch.setattr(winapi, "last_error", lambda: last_error)
    assert processes.pid_alive(99) is alive
    if open_process:
        assert fake.calls[-1] == ("CloseHandle", open_process)


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the layout checked is 64-bit")
def test_windows_logic_job_limit_structure_has_the_win64_size() -> None:
    # sizeof(JOBOBJECT_EXTENDED_LIMIT_INFORMATION) on 64-bit Windows; the same C alignment rules
    # hold for these field types on 64-bit Linux, so a wrong field shows here too.
    assert ctypes.sizeof(winapi.ExtendedLimitInformation) == 144
    assert sys.maxsize > 2**32
