"""Scratch code on a subshell of an ipyflow kernel stays out of ipyflow's ``run_cell``.

ipyflow's ``run_cell`` ends each cell with its output recorder, which belongs to the main
thread's traced cell; a subshell request running it at the same moment once failed there, and
the request ended with no reply and no output (1 call in ~5,000 under 10 concurrent clients).
The race itself is rare, so this makes ipyflow's end-of-cell step fail whenever it runs off the
main thread: scratch on a subshell must still run and return its output.
"""

from __future__ import annotations

import asyncio

import nbformat
import pytest

from ipykeep.daemon.composition import compose
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

pytestmark = pytest.mark.kernel

BREAK_OFF_MAIN = """
import threading
from ipyflow.tracing.output_recorder import OutputRecorder
_done = OutputRecorder.done_capturing_output
def _off_main_fails(self):
    if threading.current_thread() is not threading.main_thread():
        raise AttributeError("ipyflow's output recorder used off the main thread")
    return _done(self)
OutputRecorder.done_capturing_output = _off_main_fails
"""


@pytest.mark.timeout(180)
async def test_subshell_scratch_does_not_run_ipyflows_cell_wrapper(tmp_path) -> None:
    root = make_project(tmp_path / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("base = 10"),
        nbformat.v4.new_code_cell("import time\ntime.sleep(3)"),
    ]
    nbformat.write(nb, root / "n.ipynb")
    engine = compose(
        ProjectPaths(root), Config(idle_timeout=0, dataflow="ipyflow", checkpoints=False)
    ).engine
    try:
        rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), warm=False)
        kid = rec.kernel_id
        assert (await engine.run_cells(["0"], kernel_id=kid)).ok
        broke = await engine.execute(BREAK_OFF_MAIN, kernel_id=kid)
        assert broke.state == "ok", broke.output.text
        slow = asyncio.create_task(engine.run_cells(["1"], kernel_id=kid))
        await asyncio.sleep(0.8)
        quick = await engine.execute("print(base + 1)", kernel_id=kid, yield_time_ms=10_000)
        assert quick.subshell, "the main shell was busy: this must have run on a subshell"
        assert quick.state == "ok" and quick.output.text.strip() == "11", quick
        assert (await slow).ok
    finally:
        await engine.shutdown()
