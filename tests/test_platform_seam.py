"""The platform seam rule: outside ``ipykeep/platform/`` no module makes an OS-specific decision.

Checked on the syntax tree (not by grepping), so a comment or a docstring naming ``fcntl``
does not count and ``from os import killpg`` does. Exempt, each for the reason given:

- ``ipykeep/platform/``: the seam itself;
- ``*/_inkernel/``: source text sent into the kernel's own interpreter, which cannot import
  ``ipykeep``; these modules carry small portable branches of their own (``hasattr(os,
  "killpg")``, ``getattr(os, "getuid", None)``, ``hasattr(signal, "setitimer")``);
- ``ipykeep/kernel/providers/ssh_launcher.py``: runs on the SSH host, which is POSIX (OpenSSH's
  ``sshd``), and is sent there as a script, so it too cannot import the seam.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ipykeep"
SEAM = PACKAGE / "platform"
EXEMPT_FILES = {PACKAGE / "kernel" / "providers" / "ssh_launcher.py"}

POSIX_MODULES = {"fcntl", "msvcrt", "termios", "pwd", "grp", "resource", "winreg", "_winapi"}
OS_CALLS = {
    "killpg",
    "setsid",
    "getpgid",
    "getpgrp",
    "fork",
    "forkpty",
    "getuid",
    "geteuid",
    "fchmod",
    "pread",
    "pwrite",
    "O_CLOEXEC",
}
SIGNAL_NAMES = {
    "SIGKILL",
    "SIGSTOP",
    "SIGHUP",
    "SIGALRM",
    "SIGBREAK",
    "SIGUSR1",
    "SIGUSR2",
    "setitimer",
    "alarm",
}
PLATFORM_TESTS = {("sys", "platform"), ("os", "name")}


def checked_modules() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if SEAM not in path.parents and "_inkernel" not in path.parts and path not in EXEMPT_FILES
    )


def violations(source: str) -> list[str]:
    """Every OS-specific use in ``source``, as ``line: what``."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name in POSIX_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in POSIX_MODULES:
                found.append(f"{where}: from {node.module} import")
            wanted = {"os": OS_CALLS, "signal": SIGNAL_NAMES, "sys": {"platform"}}
            found += [
                f"{where}: from {node.module} import {a.name}"
                for a in node.names
                if a.name in wanted.get(node.module, set())
            ]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            pair = (node.value.id, node.attr)
            if (
                pair in PLATFORM_TESTS
                or (pair[0] == "os" and pair[1] in OS_CALLS)
                or (pair[0] == "signal" and pair[1] in SIGNAL_NAMES)
            ):
                found.append(f"{where}: {pair[0]}.{pair[1]}")
        elif isinstance(node, ast.keyword) and node.arg == "start_new_session":
            found.append(f"{getattr(node.value, 'lineno', 0)}: start_new_session=")
        elif isinstance(node, ast.Call) and _is_os_kill_zero(node):
            # os.kill(pid, 0) probes a pid on POSIX and terminates the process on Windows.
            found.append(f"{where}: os.kill(pid, 0)")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("/proc/")
        ):  # also the literal head of an f-string
            found.append(f"{where}: {node.value!r}")
    return found


def _is_os_kill_zero(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and (func.value.id, func.attr) == ("os", "kill")
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == 0
    )


def test_no_module_outside_the_seam_makes_an_os_specific_decision() -> None:
    offenders = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in checked_modules()
        if (found := violations(path.read_text(encoding="utf-8")))
    }
    assert not offenders, (
        f"use ipykeep/platform/ (docs/platforms.md) instead of these OS-specific calls: {offenders}"
    )


def test_the_rule_sees_what_it_forbids() -> None:
    # Each line is one violation the rule must catch, so the rule above can fail.
    samples = [
        "import fcntl",
        "import msvcrt",
        "from termios import tcgetattr",
        "import pwd",
        "os.killpg(pid, 9)",
        "os.setsid()",
        "os.getpgid(pid)",
        "if os.fork() == 0: pass",
        "os.getuid()",
        "os.fchmod(fd, 0o600)",
        "os.pread(fd, 1, 0)",
        "os.open(p, os.O_CLOEXEC)",
        "signal.SIGUSR1",
        "from os import killpg",
        "signal.SIGKILL",
        "signal.SIGSTOP",
        "signal.SIGHUP",
        "signal.SIGALRM",
        "signal.setitimer(0, 1)",
        "from signal import SIGKILL",
        "if sys.platform == 'win32': pass",
        "if os.name == 'nt': pass",
        "from sys import platform",
        "subprocess.Popen(['x'], start_new_session=True)",
        "os.kill(pid, 0)",
        "open('/proc/self/status')",
        "open(f'/proc/{pid}/stat')",
    ]
    missed = [s for s in samples if len(violations(s)) != 1]
    assert not missed


@pytest.mark.parametrize(
    "allowed",
    [
        "signal.SIGINT",
        "signal.SIGTERM",
        "os.kill(pid, signal.SIGTERM)",
        "'see fcntl.flock in the docs'",
        "import platform",
        "os.getpid()",
    ],
)
def test_the_rule_allows_portable_code(allowed: str) -> None:
    assert violations(allowed) == []


def test_the_exemptions_exist() -> None:
    # A renamed exempt file would silently widen the rule's blind spot.
    assert all(path.is_file() for path in EXEMPT_FILES)
    assert (SEAM / "system.py").is_file()
    assert any("_inkernel" in p.parts for p in PACKAGE.rglob("*.py"))
