"""The foundation's acceptance, driven through the real CLI, daemon and ipyflow kernels."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import time
from pathlib import Path

import nbformat
import pytest

from ipykeep.client.connection import find_daemon, pid_alive
from tests.conftest import make_project, run_cli, stop_daemon

pytestmark = pytest.mark.kernel


def small_notebook(path: Path, cells: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(s[3:])
        if s.startswith("md:")
        else nbformat.v4.new_code_cell(s)
        for s in cells
    ]
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("foundation") / "proj")
    started = time.monotonic()
    res = run_cli("start", "01_eda.ipynb", cwd=root, timeout=120)
    elapsed = time.monotonic() - started
    yield root, res, elapsed
    stop_daemon(root)


def kernel_pids(root: Path) -> list[int]:
    st = json.loads(run_cli("status", "--json", cwd=root).stdout)
    return [k["pid"] for k in st["kernels"]]


def test_start_warms_with_progress_and_returns_with_captured_pipes(example):
    root, res, elapsed = example
    assert res.returncode == 0, res.stderr
    # progress went to stderr, the kernel summary to stdout
    assert "warming k" in res.stderr and "warmed k" in res.stderr and "/7 cells" in res.stderr
    assert "01_eda.ipynb" in res.stdout
    # subprocess.run(capture_output=True) returned: the daemon holds none of our pipes
    assert elapsed < 60


def test_status_json_shape_and_cell_states(example):
    root, *_ = example
    res = run_cli("status", "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert set(st["daemon"]) >= {"pid", "version", "project"}
    assert st["daemon"]["project"] == str(root)
    (k,) = st["kernels"]
    assert set(k) >= {"kernel_id", "pid", "state", "notebook", "cells"}
    assert k["notebook"] == str(root / "01_eda.ipynb")
    code = [c for c in k["cells"] if c["cell_type"] == "code"]
    assert len(code) == 7 and all(c["state"] == "ok" for c in code)
    assert [c["index"] for c in k["cells"]] == list(range(9))


def test_outputs_were_written_after_warm_up(example):
    root, *_ = example
    nb = nbformat.read(root / "01_eda.ipynb", as_version=4)
    load = nb.cells[2]
    assert any("loaded 4,000 rows" in "".join(o.get("text", "")) for o in load.outputs)


def test_exec_keeps_state_between_calls(example):
    root, *_ = example
    assert run_cli("exec", "x = 41", cwd=root).returncode == 0
    res = run_cli("exec", "print(x + 1)", cwd=root)
    assert res.returncode == 0 and res.stdout.strip() == "42"


def test_raising_exec_reports_error_and_kernel_stays_usable(example):
    root, *_ = example
    res = run_cli("exec", "def f():\n    raise ValueError('bad value')\nf()", cwd=root)
    assert res.returncode == 1
    assert "ValueError" in res.stderr and "bad value" in res.stderr and "f()" in res.stderr
    js = json.loads(run_cli("exec", "raise KeyError('k')", "--json", cwd=root).stdout)
    assert (
        js["state"] == "failed"
        and js["error"]["ename"] == "KeyError"
        and "Traceback" in js["error"]["traceback"]
    )
    assert run_cli("exec", "print(len(clean) > 0)", cwd=root).stdout.strip() == "True"


def test_exec_no_wait_returns_the_handle_and_read_follows_it(example):
    root, *_ = example
    slow = "import time\nfor i in range(3):\n    print('tick', i, flush=True); time.sleep(0.7)"
    started = run_cli("exec", "--no-wait", slow, "--json", cwd=root)
    assert started.returncode == 0, started.stderr
    rec = json.loads(started.stdout)
    assert rec["state"] in ("queued", "running"), rec
    handle = rec["handle"]
    text = run_cli("exec", "--no-wait", "1 + 1", cwd=root)
    assert text.returncode == 0
    followed = run_cli("read", handle, "--wait", cwd=root)
    assert followed.returncode == 0, followed.stderr
    assert "tick 2" in followed.stdout
    again = json.loads(run_cli("read", handle, "--json", cwd=root).stdout)
    assert again["state"] == "ok" and again["output"]["text"] == ""  # nothing new since
    missing = run_cli("read", "c99999", cwd=root)
    assert missing.returncode == 5 and "hint:" in missing.stderr


def test_a_notebook_that_does_not_exist_is_not_suggested_to_start(example):
    root, *_ = example
    res = run_cli("status", "nope.ipynb", cwd=root)
    assert res.returncode == 6
    assert "no such file" in res.stderr and "ipykeep start" not in res.stderr, res.stderr
    other = root / "other.ipynb"
    other.write_text((root / "01_eda.ipynb").read_text())
    try:
        res = run_cli("status", "other.ipynb", cwd=root)
        assert res.returncode == 6 and "ipykeep start" in res.stderr, res.stderr
    finally:
        other.unlink()


def test_a_second_start_says_it_reused_the_running_kernel(example):
    root, *_ = example
    again = run_cli("start", "01_eda.ipynb", cwd=root)
    assert again.returncode == 0, again.stderr
    assert "already running for this notebook: reused it" in again.stdout, again.stdout
    assert "warmed" not in again.stderr
    rec = json.loads(run_cli("start", "01_eda.ipynb", "--json", cwd=root).stdout)
    assert rec["reused"] is True


def test_run_writes_outputs_and_keeps_a_concurrent_edit(example):
    root, *_ = example
    path = root / "01_eda.ipynb"
    nb = nbformat.read(path, as_version=4)
    slow_id, other_id = nb.cells[3].id, nb.cells[5].id
    nb.cells[3].source = "import time as _t\n_t.sleep(2)\nprint('slow cell done')"
    nbformat.write(nb, path)

    def edit_while_running():
        time.sleep(0.8)
        cur = nbformat.read(path, as_version=4)
        cur.cells[5].source = cur.cells[5].source + "\n# edited by someone else"
        nbformat.write(cur, path)

    editor = threading.Thread(target=edit_while_running)
    editor.start()
    res = run_cli("run", slow_id, cwd=root)
    editor.join()
    assert res.returncode == 0, res.stderr
    after = nbformat.read(path, as_version=4)
    assert "slow cell done" in "".join(after.cells[3].outputs[0]["text"])
    assert after.cells[5].source.endswith("# edited by someone else")
    assert after.cells[5].id == other_id


def test_run_by_index_and_failing_cell_exit_code(example):
    root, *_ = example
    path = root / "01_eda.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("raise RuntimeError('nope')"))
    nbformat.write(nb, path)
    res = run_cli("run", "1", str(len(nb.cells) - 1), cwd=root)
    assert res.returncode == 1
    assert "RuntimeError" in res.stdout and "2 of 2 planned cell(s) ran (1 failed)" in res.stdout


def test_bad_cells_give_clear_errors_and_change_nothing(example):
    root, *_ = example
    before = (root / "01_eda.ipynb").read_bytes()
    res = run_cli("run", "no-such-id", cwd=root)
    assert (
        res.returncode == 5
        and "no cell with id 'no-such-id'" in res.stderr
        and "hint:" in res.stderr
    )
    res = run_cli("run", "999", cwd=root)
    assert res.returncode == 5 and "out of range" in res.stderr
    assert (root / "01_eda.ipynb").read_bytes() == before


@pytest.mark.posix
def test_descriptor_is_private_and_wrong_tokens_are_refused(example):
    root, *_ = example
    desc_path = root / ".ipykeep" / "run" / "daemon.json"
    assert stat.S_IMODE(desc_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(desc_path.parent.stat().st_mode) == 0o700
    desc = json.loads(desc_path.read_text())
    for token in (None, "wrong-token"):
        req = {"jsonrpc": "2.0", "id": 1, "method": "status", "params": {}}
        if token:
            req["token"] = token
        with socket.create_connection((desc["host"], desc["port"]), timeout=5) as sock:
            sock.sendall(json.dumps(req).encode() + b"\n")
            reply = json.loads(sock.makefile().readline())
        assert reply["error"]["data"]["code"] == "unauthorized"
        assert "result" not in reply
    log = (root / ".ipykeep" / "run" / "daemon.log").read_text()
    assert "refused request 'status'" in log
    assert desc["token"] not in log and "wrong-token" not in log


def test_bad_notebooks_are_rejected_before_anything_starts(tmp_path):
    root = make_project(tmp_path / "p", example=False)
    (root / "notjson.ipynb").write_text("{oops")
    (root / "invalid.ipynb").write_text(
        json.dumps(
            {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}
        )
    )
    for name, needle in (
        ("missing.ipynb", "not found"),
        ("notjson.ipynb", "not valid JSON"),
        ("invalid.ipynb", "not a valid notebook"),
    ):
        before = (root / name).read_bytes() if (root / name).exists() else None
        res = run_cli("start", name, cwd=root)
        assert res.returncode == 4, res.stderr
        assert needle in res.stderr and "hint:" in res.stderr
        if before is not None:
            assert (root / name).read_bytes() == before
    assert not (root / ".ipykeep" / "run" / "daemon.json").exists()


def test_commands_without_daemon_say_what_to_run(tmp_path):
    root = make_project(tmp_path / "p", example=False)
    for args in (("status",), ("exec", "1"), ("run", "0")):
        res = run_cli(*args, cwd=root)
        assert res.returncode == 3
        assert "no ipykeep daemon is running" in res.stderr and "ipykeep start" in res.stderr


@pytest.mark.posix
def test_sigkill_of_the_daemon_leaves_no_kernel_and_next_start_works(tmp_path):
    root = make_project(tmp_path / "p", example=False)
    small_notebook(root / "a.ipynb", ["a = 1"])
    assert run_cli("start", "a.ipynb", cwd=root).returncode == 0
    desc = find_daemon(root)
    (kpid,) = kernel_pids(root)
    os.kill(desc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(kpid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(kpid), "kernel outlived its daemon by more than 5 s"
    res = run_cli("start", "a.ipynb", cwd=root)
    assert res.returncode == 0, res.stderr
    assert run_cli("exec", "print(a)", cwd=root).stdout.strip() == "1"
    stop = run_cli("stop", "--all", cwd=root)
    assert stop.returncode == 0
    assert find_daemon(root) is None


def test_two_simultaneous_starts_end_with_one_daemon_and_stop_all_cleans_up(tmp_path):
    import subprocess
    import sys

    from tests.conftest import cli_env

    root = make_project(tmp_path / "p", example=False)
    small_notebook(root / "a.ipynb", ["a = 1"])
    small_notebook(root / "b.ipynb", ["b = 2"])
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ipykeep", "start", nb],
            cwd=root,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for nb in ("a.ipynb", "b.ipynb")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    st = json.loads(run_cli("status", "--json", cwd=root).stdout)
    assert len(st["kernels"]) == 2
    daemon_pid = st["daemon"]["pid"]
    daemons = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_daemon_of(int(p), root)]
    assert daemons == [daemon_pid]
    pids = [k["pid"] for k in st["kernels"]] + [daemon_pid]
    assert run_cli("stop", "--all", cwd=root).returncode == 0
    assert not any(pid_alive(p) for p in pids)


def _is_daemon_of(pid: int, root: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ipykeep.daemon" in cmd and str(root).encode() in cmd


def test_idle_expiry_closes_the_kernel_and_ids_are_never_reused(tmp_path):
    from ipykeep.api.errors import UnknownKernelError
    from ipykeep.client.connection import DaemonClient, ensure_daemon
    from tests.conftest import cli_env

    root = make_project(tmp_path / "p", example=False)
    small_notebook(root / "a.ipynb", ["a = 1"])
    res = run_cli("start", "a.ipynb", "--json", cwd=root, env=cli_env(IPYKEEP_IDLE_TIMEOUT="1"))
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout)["kernel_id"]
    desc = find_daemon(root)  # None: the daemon has exited already (a loaded machine)
    deadline = time.monotonic() + 15
    while desc is not None and pid_alive(desc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert desc is None or not pid_alive(desc.pid), (
        "the daemon should exit once its last kernel expired"
    )
    res = run_cli("exec", "print(a)", cwd=root)
    assert res.returncode == 3 and "ipykeep start" in res.stderr
    client = ensure_daemon(root)
    try:
        with pytest.raises(UnknownKernelError, match=r"was closed: idle for more than 1 s"):
            client.call("execute", code="1", kernel_id=first)
        again = client.call("create_kernel", notebook=str(root / "a.ipynb"))
        assert again["kernel_id"] != first
    finally:
        DaemonClient(client.descriptor).call("shutdown")


def test_with_two_kernels_the_hint_is_true_and_a_kernel_id_selects_one(tmp_path):
    root = make_project(tmp_path / "two", example=False)
    small_notebook(root / "a.ipynb", ["who = 'a'"])
    small_notebook(root / "b.ipynb", ["who = 'b'"])
    try:
        ids = []
        for name in ("a.ipynb", "b.ipynb"):
            started = run_cli("start", name, "--json", cwd=root)
            assert started.returncode == 0, started.stderr
            ids.append(json.loads(started.stdout)["kernel_id"])
        ambiguous = run_cli("exec", "who", cwd=root)
        assert ambiguous.returncode == 2 and "-k" in ambiguous.stderr, ambiguous.stderr
        by_option = run_cli("exec", "-k", ids[1], "print(who)", cwd=root)
        assert by_option.returncode == 0 and by_option.stdout.strip() == "b", by_option.stderr
        by_notebook_option = run_cli("exec", "-n", ids[0], "print(who)", cwd=root)
        assert by_notebook_option.stdout.strip() == "a", by_notebook_option.stderr
        status = json.loads(run_cli("status", ids[1], "--json", cwd=root).stdout)
        assert [k["kernel_id"] for k in status["kernels"]] == [ids[1]]
        assert run_cli("stop", ids[0], cwd=root).returncode == 0
        assert run_cli("exec", "-k", ids[0], "1", cwd=root).returncode == 6  # closed, said so
    finally:
        stop_daemon(root)
