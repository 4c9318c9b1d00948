"""The checks every kernel provider must pass, shared by the gateway and SSH tests.

Each runs on an in-process engine (real kernels, real staleness and inspection layers) against a
kernel bound to ``make_remote_project``'s notebook: the notebook reads ``data.csv`` and derives
a total from it, so a rewrite of the file must make both cells stale.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import nbformat

from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

CSV = "name,value\na,1\nb,2\n"
CELLS = (
    'import csv\nwith open("data.csv") as f:\n    rows = list(csv.DictReader(f))',
    "total = sum(int(r['value']) for r in rows)\ntotal",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_remote_project(base: Path) -> Path:
    root = make_project(base / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbformat.write(nb, root / "n.ipynb")
    (root / "data.csv").write_text(CSV)
    return root


#: the services' daemon methods of each engine built here, by engine id
_SERVICE_METHODS: dict[int, dict[str, Any]] = {}


def make_engine(root: Path, **config: Any) -> Engine:
    composition = compose(ProjectPaths(root), Config(idle_timeout=0, interrupt_grace=5.0, **config))
    _SERVICE_METHODS[id(composition.engine)] = {
        b.method.name: b.handler for b in composition.bindings()
    }
    return composition.engine


def method(engine: Engine, name: str) -> Any:
    """A daemon method by its RPC name, wherever it lives (engine or one of its services)."""
    services = _SERVICE_METHODS.get(id(engine), {})
    return services[name] if name in services else getattr(engine, name)


async def check_run_and_cwd(engine: Engine, kid: str, root: Path) -> None:
    rec = await engine.execute("import os; print(os.getcwd()); print(total)", kernel_id=kid)
    assert rec.state == "ok", rec
    assert rec.output.text.split() == [str(root), "3"]  # warm-up ran there, relative paths work


async def check_interrupt(engine: Engine, kid: str) -> None:
    slow = await engine.execute(
        "import time\nfor _ in range(600): time.sleep(0.1)", kernel_id=kid, yield_time_ms=0
    )
    await asyncio.sleep(0.5)
    res = await engine.interrupt(kernel_id=kid, handle=slow.handle)
    assert res.action == "interrupted", res
    after = await engine.read_execution(slow.handle, kernel_id=kid)
    assert after.state == "interrupted", after
    ok = await engine.execute("print(total * 2)", kernel_id=kid)  # state survived the interrupt
    assert ok.state == "ok" and ok.output.text.strip() == "6"


async def check_run_stale_after_data_edit(engine: Engine, kid: str, root: Path) -> None:
    run_stale = method(engine, "run_stale")
    assert not (await run_stale(kernel_id=kid)).stale
    (root / "data.csv").write_text(CSV + "c,4\n")
    plan = await run_stale(kernel_id=kid)
    assert len(plan.stale) == 2, plan  # the reader and the cell that uses what it read
    await run_stale(kernel_id=kid, execute=True)
    rec = await engine.execute("print(total)", kernel_id=kid)
    assert rec.output.text.strip() == "7"
    assert not (await run_stale(kernel_id=kid)).stale


async def check_inspect(engine: Engine, kid: str) -> None:
    summary = await method(engine, "inspect")("rows", kernel_id=kid)
    text = summary.model_dump_json()
    assert "list" in text and "name" in text, text


async def check_restart(engine: Engine, kid: str) -> None:
    """A restart replaces the remote kernel: same id, fresh state, working again."""
    old = engine.kernels[kid].process.generation
    await engine.restart(kernel_id=kid)
    assert engine.kernels[kid].process.generation == old + 1
    rec = await engine.execute("print('total' in globals())", kernel_id=kid)
    assert rec.state == "ok" and rec.output.text.strip() == "False"


def make_kernel_side_dir(base: Path) -> Path:
    """The kernel's own working directory, apart from the notebook's: its ``data.csv`` is the
    one the notebook reads there, while this machine's copy beside the notebook stays as it is."""
    kernel_dir = base / "kernel-side"
    kernel_dir.mkdir()
    (kernel_dir / "data.csv").write_text(CSV)
    (kernel_dir / "watched.txt").write_text("v1\n")
    return kernel_dir


async def check_files_are_stat_through_the_kernel(
    engine: Engine, kid: str, root: Path, kernel_dir: Path
) -> None:
    run_stale = method(engine, "run_stale")
    rec = await engine.execute("print(total)", kernel_id=kid)
    assert rec.output.text.strip() == "3", rec
    assert not (await run_stale(kernel_id=kid)).stale
    host_copy = (root / "data.csv").read_text()

    # the kernel's file changes; the path "data.csv" means this one only in the kernel
    (kernel_dir / "data.csv").write_text(CSV + "c,4\n")
    plan = await run_stale(kernel_id=kid)
    reader, user = (e for e in plan.stale)
    assert [r["kind"] for r in reader["reasons"]] == ["file_changed"], plan
    assert reader["reasons"][0]["path"] == str(kernel_dir / "data.csv")
    assert all(r["kind"] != "file_changed" for r in user["reasons"]), plan  # stale through `rows`

    done = await run_stale(kernel_id=kid, execute=True)
    assert [r.cell_id for r in done.batch.results] == [reader["cell_id"], user["cell_id"]]
    fresh = (
        "import csv\nprint(total, sum(int(r['value']) for r in csv.DictReader(open('data.csv'))))"
    )
    rec = await engine.execute(fresh, kernel_id=kid)
    assert rec.output.text.split() == ["7", "7"], rec
    assert not (await run_stale(kernel_id=kid)).stale
    assert (root / "data.csv").read_text() == host_copy  # nothing here was touched

    # a watched file only the kernel's machine has, polled through the kernel
    assert not (root / "watched.txt").exists()
    watched = await method(engine, "watch_file")("watched.txt", kernel_id=kid)
    assert watched.exists and watched.path == str(kernel_dir / "watched.txt"), watched
    session = engine.kernels[kid]
    session.notices.clear()
    (kernel_dir / "watched.txt").write_text("v2, longer\n")
    for _ in range(100):
        if any("watched.txt" in n for n in session.notices):
            break
        await asyncio.sleep(0.1)
    assert any(n.startswith("changed on disk: watched.txt") for n in session.notices), (
        session.notices
    )
