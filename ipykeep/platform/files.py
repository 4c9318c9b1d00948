"""Private files and directories, the umask, and the per-user temp directory name.

On POSIX "private" is mode bits: 0600 files in 0700 directories. On Windows mode bits mean
nothing (``os.chmod`` only toggles the read-only flag), so a private path gets an owner-only
ACL instead, set with the system's ``icacls`` (no pywin32): inherited entries are removed
(``/inheritance:r``) and the one entry left grants the current user full control (on a
directory, inherited by what is created inside it). It guarantees that other ordinary users of
the machine cannot read the path; administrators can still take ownership, as root can read a
0600 file on POSIX.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ipykeep.platform import system

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
#: ``os.open`` flag keeping a descriptor out of child processes (Python's default since PEP 446;
#: spelled out where a file holds a secret or a lock).
NO_INHERIT: int = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOINHERIT", 0)


def _run_icacls(args: list[str]) -> None:
    import subprocess  # Windows only; a function so tests can substitute it

    subprocess.run(["icacls", *args], check=True, capture_output=True)


def _owner_only_acl(path: Path | str, *, directory: bool) -> None:
    import getpass

    grant = "(OI)(CI)F" if directory else "F"
    _run_icacls([os.fspath(path), "/inheritance:r", "/grant:r", f"{getpass.getuser()}:{grant}"])


def set_mode(path: Path | str, mode: int) -> None:
    """Give ``path`` the POSIX ``mode``; on Windows a mode without group/other bits is an
    owner-only ACL and any other mode is left to the directory's inherited ACL."""
    if system.IS_WINDOWS:
        if not mode & 0o077:
            _owner_only_acl(path, directory=os.path.isdir(path))
        return
    os.chmod(path, mode)


def make_private(path: Path | str) -> None:
    """Make an existing file 0600 or directory 0700 (owner-only ACL on Windows)."""
    set_mode(path, PRIVATE_DIR if os.path.isdir(path) else PRIVATE_FILE)


def open_private(path: Path | str, flags: int) -> int:
    """``os.open`` of a file that is (or becomes) private, not inherited by children; returns
    the descriptor. An existing file's mode is reset too (``O_CREAT``'s mode only applies to a
    new one)."""
    fd = os.open(path, flags | os.O_CREAT | NO_INHERIT, PRIVATE_FILE)
    try:
        if system.IS_WINDOWS:
            _owner_only_acl(path, directory=False)
        else:
            os.fchmod(fd, PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes at ``offset`` (``os.pread`` where it exists)."""
    if system.IS_WINDOWS:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)
    return os.pread(fd, size, offset)


def write_at(fd: int, data: bytes, offset: int) -> None:
    """Write ``data`` at ``offset`` (``os.pwrite`` where it exists)."""
    if system.IS_WINDOWS:
        os.lseek(fd, offset, os.SEEK_SET)
        os.write(fd, data)
        return
    os.pwrite(fd, data, offset)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a pipe, or a full disk's file, may take it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it private; returns it."""
    path.mkdir(parents=True, exist_ok=True)
    set_mode(path, PRIVATE_DIR)
    return path


def others_can_access(st: os.stat_result) -> bool:
    """Whether a stat result shows group or other permissions.

    On Windows ``st_mode`` carries no permissions (files show 0666), so this is False there
    and secrecy rests on the owner-only ACL ``set_mode`` gave the path when it was created.
    """
    if system.IS_WINDOWS:
        return False
    return bool(stat.S_IMODE(st.st_mode) & 0o077)


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    if system.IS_LINUX:
        try:
            with open("/proc/self/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Umask:"):
                        return int(line.split()[1], 8)
        except (OSError, ValueError, IndexError):
            pass
    # Elsewhere (macOS has no /proc) the only way is set-and-restore (not atomic with respect
    # to other threads).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_tag() -> str:
    """A name for the current user that is safe in a path: the uid on POSIX, the user name on
    Windows (which has no uids; its temp directory is already per user)."""
    if system.IS_WINDOWS:
        import getpass
        import re

        return re.sub(r"[^A-Za-z0-9_.-]", "_", getpass.getuser()) or "user"
    return str(os.getuid())


def user_temp_dir(prefix: str) -> Path:
    """``<tmp>/<prefix>-<user>``, created private (the path is not secret, its contents are)."""
    import tempfile  # not on the thin CLI's path

    return private_dir(Path(tempfile.gettempdir()) / f"{prefix}-{user_tag()}")
