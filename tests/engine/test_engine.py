"""Engine behaviour on a real ipyflow kernel, driven in-process (one shared kernel)."""

from __future__ import annotations

import asyncio
import json
import time

import nbformat
import pytest
import pytest_asyncio

from ipykeep.api.errors import KernelBusyError, UnknownCellError, UnknownKernelError, UsageError
from ipykeep.daemon.composition import compose
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.service import StalenessService
from tests.conftest import make_project

pytestmark = pytest.mark.kernel


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eng(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("engine") / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("base = 10")]
    nbformat.write(nb, root / "n.ipynb")
    composition = compose(
        ProjectPaths(root),
        Config(
            idle_timeout=0,
            interrupt_grace=3.0,
            max_queue=1,
            max_subshells=1,
            output_cap_bytes=50_000,
        ),
    )
    engine = composition.engine
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"))
    yield engine, rec.kernel_id, root
    await engine.shutdown()


async def test_clear_output_and_cap_and_archive(eng):
    engine, kid, root = eng
    rec = await engine.execute(
        "from IPython.display import clear_output\nprint('old')\nclear_output()\nprint('new')",
        kernel_id=kid,
    )
    ex = engine.kernels[kid].executions[rec.handle]
    assert [o["text"] for o in ex.nbformat_outputs()] == ["new\n"]
    rec = await engine.execute("for i in range(20000): print('x' * 20)", kernel_id=kid)
    assert rec.state == "ok" and rec.output.dropped_bytes > 0
    assert "not recorded" in rec.output.text
    assert len(rec.output.text) <= engine.config.max_output_chars
    lines = (root / ".ipykeep" / "kernels" / kid / "record.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert any(e.get("code", "").startswith("for i in range(20000)") for e in entries)
    assert entries[0]["kind"] == "cell"  # warm-up is archived too


async def test_long_output_is_bounded_with_artifact(eng):
    engine, kid, root = eng
    rec = await engine.execute("for i in range(3000): print(f'line {i}')", kernel_id=kid)
    out = rec.output
    assert (
        out.truncated
        and out.total_lines == 3000
        and "line 0" in out.text
        and "line 2999" in out.text
    )
    full = await engine.read_artifact(out.uri)
    assert full.text is not None and full.text.count("\n") == 3000


async def test_images_become_artifacts(eng):
    engine, kid, _ = eng
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        "png = base64.b64decode("
        "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='"
        ")\n"
        "display(Image(png))"
    )
    rec = await engine.execute(code, kernel_id=kid)
    assert rec.state == "ok" and rec.output.images and rec.output.images[0].mime == "image/png"
    assert rec.output.images[0].uri.startswith("ipykeep://artifacts/")


async def test_scratch_runs_on_a_subshell_while_a_cell_runs_and_saturation_is_refused(eng):
    engine, kid, root = eng
    path = root / "n.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(2.5)"))
    nbformat.write(nb, path)
    slow = asyncio.create_task(engine.run_cells(["1"], kernel_id=kid))
    await asyncio.sleep(0.5)
    t = time.monotonic()
    quick = await engine.execute("print(base + 1)", kernel_id=kid)
    assert quick.state == "ok" and quick.output.text.strip() == "11" and quick.subshell
    assert time.monotonic() - t < 1.5
    # one subshell (now free), queue of 1: hold the subshell, fill the queue, then refuse
    hold = await engine.execute("time.sleep(1.5)", kernel_id=kid, yield_time_ms=0)
    queued = await engine.execute("1", kernel_id=kid, yield_time_ms=0)
    with pytest.raises(KernelBusyError) as info:
        await engine.execute("2", kernel_id=kid, yield_time_ms=0)
    assert info.value.retryable
    batch = await slow
    assert batch.ok
    for h in (hold.handle, queued.handle):
        assert (await engine.read_execution(h, kernel_id=kid, yield_time_ms=5000)).state == "ok"


async def test_request_id_is_retry_safe(eng):
    engine, kid, _ = eng
    a = await engine.execute("counter_value = base * 2", kernel_id=kid, request_id="r-1")
    b = await engine.execute("counter_value = base * 2", kernel_id=kid, request_id="r-1")
    assert a.handle == b.handle
    with pytest.raises(UsageError, match="already used with different code"):
        await engine.execute("other = 1", kernel_id=kid, request_id="r-1")


async def test_read_execution_cursor_and_yield(eng):
    engine, kid, _ = eng
    rec = await engine.execute(
        "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)",
        kernel_id=kid,
        yield_time_ms=0,
    )
    assert rec.state in ("queued", "running")
    first = await engine.read_execution(rec.handle, kernel_id=kid, yield_time_ms=500, reader="r")
    done = await engine.read_execution(rec.handle, kernel_id=kid, yield_time_ms=5000, reader="r")
    assert done.state == "ok"
    assert (first.output.text + done.output.text).split() == ["0", "1", "2"]


async def test_interrupt_sleep_and_await_keep_state(eng):
    engine, kid, _ = eng
    await engine.execute("kept = 'still here'", kernel_id=kid)
    for code in ("import time\ntime.sleep(60)", "import asyncio\nawait asyncio.sleep(60)"):
        rec = await engine.execute(code, kernel_id=kid, yield_time_ms=0)
        await asyncio.sleep(0.5)
        t = time.monotonic()
        res = await engine.interrupt(kernel_id=kid)
        assert res.action == "interrupted", res
        # ~0.2 s on a plain kernel, 0.3-0.8 s under ipyflow's tracer; margin for a loaded machine
        assert time.monotonic() - t < 1.5
        assert (await engine.read_execution(rec.handle, kernel_id=kid)).state == "interrupted"
    assert (await engine.execute("print(kept)", kernel_id=kid)).output.text.strip() == "still here"


async def test_cell_ignoring_sigint_is_killed_and_restart_reported(eng):
    engine, kid, _ = eng
    rec = await engine.execute(
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
        kernel_id=kid,
        yield_time_ms=0,
    )
    await asyncio.sleep(0.5)
    res = await engine.interrupt(kernel_id=kid)
    assert res.action == "killed_and_restarted"
    after = await engine.execute("print('alive')", kernel_id=kid)
    assert after.output.text.strip() == "alive"
    assert after.notices and any("restarted" in n for n in after.notices)
    assert (await engine.read_execution(rec.handle, kernel_id=kid)).state == "lost"
    plan = await next(o for o in engine.observers if isinstance(o, StalenessService)).run_stale(
        kernel_id=kid
    )
    assert any(r["kind"] == "kernel_restarted" for e in plan.stale for r in e["reasons"])


async def test_unknown_ids_and_outside_cwd(eng):
    engine, kid, root = eng
    with pytest.raises(UnknownKernelError):
        await engine.execute("1", kernel_id="k999")
    with pytest.raises(UnknownCellError):
        await engine.read_execution("c99999", kernel_id=kid)
    with pytest.raises(UsageError, match="outside the project"):
        await engine.create_kernel(cwd="/")
    with pytest.raises(Exception, match="remote working directories"):
        await engine.create_kernel(
            cwd="s3://bucket/dir"
        )  # ssh:// is a remote kernel (test_remote_ssh.py)


async def test_watcher_notices_edits_by_others_but_not_its_own_writes(eng):
    engine, kid, root = eng
    path = root / "n.ipynb"
    await engine.run_cells(["0"], kernel_id=kid)  # ipykeep's own write-back
    await asyncio.sleep(1.0)
    quiet = await engine.execute("1", kernel_id=kid)
    assert not any("changed on disk" in n for n in quiet.notices or [])
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "base = 11"
    nbformat.write(nb, path)
    deadline = time.monotonic() + 5
    notices: list[str] = []
    while time.monotonic() < deadline and not notices:
        await asyncio.sleep(0.3)
        notices = [n for n in engine.kernels[kid].notices if "changed on disk" in n]
    assert notices and "n.ipynb" in notices[0] and "cell(s) stale" in notices[0]


async def test_kernel_messages_keep_their_header_dates_as_strings(eng):
    # The daemon's client skips jupyter_client's date parsing (kernel/providers/session.py).
    engine, kid, _ = eng
    kc = engine.kernels[kid].process.kc
    seen = []
    real = kc.get_iopub_msg

    async def recording(*args, **kwargs):
        msg = await real(*args, **kwargs)
        seen.append(msg)
        return msg

    kc.get_iopub_msg = recording
    try:
        rec = await engine.execute("1+1", kernel_id=kid)
    finally:
        del kc.get_iopub_msg
    assert rec.state == "ok" and rec.output.text.strip() == "2"
    assert seen and all(isinstance(m["header"]["date"], str) for m in seen)
    assert all(isinstance(m["parent_header"]["date"], str) for m in seen if m["parent_header"])


async def test_a_burst_of_output_while_the_daemon_is_busy_loses_nothing(eng):
    """zmq's default receive limit (1000 messages a side) drops the tail of a burst, the idle
    status with it, when the daemon reads late; the kernel client's sockets have none."""
    engine, kid, _ = eng
    lines = 5000
    rec = await engine.execute(
        f"for i in range({lines}):\n    print(i, flush=True)", kernel_id=kid, yield_time_ms=0
    )
    time.sleep(5)  # a busy daemon: its loop reads nothing while the kernel prints
    rec = await engine.read_execution(rec.handle, kernel_id=kid, yield_time_ms=60000)
    assert rec.state == "ok", rec.output.text[-500:]
    ex = engine.kernels[kid].executions[rec.handle]
    text = "".join(o.get("text", "") for o in ex.nbformat_outputs())
    assert text.split() == [str(i) for i in range(lines)]
    assert "output may be incomplete" not in rec.output.text
