"""What a long session leaves in the kernel's memory, against a real daemon and kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from ipykeep.client.connection import DaemonClient
from ipykeep.kernel.providers.session import DIGEST_HISTORY
from tests.conftest import stop_daemon
from tests.reliability.helpers import kernel_pid, start_project, write_notebook

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


def test_the_kernel_remembers_as_few_signatures_as_the_daemon(client):
    # jupyter_client's default, 65,536 signatures kept against replays (~10 MB), took hours of
    # calls to fill: the kernel's memory grew with every call until then
    session = "get_ipython().kernel.session"
    size = _text(client, f"print({session}.digest_history_size, len({session}.digest_history))")
    remembered, held = (int(n) for n in size.split())
    assert remembered == DIGEST_HISTORY and 0 < held <= DIGEST_HISTORY


def _status(pid: int, field: str) -> int:
    """A size from the process's /proc status (``VmHWM``: peak resident, ``VmRSS``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _peak_rss(pid: int) -> int:
    return _status(pid, "VmHWM")


def _reset_peak(pid: int) -> int:
    """Start the process's peak afresh (``clear_refs`` 5) and return its resident size then."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _status(pid, "VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_100_mb_print_costs_the_daemon_under_150_mb(client):
    before = _peak_rss(client.descriptor.pid)
    rec = client.call("execute", code="print('m' * 100_000_000)")
    assert rec["state"] == "ok" and rec["output"]["dropped_bytes"] > 0
    grown = _peak_rss(client.descriptor.pid) - before
    assert grown < 150 * 2**20, f"the daemon's peak grew {grown / 2**20:.0f} MiB"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_notebook_cell_printing_100_mb_in_1_mb_lines_holds_it_in_no_process(client):
    """100 prints of 1 MB in one flush interval were one 100 MB message: the daemon decoded it
    whole (peak +286 MB) and the kernel built it (+290 MB). Each process may hold the output
    about once (the daemon's receive queue, if it falls behind), never several times over."""
    code = "for i in range(100):\n    print('y' * 1_000_000)"
    write_notebook(Path(client.descriptor.project) / "nb.ipynb", ["a = 1", code])
    daemon, kernel = client.descriptor.pid, kernel_pid(client)
    before = {pid: _reset_peak(pid) for pid in (daemon, kernel)}
    batch = client.call("run_cells", cells=["c1"])
    assert batch["ok"], batch
    grown = {pid: _peak_rss(pid) - rss for pid, rss in before.items()}
    output = 100 * 1_000_001
    assert grown[daemon] < 1.5 * output, f"the daemon's peak grew {grown[daemon] / 2**20:.0f} MiB"
    assert grown[kernel] < 1.5 * output, f"the kernel's peak grew {grown[kernel] / 2**20:.0f} MiB"
    # the notebook keeps the head, and says what it did not keep
    cell = nbformat.read(Path(client.descriptor.project) / "nb.ipynb", as_version=4).cells[1]
    head, note = cell.outputs
    assert head.name == "stdout" and head.text.startswith("y" * 1_000_000 + "\ny")
    assert (
        note.name == "stderr"
        and "is not recorded" in note.text
        and "more were not kept" in note.text
    )
