"""The daemon keeps a bounded number of executions' outputs in memory; the rest are read back
from the kernel's archive (a real kernel, driven in-process)."""

from __future__ import annotations

import nbformat
import pytest
import pytest_asyncio

from ipykeep.daemon.composition import compose
from ipykeep.engine.retention import OutputRetention
from ipykeep.kernel.execution import Execution
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

pytestmark = pytest.mark.kernel

KEPT = 4
PRINT_CHARS = 300_000


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eng(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("retention") / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"print('{i}' * {PRINT_CHARS})", id=f"c{i}") for i in range(7)
    ]
    nbformat.write(nb, root / "n.ipynb")
    composition = compose(
        ProjectPaths(root), Config(idle_timeout=0, kept_outputs=KEPT, kept_outputs_mb=1)
    )
    engine = composition.engine
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), warm=False)
    yield engine, rec.kernel_id, root
    await engine.shutdown()


async def test_older_outputs_leave_memory_and_are_read_from_the_archive(eng):
    engine, kid, _ = eng
    session = engine.kernels[kid]
    handles = []
    for i in range(10):
        rec = await engine.execute(f"print('{i % 10}' * {PRINT_CHARS}, 'end{i}')", kernel_id=kid)
        assert rec.state == "ok"
        handles.append(rec.handle)
    in_memory = [ex for ex in session.executions.values() if ex.events or ex.outputs]
    assert len(in_memory) <= KEPT
    assert session.retention.held_bytes <= 1_000_000
    first = session.executions[handles[0]]
    assert first.spilled and not first.events
    again = await engine.read_execution(handles[0], kernel_id=kid, cursor=0)
    assert again.state == "ok" and again.output.total_chars == PRINT_CHARS + len(" end0\n")
    assert again.output.text.endswith("end0\n") and again.output.full_path
    latest = await engine.read_execution(handles[-1], kernel_id=kid, cursor=0)
    assert latest.output.text.endswith("end9\n")


async def test_a_batch_longer_than_the_budget_writes_every_output(eng):
    engine, kid, root = eng
    batch = await engine.run_cells(cells=[f"c{i}" for i in range(7)], kernel_id=kid)
    assert batch.ok
    nb = nbformat.read(root / "n.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        (out,) = cell.outputs
        assert out["text"].startswith(str(i) * 1000)
    spilled = [engine.kernels[kid].executions[r.handle].spilled for r in batch.results]
    assert any(spilled) and not all(spilled)


def _finished(handle: str, size: int) -> Execution:
    ex = Execution(handle=handle, kernel_id="k1", code="", kind="scratch", state="ok")
    ex.recorded_bytes = size
    ex.events.append(object())  # type: ignore[arg-type]
    return ex


def test_the_budget_counts_records_and_bytes():
    kept = OutputRetention()
    exs = [_finished(f"c{i}", 100) for i in range(5)]
    kept.keep(exs, max_records=3, max_bytes=10_000)
    assert [ex.spilled for ex in exs] == [True, True, False, False, False]
    big = _finished("c9", 9_950)
    kept.keep([big], max_records=3, max_bytes=10_000)
    assert list(kept.kept) == ["c9"] and kept.held_bytes == 9_950


async def test_readers_cursors_go_with_the_output_they_point_into(eng):
    engine, kid, _ = eng
    first = await engine.execute("print('first-output')", kernel_id=kid, reader="agent")
    assert "first-output" in first.output.text
    # read to its end: this reader's cursor now stands after everything
    assert (
        await engine.read_execution(first.handle, kernel_id=kid, reader="agent")
    ).output.text == ""
    for i in range(600):  # many more calls, by many readers, push it out of memory
        await engine.execute(f"{i}", kernel_id=kid, reader=f"r{i}")
    assert engine.kernels[kid].executions[first.handle].spilled
    # its output is read back from the archive, whole, from the start
    again = await engine.read_execution(first.handle, kernel_id=kid, reader="agent")
    assert "first-output" in again.output.text
    # cursors into output no longer in memory are let go (one per call read grew for ever)
    assert len(engine._readers) <= 2 * 256 + 1


async def test_old_execution_records_leave_memory_and_are_rebuilt_from_the_archive(
    eng, monkeypatch
):
    from ipykeep.engine import retention

    monkeypatch.setattr(retention, "KEPT_RECORDS", 3)
    engine, kid, _ = eng
    session = engine.kernels[kid]
    batch = await engine.run_cells(cells=["c0"], kernel_id=kid)
    cell_run = batch.results[0].handle
    failed = await engine.execute("1/0", kernel_id=kid)
    printed = await engine.execute("print('old-output')", kernel_id=kid)
    for i in range(3 * (KEPT + 3)):
        await engine.execute(f"{i}", kernel_id=kid)
    # the old scratch records left memory; the cell's latest run stays
    assert failed.handle not in session.executions and printed.handle not in session.executions
    assert cell_run in session.executions
    assert len(session.executions) < 3 * (KEPT + 3)
    # read by handle, they are rebuilt from the archive: state, output, error
    again = await engine.read_execution(printed.handle, kernel_id=kid)
    assert again.state == "ok" and again.output.text == "old-output\n"
    again = await engine.read_execution(failed.handle)
    assert again.state == "failed" and again.error and again.error.ename == "ZeroDivisionError"
    stopped = await engine.interrupt(kernel_id=kid, handle=printed.handle)
    assert stopped.action == "already_finished"
