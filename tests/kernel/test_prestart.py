"""Pre-started kernels: a spare is handed to the next kernel asked for, and never leaked."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from ipykeep.client.connection import DaemonClient, find_daemon
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.kernel.driver import KernelProcess
from ipykeep.kernel.inkernel import KERNEL_SETUP
from ipykeep.kernel.prestart import KernelPool
from ipykeep.kernel.providers.base import DataflowMode, LaunchSpec
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import cli_env, make_project, run_cli, stop_daemon
from tests.reliability.helpers import pid_alive, wait_until, write_notebook

pytestmark = pytest.mark.kernel

WITH_SPARES = cli_env(IPYKEEP_DATAFLOW="static", IPYKEEP_PRESTART_KERNELS="1")


def _project(root: Path) -> DaemonClient:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "sub").mkdir()
    write_notebook(root / "a.ipynb", ["import os\nwhere = os.getcwd()"])
    write_notebook(root / "sub" / "b.ipynb", ["import os\nwhere = os.getcwd()"])
    res = run_cli("start", "a.ipynb", "--json", cwd=root, env=WITH_SPARES)
    assert res.returncode == 0, res.stderr
    desc = find_daemon(root)
    assert desc is not None
    return DaemonClient(desc)


def _bound_pids(client: DaemonClient) -> set[int]:
    return {int(k["pid"]) for k in client.call("list_kernels") if k.get("pid")}


def _spares(client: DaemonClient) -> set[int]:
    """Kernel processes of the daemon that no kernel record names: the pre-started ones."""
    children = psutil.Process(client.descriptor.pid).children()
    kernels = {p.pid for p in children if "ipykernel_launcher" in " ".join(p.cmdline())}
    return kernels - _bound_pids(client)


def _one_spare(client: DaemonClient) -> int:
    assert wait_until(lambda: len(_spares(client)) == 1, 60), _spares(client)
    (spare,) = _spares(client)
    return spare


def test_the_spare_becomes_the_next_kernel_and_dies_with_stop_all(tmp_path: Path) -> None:
    root = tmp_path / "p"
    client = _project(root)
    try:
        first = _bound_pids(client)
        spare = _one_spare(client)
        cmdline = psutil.Process(spare).cmdline()
        assert cmdline[0] == sys.executable  # the interpreter the kernel was asked with
        assert "ipykernel_launcher" in cmdline[2]  # static mode: a plain kernel

        res = run_cli("start", "sub/b.ipynb", "--json", cwd=root, env=WITH_SPARES)
        assert res.returncode == 0, res.stderr
        (second,) = [k for k in client.call("list_kernels") if k["notebook"].endswith("b.ipynb")]
        assert second["pid"] == spare
        # it works where the notebook is, not where the spare was started
        where = client.call("execute", kernel_id=second["kernel_id"], code="print(where)")
        assert where["output"]["text"].strip() == str((root / "sub").resolve())

        # a spare never serves two notebooks: the next one is a different process
        refill = _one_spare(client)
        assert refill not in first | {spare}

        everything = _bound_pids(client) | {refill}
        res = run_cli("stop", "--all", cwd=root, env=WITH_SPARES)
        assert res.returncode == 0, res.stderr
        assert wait_until(lambda: not any(pid_alive(p) for p in everything), 20), [
            p for p in everything if pid_alive(p)
        ]
    finally:
        stop_daemon(root)


def test_a_restart_takes_the_spare_and_spares_die_with_a_killed_daemon(tmp_path: Path) -> None:
    root = tmp_path / "p"
    client = _project(root)
    try:
        spare = _one_spare(client)
        (kernel,) = client.call("list_kernels")
        restarted = client.call("restart", kernel_id=kernel["kernel_id"])
        assert restarted["pid"] == spare
        everything = _bound_pids(client) | {_one_spare(client), int(kernel["pid"])}
        os.kill(client.descriptor.pid, signal.SIGKILL)
        assert wait_until(lambda: not any(pid_alive(p) for p in everything), 10), [
            p for p in everything if pid_alive(p)
        ]
    finally:
        stop_daemon(root)


async def test_a_spare_is_only_handed_to_its_interpreter_and_mode(tmp_path: Path) -> None:
    pool = KernelPool(1, tmp_path)
    static = LaunchSpec("k1", sys.executable, "static", tmp_path)
    try:
        pool.served(static)
        assert await _wait_ready(pool)
        (pid,) = pool.spares.values()
        assert await pool.take(LaunchSpec("k2", sys.executable, "ipyflow", tmp_path)) is None
        assert await pool.take(LaunchSpec("k2", "/other/python", "static", tmp_path)) is None
        assert (
            await pool.take(LaunchSpec("k2", sys.executable, "static", tmp_path, {"A": "1"}))
            is None
        )
        history = LaunchSpec("k2", sys.executable, "static", tmp_path, ipython_history=True)
        assert await pool.take(history) is None  # launched without IPython's history database
        taken = await pool.take(LaunchSpec("k2", sys.executable, "static", tmp_path / "x"))
        assert taken is not None and taken.pid == pid
        assert taken.spec.name == "k2" and taken.spec.cwd == tmp_path / "x"
        assert await pool.take(static) is None  # handed over once
        await taken.kill()
    finally:
        await pool.close()


async def _wait_ready(pool: KernelPool, timeout: float = 60) -> bool:
    import asyncio

    for _ in range(int(timeout / 0.1)):
        if pool.spares:
            return True
        await asyncio.sleep(0.1)
    return False


def test_no_spares_when_turned_off() -> None:
    pool = KernelPool(0, Path("."))
    pool.served(LaunchSpec("k1", sys.executable, "static", Path(".")))  # no loop needed: off
    assert pool.spares == {}


@pytest.mark.parametrize("dataflow", ["static", "ipyflow"])
async def test_an_adopted_spare_holds_its_helpers_and_its_set_up_goes_out_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dataflow: DataflowMode
) -> None:
    root = make_project(tmp_path / "p", example=False)
    (root / "sub").mkdir()
    write_notebook(root / "a.ipynb", ["x = 1"])
    write_notebook(root / "sub" / "b.ipynb", ["import os\nwhere = os.getcwd()"])
    engine = compose(
        ProjectPaths(root), Config(idle_timeout=0, prestart_kernels=1, dataflow=dataflow)
    ).engine
    sent: list[tuple[str, str, int, str]] = []  # kernel, code, requests unanswered, msg id
    foreign: list[tuple[str, dict[str, Any]]] = []
    send = KernelProcess._send_execute

    def recording(self: KernelProcess, code: str, **kw: Any) -> Any:
        what = code + "".join((kw.get("user_expressions") or {}).values())
        waiting = len(self._replies)
        msg_id, reply, idle = send(self, code, **kw)
        sent.append((self.name, what, waiting, msg_id))
        return msg_id, reply, idle

    monkeypatch.setattr(KernelProcess, "_send_execute", recording)
    monkeypatch.setattr(
        Engine, "_on_foreign", lambda _e, s, msg: foreign.append((s.kernel_id, msg))
    )
    try:
        await engine.create_kernel(notebook=str(root / "a.ipynb"), warm=False)
        assert await _wait_ready(engine.spares)
        (spare,) = engine.spares.spares.values()
        rec = await engine.create_kernel(notebook=str(root / "sub" / "b.ipynb"), warm=False)
        adopted = engine.kernels[rec.kernel_id]
        assert rec.pid == spare
        at_adoption = [(what, waiting) for name, what, waiting, _ in sent if name == rec.kernel_id]

        # what does not depend on the notebook was done while the spare waited: no helper's
        # source is sent at adoption, yet the kernel holds every helper the services use
        assert not [w for w, _ in at_adoption if "exec(compile(" in w], len(at_adoption)
        names = [m.name for m in (KERNEL_SETUP, *engine.kernel_helpers(dataflow))]
        held = await adopted.process.eval_silent(
            f"__import__('json').dumps([n in __import__('sys').modules for n in {names!r}])"
        )
        assert all(held), dict(zip(names, held, strict=True))
        # what does depend on it went out together: requests were sent before the replies to
        # earlier ones came (one after another, none would be)
        assert max(waiting for _, waiting in at_adoption) >= 3, at_adoption
        # the spare's own set-up traffic did not reach the kernel it became as a browser's
        ours = {msg_id for name, _, _, msg_id in sent if name == rec.kernel_id}
        assert not [
            m
            for kid, m in foreign
            if kid == rec.kernel_id and m["parent_header"].get("msg_id") not in ours
        ]

        ran = await engine.execute("import os\nprint(os.getcwd())", kernel_id=rec.kernel_id)
        assert ran.output.text.strip() == str((root / "sub").resolve())
    finally:
        await engine.shutdown()
