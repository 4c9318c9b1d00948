"""Faults on a real daemon with a real kernel (static dataflow, one daemon for the module)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ipykeep.client.connection import DaemonClient
from ipykeep.client.wire import encode_request
from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import (
    STATIC,
    error_of,
    kernel_pid,
    notebook_outputs,
    start_project,
    wait_until,
    write_notebook,
)

CELLS = [
    "x = 1",  # c0
    "print('a' * 2_100_000)",  # c1: one message larger than the cap
    "import time\ntime.sleep(30)",  # c2: interrupted mid-batch
    "open('after-interrupt', 'w').write('ran')",  # c3: must not run after an interrupt
    "print('quick')",  # c4
]


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, DaemonClient]]:
    root = tmp_path_factory.mktemp("faults") / "p"
    client = start_project(root, ["x = 1"])
    write_notebook(root / "nb.ipynb", CELLS)  # after the warm-up: nothing slow runs at start
    yield root, client
    stop_daemon(root)


def _restart_if_dead(client: DaemonClient) -> None:
    (kernel,) = client.call("list_kernels")
    if kernel["state"] == "dead":
        client.call("restart")


def test_an_oversized_output_message_keeps_its_head_a_marker_and_an_artifact(proj):
    root, client = proj
    rec = client.call("execute", code="print('a' * 2_100_000)")
    assert rec["state"] == "ok"
    out = rec["output"]
    assert out["text"].startswith("aaaa") and "not recorded" in out["text"]
    assert out["dropped_bytes"] > 0 and out["uri"].startswith("ipykeep://artifacts/")
    art = client.call("read_artifact", uri=out["uri"])
    assert art["text"].startswith("a" * 1000)
    batch = client.call("run_cells", cells=["c1"])
    cell_out, note = notebook_outputs(root / "nb.ipynb")["c1"]
    assert "".join(cell_out["text"]).startswith("aaaa") and batch["write"]["written"]
    assert note["name"] == "stderr" and "is not recorded" in "".join(note["text"])


def test_interrupt_stops_the_whole_batch(proj):
    root, client = proj
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.update(r=client.call("run_cells", cells=["c2", "c3", "c4"]))
    )
    t.start()
    time.sleep(1.5)
    res = client.call("interrupt")
    assert res["action"] == "interrupted"
    t.join(30)
    batch = box["r"]
    assert batch["stopped"] == "interrupted" and not batch["ok"]
    assert [s["cell_id"] for s in batch["skipped"]] == ["c3", "c4"]
    assert all("interrupted" in s["reason"] for s in batch["skipped"])
    assert not (root / "after-interrupt").exists()
    states = {c["cell_id"]: c["state"] for c in client.call("status")["kernels"][0]["cells"]}
    assert states["c2"] == "failed" and "running" not in states.values()


def test_a_disconnected_client_cancels_its_batch(proj):
    root, client = proj
    ep = client.descriptor.endpoint
    with socket.create_connection((ep.host, ep.port)) as sock:
        sock.sendall(encode_request("run_cells", {"cells": ["c2", "c3"]}, ep.token, 1))
        time.sleep(1.0)
    assert wait_until(lambda: not client.call("list_kernels")[0]["running"], 10)
    time.sleep(0.5)
    assert not (root / "after-interrupt").exists()
    assert client.call("execute", code="print(x + 1)")["output"]["text"].strip() == "2"


def test_an_archive_write_failing_mid_batch_leaves_no_cell_running(proj):
    root, client = proj
    (kernel,) = client.call("list_kernels")
    record = root / ".ipykeep" / "kernels" / kernel["kernel_id"] / "record.jsonl"
    saved = record.read_bytes()
    record.unlink()
    record.mkdir()  # appending now fails with an OSError (as a full disk would)
    try:
        batch = client.call("run_cells", cells=["c0", "c4"])
        assert batch["ok"] and [r["state"] for r in batch["results"]] == ["ok", "ok"]
        notices = batch.get("notices", []) + [
            n for r in batch["results"] for n in r.get("notices", [])
        ]
        assert any("record could not be written" in n for n in notices)
        states = [c["state"] for c in client.call("status")["kernels"][0]["cells"]]
        assert "running" not in states
    finally:
        record.rmdir()
        record.write_bytes(saved)


@pytest.mark.posix
def test_a_read_only_notebook_is_refused_and_results_are_kept(proj):
    root, client = proj
    path = root / "nb.ipynb"
    before = path.read_bytes()
    os.chmod(path, 0o444)
    try:
        batch = client.call("run_cells", cells=["c4"])
        assert (
            batch["results"][0]["state"] == "ok"
            and "quick" in batch["results"][0]["output"]["text"]
        )
        assert batch["write"]["written"] is False and "read-only" in batch["write"]["error"]
        assert path.read_bytes() == before
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
        handle = batch["results"][0]["handle"]
        assert (
            client.call("read_execution", handle=handle)["state"] == "ok"
        )  # the record stays available
    finally:
        os.chmod(path, 0o644)


def test_a_concurrent_user_edit_is_kept(proj):
    root, client = proj
    write_notebook(root / "nb.ipynb", CELLS[:2] + ["import time\ntime.sleep(1.5)"] + CELLS[3:])
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=client.call("run_cells", cells=["c2", "c4"])))
    t.start()
    time.sleep(0.5)
    data = json.loads((root / "nb.ipynb").read_text())
    data["cells"][4]["source"] = "print('edited by the user')"
    (root / "nb.ipynb").write_text(json.dumps(data))
    t.join(30)
    after = json.loads((root / "nb.ipynb").read_text())
    assert "".join(after["cells"][4]["source"]) == "print('edited by the user')"
    assert box["r"]["write"]["skipped_edited"] == ["c4"]
    write_notebook(root / "nb.ipynb", CELLS)


@pytest.mark.posix
def test_memory_error_fork_and_a_100_mb_flood_leave_the_daemon_bounded(proj):
    root, client = proj
    rec = client.call("execute", code="b = bytearray(1 << 46)")
    assert rec["state"] == "failed" and rec["error"]["ename"] == "MemoryError"
    rec = client.call(
        "execute",
        code="import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)[1]",
    )
    assert rec["state"] == "ok" and rec["output"]["text"].strip() == "0"
    daemon = psutil.Process(client.descriptor.pid)
    rss_before = daemon.memory_info().rss
    rec = client.call("execute", code="for _ in range(100):\n    print('x' * 1_000_000)")
    assert rec["state"] == "ok" and rec["output"]["dropped_bytes"] >= 97_000_000
    assert len(rec["output"]["text"]) < 100_000
    assert daemon.memory_info().rss - rss_before < 150 * 1024 * 1024
    assert client.call("execute", code="print(x)")["output"]["text"].strip() == "1"


def test_a_cell_ignoring_sigint_is_killed_and_the_kernel_restarted(proj):
    root, client = proj
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
    rec = client.call("execute", code=code, yield_time_ms=0)
    time.sleep(0.5)
    res = client.call("interrupt")
    assert res["action"] == "killed_and_restarted"
    assert client.call("read_execution", handle=rec["handle"])["state"] in ("lost", "interrupted")
    assert client.call("execute", code="print('alive')")["output"]["text"].strip() == "alive"


@pytest.mark.posix
def test_kernel_death_mid_cell_and_os_exit_give_exit_7_then_restart(proj):
    root, client = proj
    _restart_if_dead(client)
    # SIGKILL of the kernel while a cell runs
    rec = client.call("execute", code="import time\ntime.sleep(30)", yield_time_ms=0)
    time.sleep(0.3)
    os.kill(kernel_pid(client), signal.SIGKILL)
    assert wait_until(
        lambda: client.call("read_execution", handle=rec["handle"])["state"] == "lost", 10
    )
    assert client.call("list_kernels")[0]["state"] == "dead"
    assert error_of(client, "execute", code="1").code == "kernel_died"
    client.call("restart")
    # a cell calling os._exit: the rest of the batch is skipped and the CLI says so, exit 7
    write_notebook(root / "nb.ipynb", ["import os\nos._exit(3)", "print('never')"])
    res = run_cli("run", "c0", "c1", cwd=root, env=STATIC)
    assert res.returncode == 7, (res.stdout, res.stderr)
    assert "restart" in res.stderr
    res = run_cli("run-stale", "--execute", cwd=root, env=STATIC)
    assert res.returncode == 7, (res.stdout, res.stderr)
    write_notebook(root / "nb.ipynb", CELLS)
    client.call("run_cells", cells=["c0"])
    assert run_cli("restart", cwd=root, env=STATIC).returncode == 0
    plan = json.loads(run_cli("run-stale", "--json", cwd=root, env=STATIC).stdout)
    reasons = {e["cell_id"]: [r["kind"] for r in e["reasons"]] for e in plan["stale"]}
    assert "kernel_restarted" in reasons["c0"]  # the restart says what must re-run
    assert client.call("execute", code="print('back')")["output"]["text"].strip() == "back"
