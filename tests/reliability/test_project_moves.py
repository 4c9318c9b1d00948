"""A project copied or moved while its daemon runs: clients never act on another directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipykeep.client.connection import MOVED_DAEMON_EXIT_S, find_daemon, pid_alive
from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import STATIC, start_project, wait_until

pytestmark = pytest.mark.kernel


def test_a_copied_project_gets_a_daemon_of_its_own(tmp_path: Path) -> None:
    original = tmp_path / "p"
    client = start_project(original, ["x = 1"])
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)  # .ipykeep and its descriptor come along
    try:
        # the copy's descriptor names the original's daemon: it is not the copy's
        assert find_daemon(copy) is None
        ran = run_cli("exec", "x = 2", cwd=copy, env=STATIC)
        assert ran.returncode != 0 and "no ipykeep daemon is running for" in ran.stderr
        assert client.call("execute", code="x")["output"]["text"].strip() == "1"
    finally:
        stop_daemon(original)
        stop_daemon(copy)


def test_a_moved_project_stops_its_daemon_and_comes_back_in_its_new_place(tmp_path: Path) -> None:
    before = tmp_path / "p"
    client = start_project(before, ["x = 41", "y = x + 1"])
    old_pid = client.descriptor.pid
    after = tmp_path / "moved"
    before.rename(after)
    try:
        # the daemon notices within a second or so; a client in the new place waits for that
        assert find_daemon(after) is None
        assert wait_until(lambda: not pid_alive(old_pid), MOVED_DAEMON_EXIT_S)
        # nothing was written where the project used to be
        assert not before.exists()
        started = run_cli("start", "nb.ipynb", cwd=after, env=STATIC)
        assert started.returncode == 0, started.stderr
        desc = find_daemon(after)
        assert desc is not None and desc.pid != old_pid and desc.project == str(after)
        shown = run_cli("exec", "y", cwd=after, env=STATIC)
        assert shown.returncode == 0 and shown.stdout.strip().endswith("42"), shown
    finally:
        stop_daemon(after)
