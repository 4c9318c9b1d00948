"""What a long session leaves in the kernel's memory, against a real daemon and kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ipykeep.client.connection import DaemonClient
from tests.conftest import stop_daemon
from tests.reliability.helpers import start_project

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonClient]:
    root: Path = tmp_path_factory.mktemp("memory") / "p"
    client = start_project(root, ["a = 1"])
    yield client
    stop_daemon(root)


def _text(client: DaemonClient, code: str) -> str:
    rec = client.call("execute", code=code)
    assert rec["state"] == "ok", rec
    return str(rec["output"]["text"]).strip()


def test_the_kernel_keeps_no_output_history(client):
    for _ in range(3):
        _text(client, "print('p' * 1_000_000)")
        _text(client, "'r' * 1_000_000")
    kept = _text(
        client,
        "ip = get_ipython(); "
        "print(sum(len(v) for v in ip.history_manager.outputs.values()), len(Out), "
        "len([n for n in globals() if n[:1] == '_' and n[1:].isdigit()]))",
    )
    assert kept == "0 0 0"
    assert _text(client, "40 + 2") == "42" and _text(client, "_ + 1") == "43"  # ``_`` still works


def _peak_rss(pid: int) -> int:
    """The process's peak resident size (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_100_mb_print_costs_the_daemon_under_150_mb(client):
    before = _peak_rss(client.descriptor.pid)
    rec = client.call("execute", code="print('m' * 100_000_000)")
    assert rec["state"] == "ok" and rec["output"]["dropped_bytes"] > 0
    grown = _peak_rss(client.descriptor.pid) - before
    assert grown < 150 * 2**20, f"the daemon's peak grew {grown / 2**20:.0f} MiB"
