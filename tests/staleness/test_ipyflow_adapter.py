"""Real ipyflow kernel: the in-kernel probes (file tracking, ipyflow record) and the adapter's
parsing of their replies, fed into the staleness tracker.

Set IPYKEEP_RECORD_FIXTURES=1 to rewrite tests/fixtures/ipyflow/ from this kernel's replies.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec

from ipykeep.kernel.inkernel import FILETRACK, IPYFLOW, InKernelModule, install_expression
from ipykeep.staleness import ipyflow as ipyflow_adapter
from ipykeep.staleness import probes
from ipykeep.staleness.models import FileStamp, NotebookCell
from ipykeep.staleness.tracker import StalenessTracker

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ipyflow"
RECORD = os.environ.get("IPYKEEP_RECORD_FIXTURES") == "1"


class Kernel:
    """Just enough of a client to run cells with a cellId and evaluate probe expressions."""

    def __init__(self, km: AsyncKernelManager) -> None:
        self.km = km
        self.kc = km.client()

    async def execute(
        self,
        code: str,
        cell_id: str | None = None,
        silent: bool = False,
        expressions: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        msg = self.kc.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": not silent,
                "user_expressions": expressions or {},
                "allow_stdin": False,
                "stop_on_error": False,
            },
        )
        if cell_id is not None:
            msg["metadata"]["cellId"] = cell_id
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        reply = None
        while reply is None:
            candidate = await self.kc.get_shell_msg(timeout=60)
            if candidate["parent_header"].get("msg_id") == msg_id:
                reply = candidate
        while True:  # drain iopub until this request is idle
            io = await self.kc.get_iopub_msg(timeout=60)
            if (
                io["parent_header"].get("msg_id") == msg_id
                and io["msg_type"] == "status"
                and io["content"]["execution_state"] == "idle"
            ):
                break
        return reply["content"]

    async def probe(self, expr: str) -> Any:
        content = await self.execute("", silent=True, expressions={"r": expr})
        assert content["status"] == "ok", content
        return probes.decode_expression_value(content["user_expressions"]["r"])

    async def install(self, *modules: InKernelModule) -> None:
        content = await self.execute(install_expression(*modules), silent=True)
        assert content["status"] == "ok", content


@pytest.fixture(scope="module")
async def workdir() -> Any:
    with tempfile.TemporaryDirectory(prefix="ipykeep-ipyflow-") as d:
        yield Path(d).resolve()


@pytest.fixture(scope="module")
async def kernel(workdir: Path) -> Any:
    km = AsyncKernelManager(transport="ipc")
    km._kernel_spec = KernelSpec(
        argv=[sys.executable, "-m", "ipyflow.kernel", "-f", "{connection_file}"],
        display_name="ipyflow",
        language="python",
    )
    km.connection_file = str(workdir / "kernel.json")
    km.ip = str(workdir / "ipc")
    await km.start_kernel(cwd=str(workdir))
    k = Kernel(km)
    k.kc.start_channels()
    await k.kc.wait_for_ready(timeout=60)
    await k.install(FILETRACK, IPYFLOW)
    await k.probe(probes.filetrack_install_expr(str(workdir)))
    try:
        yield k
    finally:
        k.kc.stop_channels()
        await km.shutdown_kernel(now=True)


def _save(name: str, payload: Any) -> None:
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / name).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


CELLS = [
    ("c-load", 'import pandas as pd\ndf = pd.read_csv("data.csv")'),
    ("c-helper", "def read_side(p):\n    with open(p) as fh:\n        return fh.read()"),
    ("c-side", 'side = read_side("side.txt")\nfactor = 3'),
    ("c-clean", "df['b'] = df.a * factor"),
    (
        "c-report",
        "total = df.b.sum()\nwith open('report.txt', 'w') as fh:\n    fh.write(str(total))",
    ),
]


async def test_probes_in_a_real_ipyflow_kernel(kernel: Kernel, workdir: Path) -> None:
    (workdir / "data.csv").write_text("a\n1\n2\n")
    (workdir / "side.txt").write_text("hello")
    tracker = StalenessTracker()
    seen_files: dict[str, list[str]] = {}
    for index, (cid, source) in enumerate(CELLS):
        await kernel.probe(probes.filetrack_begin_expr())
        content = await kernel.execute(source, cell_id=cid)
        assert content["status"] == "ok", content
        end = await kernel.probe(probes.filetrack_end_expr())
        files = probes.parse_filetrack_end(end)
        seen_files[cid] = [Path(f.path).name for f in files]
        reply = await kernel.probe(ipyflow_adapter.cell_expr(cid))
        _save(f"cell_{cid}.json", reply)
        dyn = ipyflow_adapter.parse_cell(reply)
        assert dyn is not None and dyn.cell_id == cid
        tracker.record_cell_run(cid, index, source, "ok", files, dynamic=dyn)

    # the audit hook sees pandas' C parser, reads through a helper charged to the caller,
    # and not the file the report cell writes
    assert seen_files["c-load"] == ["data.csv"]
    assert seen_files["c-side"] == ["side.txt"]
    assert seen_files["c-helper"] == [] and seen_files["c-report"] == []

    snap_payload = await kernel.probe(ipyflow_adapter.snapshot_expr())
    _save("snapshot.json", snap_payload)
    snap = ipyflow_adapter.parse_snapshot(snap_payload)
    assert snap.available
    assert snap.last_writer["df"] in ("c-load", "c-clean")
    assert snap.last_writer["factor"] == "c-side"
    clean = snap.cells["c-clean"]
    assert "c-side" in clean.parents and "factor" in clean.parents["c-side"]
    assert "df" in clean.used

    def stat(path: str) -> FileStamp | None:
        p = workdir / path
        if not p.exists():
            return None
        st = p.stat()
        return FileStamp(path, st.st_mtime_ns, st.st_size)

    notebook = [NotebookCell(cid, i, "code", src) for i, (cid, src) in enumerate(CELLS)]
    assert tracker.plan(notebook, stat).is_empty
    (workdir / "side.txt").write_text("changed!")
    plan = tracker.plan(notebook, stat)
    assert plan.cell_ids == ("c-load", "c-side", "c-clean", "c-report")
    assert plan.entry("c-side").kinds == {"file_changed"}  # type: ignore[union-attr]
    assert plan.entry("c-load").kinds == {"restores"}  # type: ignore[union-attr]


async def test_silent_probe_runs_do_not_enter_ipyflow(kernel: Kernel) -> None:
    before = ipyflow_adapter.parse_snapshot(await kernel.probe(ipyflow_adapter.snapshot_expr()))
    await kernel.probe(probes.filetrack_begin_expr())
    await kernel.probe(probes.filetrack_end_expr())
    after = ipyflow_adapter.parse_snapshot(await kernel.probe(ipyflow_adapter.snapshot_expr()))
    assert after.counters == before.counters


async def test_unknown_cell_is_none(kernel: Kernel) -> None:
    reply = await kernel.probe(ipyflow_adapter.cell_expr("never-ran"))
    assert ipyflow_adapter.parse_cell(reply) is None
