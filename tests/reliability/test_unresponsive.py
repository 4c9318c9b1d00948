"""A kernel that stops answering (SIGSTOP): calls end with the reason and the fix, never hang."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import STATIC, kernel_pid, start_project, wait_until

pytestmark = pytest.mark.kernel


def _state(root: Path) -> str:
    res = run_cli("status", "--json", cwd=root, env=STATIC, timeout=30)
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["kernels"][0]["state"])


@pytest.mark.posix
def test_a_sigstopped_kernel_is_reported_with_the_fix_and_recovers_on_sigcont(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    client = start_project(root, ["a = 1", "b = a + 1"])
    pid = kernel_pid(client)
    try:
        os.kill(pid, signal.SIGSTOP)
        # A call already waiting on the kernel ends (run_cli's timeout fails a hang).
        res = run_cli("exec", "print('never')", cwd=root, env=STATIC, timeout=60)
        said = res.stdout + res.stderr
        assert res.returncode != 0, said
        assert "kernel k1 is not responding" in said and f"kill -CONT {pid}" in said, said
        assert _state(root) == "unresponsive"
        # New work is refused at once with the typed error and its hint.
        res = run_cli("exec", "print('refused')", cwd=root, env=STATIC, timeout=60)
        assert res.returncode == 7, res.stdout + res.stderr
        assert "not responding" in res.stderr and "ipykeep restart" in res.stderr, res.stderr
        res = run_cli("run", "c0", "c1", cwd=root, env=STATIC, timeout=60)
        assert res.returncode == 7, res.stdout + res.stderr
        assert "stopped responding" in res.stdout + res.stderr
        # Resumed, the kernel answers again, its state intact.
        os.kill(pid, signal.SIGCONT)
        assert wait_until(lambda: _state(root) in ("idle", "busy"), 30)
        res = run_cli("exec", "print(a + 41)", cwd=root, env=STATIC, timeout=60)
        assert res.returncode == 0 and "42" in res.stdout, res.stdout + res.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
        stop_daemon(root)
