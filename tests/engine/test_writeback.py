"""Coalesced notebook write-back (``core.writeback``) on real kernels, driven in-process.

Two kernels on one engine: one whose timer never fires within a test (``write_delay_ms`` of a
minute), so only the flush points can have written the file, and one with a short delay.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import time
from pathlib import Path

import nbformat
import pytest
import pytest_asyncio

from ipykeep.daemon.composition import compose
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

pytestmark = pytest.mark.kernel

CELLS = [("count", "n = globals().get('n', 0) + 1\nprint('run', n)"), ("other", "print('other')")]


def _notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, id=cid) for cid, src in CELLS]
    nbformat.write(nb, path)
    return path


def _text(path: Path, cell_id: str) -> str:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.id == cell_id)
    return "".join(o.get("text", "") for o in cell.outputs)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eng(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("writeback") / "p", example=False)
    slow, quick = _notebook(root / "slow.ipynb"), _notebook(root / "quick.ipynb")
    engine = compose(
        ProjectPaths(root), Config(idle_timeout=0, dataflow="static", write_delay_ms=60_000)
    ).engine
    slow_kid = (await engine.create_kernel(notebook=str(slow), warm=False)).kernel_id
    engine.config = dataclasses.replace(engine.config, write_delay_ms=50)
    quick_kid = (await engine.create_kernel(notebook=str(quick), warm=False)).kernel_id
    yield engine, slow_kid, slow, quick_kid, quick
    await engine.shutdown()


async def test_a_reply_that_does_not_wait_queues_and_the_next_waiting_one_writes_the_latest(eng):
    engine, kid, path, _, _ = eng
    first = await engine.run_cells(["count"], kernel_id=kid, wait_for_write=False)
    assert first.write is not None and first.write.pending and first.write.updated == ["count"]
    assert not first.write.written
    assert _text(path, "count") == ""  # the timer is a minute away: nothing written yet
    second = await engine.run_cells(["count"], kernel_id=kid, wait_for_write=False)
    assert "run 2" in second.results[0].output.text and _text(path, "count") == ""
    # a call that waits writes everything queued, each cell with its latest output
    waited = await engine.run_cells(["other"], kernel_id=kid)
    assert waited.write is not None and waited.write.written and not waited.write.pending
    assert sorted(waited.write.updated) == ["count", "other"]
    assert _text(path, "count") == "run 2\n" and _text(path, "other") == "other\n"
    count = next(c for c in nbformat.read(path, as_version=4).cells if c.id == "count")
    assert count.execution_count == second.results[0].execution_count


@pytest.mark.posix
async def test_the_timer_writes_without_another_call_and_a_failed_write_is_a_notice(eng):
    engine, _, _, kid, path = eng
    await engine.run_cells(["other"], kernel_id=kid, wait_for_write=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _text(path, "other"):
        await asyncio.sleep(0.02)
    assert _text(path, "other") == "other\n"
    before = path.read_bytes()
    os.chmod(path, 0o444)
    try:
        await engine.run_cells(["other"], kernel_id=kid, wait_for_write=False)
        await asyncio.sleep(0.5)  # the timer's write fails: the file stays as it was
        assert path.read_bytes() == before
        nxt = await engine.execute("1", kernel_id=kid)
        assert any("outputs not written" in n and "read-only" in n for n in nxt.notices or []), (
            nxt.notices
        )
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
    finally:
        os.chmod(path, 0o644)


async def test_closing_the_kernel_writes_what_is_queued(eng):
    engine, kid, path, _, _ = eng
    ran = await engine.run_cells(["other", "count"], kernel_id=kid, wait_for_write=False)
    expected = ran.results[1].output.text
    assert ran.write is not None and ran.write.pending and _text(path, "count") != expected
    await engine.close_kernel(kernel_id=kid)
    assert _text(path, "count") == expected and "run" in expected
