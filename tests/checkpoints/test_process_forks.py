"""Forks made by forking the kernel's process, on real kernels: the fork shares the parent's
memory copy-on-write (counted in bytes of the parent's resident set), each side's edits stay
its own, the fork is a kernel of its own (interrupt, outputs, close), and the parent and the
fork outlive each other; with ``fork_method = "checkpoint"`` the checkpoint way is used and
the result says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import nbformat
import pytest
import pytest_asyncio

from ipykeep.api.errors import KernelBusyError
from ipykeep.checkpoints.store import CheckpointError
from ipykeep.engine.engine import Engine
from tests.checkpoints.kit import composed_engine, layer, started
from tests.staleness.test_staleness_acceptance import Nb

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not hasattr(os, "fork") or not Path("/proc/self/status").exists(),
        reason="forking a kernel's process needs os.fork (Linux)",
    ),
]

#: the array the parent holds: 200 MB
BIG_BYTES = 200 * 1024 * 1024
CELLS = [
    (
        "load",
        "import numpy as np\nbig = np.arange(BIG_BYTES // 8, dtype=np.float64)".replace(
            "BIG_BYTES", str(BIG_BYTES)
        ),
    ),
    ("small", "x = 1\nwords = ['a', 'b']"),
    ("show", "print('total', x + len(words))"),
]


@pytest_asyncio.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Engine]:
    async with composed_engine(tmp_path_factory, "process-forks") as eng:
        yield eng


def rss_bytes(pid: int) -> int:
    """The process's resident set, in bytes (``/proc``)."""
    with open(f"/proc/{pid}/status") as fh:
        line = next(ln for ln in fh if ln.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def exists(pid: int) -> bool:
    """Whether ``pid`` is still a process at all (a zombie counts: it has not been reaped)."""
    return Path(f"/proc/{pid}").exists()


async def gone(pid: int) -> bool:
    """Whether ``pid`` disappears (reaped) within a generous while; polled, not timed."""
    for _ in range(600):
        if not exists(pid):
            return True
        await asyncio.sleep(0.1)
    return False


async def value(engine: Engine, kernel_id: str, expr: str) -> str:
    rec = await engine.execute(f"print(repr({expr}))", kernel_id=kernel_id)
    assert rec.state == "ok", rec
    return rec.output.text.strip().splitlines()[-1]


async def test_a_process_fork_shares_memory_and_keeps_apart(engine: Engine) -> None:
    parent = await started(engine, "cow", "static", CELLS)
    parent_pid = engine.kernels[parent.kernel_id].process.pid
    assert parent_pid is not None
    before = rss_bytes(parent_pid)
    assert before > BIG_BYTES  # the array is resident in the parent

    made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
    child_id = made.kernel_id
    child_pid = engine.kernels[child_id].process.pid
    try:
        assert (made.how, made.fallback_reason, made.not_copied) == ("process", None, {})
        assert {"big", "x", "words", "np"} <= set(made.values)
        assert child_pid is not None and child_pid != parent_pid
        # the fork has the value, as the parent holds it
        assert await value(engine, child_id, "float(big[12345])") == "12345.0"
        assert await value(engine, child_id, "(x, words)") == "(1, ['a', 'b'])"
        # copy-on-write: the parent's memory did not grow by the array's size
        assert rss_bytes(parent_pid) - before < BIG_BYTES // 4

        # each side's edits are its own (rebinding and mutating in place)
        await parent.scratch("only_parent = 7")
        rec = await engine.execute("big[:] = -1.0\nx = 99\nonly_fork = 8", kernel_id=child_id)
        assert rec.state == "ok", rec
        assert await value(engine, parent.kernel_id, "(float(big[12345]), x)") == "(12345.0, 1)"
        assert await value(engine, child_id, "(float(big[12345]), x)") == "(-1.0, 99)"
        assert await value(engine, parent.kernel_id, "'only_fork' in globals()") == "False"
        assert await value(engine, child_id, "'only_parent' in globals()") == "False"
        # the fork wrote its own copy of the array's pages, the parent did not
        assert rss_bytes(parent_pid) - before < BIG_BYTES // 4

        # an endless cell in the fork is interrupted; the fork goes on, the parent never saw it
        running = await engine.execute(
            "while True:\n    pass", kernel_id=child_id, yield_time_ms=300
        )
        assert running.state == "running"
        stopped = await engine.interrupt(kernel_id=child_id)
        assert stopped.action == "interrupted", stopped
        assert await value(engine, child_id, "x") == "99"
        assert await value(engine, parent.kernel_id, "x") == "1"

        # the fork's runs and outputs go to its own notebook
        result = await engine.run_cells(["show"], kernel_id=child_id)
        assert result.results[0].state == "ok"
        fork_nb = nbformat.read(made.notebook, as_version=4)
        shown = next(c for c in fork_nb.cells if c["id"] == "show")
        assert "total 101" in "".join(o.get("text", "") for o in shown["outputs"])
        parent_nb = nbformat.read(parent.path, as_version=4)
        shown = next(c for c in parent_nb.cells if c["id"] == "show")
        assert "total 101" not in "".join(o.get("text", "") for o in shown["outputs"])

        # closing the fork leaves the parent alive, and no zombie behind
        await engine.close_kernel(kernel_id=child_id)
        assert await gone(child_pid)
        assert await value(engine, parent.kernel_id, "x") == "1"
    finally:
        await engine.close_kernel(kernel_id=child_id)
        await parent.close()


async def test_the_fork_outlives_its_parent(engine: Engine) -> None:
    parent = await started(engine, "orphan", "static", CELLS[1:])
    parent_pid = engine.kernels[parent.kernel_id].process.pid
    made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
    assert made.how == "process"
    child_pid = engine.kernels[made.kernel_id].process.pid
    assert parent_pid is not None and child_pid is not None
    try:
        os.kill(parent_pid, signal.SIGKILL)
        assert await gone(parent_pid) or not exists(parent_pid)
        # the fork runs on: its state is its own
        assert await value(engine, made.kernel_id, "x + 1") == "2"
        # and it forks in turn (a fork of a fork: its own process, forked again)
        await engine.execute("x = 5", kernel_id=made.kernel_id)
        grandchild = await layer(engine).fork_kernel(kernel_id=made.kernel_id)
        assert grandchild.how == "process", grandchild.fallback_reason
        assert await value(engine, grandchild.kernel_id, "(x, words)") == "(5, ['a', 'b'])"
        await engine.close_kernel(kernel_id=grandchild.kernel_id)
        # restarted, it is a new empty kernel (not a new copy of anything), bound to its copy
        await engine.restart(kernel_id=made.kernel_id)
        assert await gone(child_pid)  # reaped by whoever adopted it
        restarted_pid = engine.kernels[made.kernel_id].process.pid
        assert restarted_pid not in (None, child_pid)
        assert await value(engine, made.kernel_id, "'x' in globals()") == "False"
        await engine.close_kernel(kernel_id=made.kernel_id)
        assert restarted_pid is not None and await gone(restarted_pid)
    finally:
        with contextlib.suppress(Exception):
            await engine.close_kernel(kernel_id=made.kernel_id)
        await parent.close()


async def test_fork_method_checkpoint_copies_through_a_checkpoint(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    async with composed_engine(
        tmp_path_factory, "checkpoint-forks", fork_method="checkpoint"
    ) as engine:
        parent = await started(engine, "ckpt", "static", CELLS[1:])
        made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
        assert made.how == "checkpoint"
        assert made.fallback_reason == 'fork_method = "checkpoint"'
        assert await value(engine, made.kernel_id, "(x, words)") == "(1, ['a', 'b'])"
        child_pid = engine.kernels[made.kernel_id].process.pid
        # a kernel started afresh by the daemon, not a child of the parent kernel's process
        with open(f"/proc/{child_pid}/stat") as fh:
            assert int(fh.read().rsplit(")", 1)[1].split()[1]) == os.getpid()


async def test_a_fork_that_cannot_build_its_kernel_falls_back(engine: Engine) -> None:
    parent = await started(engine, "broken", "static", CELLS[1:])
    # the forked process cannot start its kernel (its heartbeat fails): it must end, and the
    # checkpoint way is used instead, with the child's reason
    await parent.scratch(
        "from ipykernel.kernelapp import IPKernelApp as _App\n"
        "def _no_heartbeat(self):\n"
        "    raise RuntimeError('no heartbeat in this kernel')\n"
        "_App.init_heartbeat = _no_heartbeat"
    )
    made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
    try:
        assert made.how == "checkpoint"
        assert made.fallback_reason is not None
        assert "no heartbeat in this kernel" in made.fallback_reason
        assert await value(engine, made.kernel_id, "(x, words)") == "(1, ['a', 'b'])"
        bound = [
            s for s in engine.kernels.values() if not s.closed and str(s.notebook) == made.notebook
        ]
        assert [s.kernel_id for s in bound] == [made.kernel_id]
        assert await value(engine, parent.kernel_id, "x") == "1"
    finally:
        await engine.close_kernel(kernel_id=made.kernel_id)
        await parent.close()


async def test_a_busy_parent_is_not_forked(engine: Engine) -> None:
    parent = await started(engine, "busy", "static", CELLS[1:])
    try:
        running = await engine.execute(
            "import time\nwhile True:\n    time.sleep(0.05)",
            kernel_id=parent.kernel_id,
            yield_time_ms=200,
        )
        assert running.state == "running"
        with pytest.raises(KernelBusyError, match="interrupt"):
            await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
        assert not (parent.dir / "nb.fork-1.ipynb").exists()
        assert (await engine.interrupt(kernel_id=parent.kernel_id)).action == "interrupted"
        made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
        assert made.how == "process"
        await engine.close_kernel(kernel_id=made.kernel_id)
    finally:
        await parent.close()


async def test_with_checkpoints_off_only_the_process_way_forks(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    async with composed_engine(tmp_path_factory, "no-checkpoints", checkpoints=False) as engine:
        parent = await started_unflushed(engine, "off")
        made = await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
        assert made.how == "process"
        assert await value(engine, made.kernel_id, "(x, words)") == "(1, ['a', 'b'])"
        session = engine.kernels[parent.kernel_id]
        session.config = session.config.with_overrides(fork_method="checkpoint")
        with pytest.raises(CheckpointError) as refused:
            await layer(engine).fork_kernel(kernel_id=parent.kernel_id)
        assert "checkpoints are off" in refused.value.message
        assert 'the checkpoint way was taken: fork_method = "checkpoint"' in refused.value.message


async def started_unflushed(engine: Engine, name: str) -> Nb:
    """A notebook of ``CELLS[1:]``, warmed up (no checkpoint writer to wait for)."""
    directory = engine.paths.root / name
    directory.mkdir()
    nb = Nb(engine, directory, "static")
    nb.write_cells(CELLS[1:])
    await nb.start()
    return nb
