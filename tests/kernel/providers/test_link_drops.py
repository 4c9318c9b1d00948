"""Remote kernels across a dropped connection: the SSH master killed, the gateway's websocket
closed, the network cut or stalled for a while (a loopback relay, ``relay.py``), the kernel dead
at the other end.

A running cell prints, then waits for flag files the test creates (the "host" is this machine),
so what the cell prints before, during and after a drop does not depend on how fast a loaded
machine reconnects. The drop lasts ``IPYKEEP_TEST_DROP_S`` seconds (default 3; the 30 s case is
run by hand with ``IPYKEEP_TEST_DROP_S=30``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from ipykeep.api.errors import KernelDiedError
from ipykeep.engine.engine import Engine
from tests.kernel.providers.checks import free_port, make_engine, make_remote_project
from tests.kernel.providers.gateway_server import Gateway
from tests.kernel.providers.relay import Relay
from tests.kernel.providers.sshd import HOST_ALIAS, LoopbackSshd, unavailable

DROP_S = float(os.environ.get("IPYKEEP_TEST_DROP_S", "3"))
#: long enough for the drop and a loaded machine's reconnect
RECONNECT_S = max(60.0, 3 * DROP_S)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180 + 4 * DROP_S)]
needs_sshd = pytest.mark.skipif(
    unavailable() is not None, reason=f"loopback sshd unavailable: {unavailable()}"
)

CELL = """\
import os, time
def wait_for(name):
    while not os.path.exists(os.path.join({flags!r}, name)):
        time.sleep(0.05)
print('before', flush=True)
wait_for('one')
print('during', flush=True)
wait_for('two')
print('after', x + 1, flush=True)
"""


class Cell:
    """The running cell of a drop test and the flags it waits for."""

    def __init__(self, engine: Engine, kid: str, flags: Path) -> None:
        self.engine, self.kid, self.flags = engine, kid, flags
        flags.mkdir(exist_ok=True)
        self.handle = ""
        #: the notices the agent was given with the results it read
        self.told: list[str] = []

    async def start(self) -> None:
        assert (await self.engine.execute("x = 41", kernel_id=self.kid)).state == "ok"
        rec = await self.engine.execute(
            CELL.format(flags=str(self.flags)), kernel_id=self.kid, yield_time_ms=0
        )
        self.handle = rec.handle
        await self.until(lambda text: "before" in text)

    def release(self, name: str) -> None:
        (self.flags / name).write_text("")

    async def text(self) -> str:
        rec = await self.engine.read_execution(self.handle, kernel_id=self.kid, cursor=0)
        self.told += rec.notices or []
        return rec.output.text

    async def until(self, seen, timeout: float = 60.0) -> None:
        for _ in range(int(timeout * 10)):
            if seen(await self.text()):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(await self.text())

    async def end(self):
        rec = await self.engine.read_execution(
            self.handle, kernel_id=self.kid, cursor=0, yield_time_ms=int(RECONNECT_S * 1000)
        )
        assert rec.state != "running", rec
        self.told += rec.notices or []
        return rec

    def notices(self) -> str:
        """Every notice the agent was given so far, and those still pending."""
        return " | ".join(self.told + self.engine.kernels[self.kid].notices)


def link(engine: Engine, kid: str):
    return engine.kernels[kid].process.provider.link


async def wait_until(condition, timeout: float = RECONNECT_S + 30) -> None:
    for _ in range(int(timeout * 10)):
        if condition():
            return
        await asyncio.sleep(0.1)
    assert condition()


async def check_state_kept(engine: Engine, kid: str) -> None:
    rec = await engine.execute("print(x)", kernel_id=kid)
    assert rec.state == "ok" and rec.output.text.strip() == "41", rec


async def started_cell(kernel: tuple[Engine, str, Relay], tmp_path: Path) -> Cell:
    """The test cell, running and waiting at its first flag on the fixture's kernel."""
    engine, kid, _ = kernel
    cell = Cell(engine, kid, tmp_path / "flags")
    await cell.start()
    return cell


async def cut_then(kernel: tuple[Engine, str, Relay], cell: Cell, *flags: str) -> None:
    """Cut the network for ``DROP_S``; once ipykeep sees the link down, release ``flags``."""
    engine, kid, relay = kernel

    async def during_the_cut() -> None:
        await wait_until(lambda: link(engine, kid).down, timeout=30)
        for flag in flags:
            cell.release(flag)

    await asyncio.gather(relay.cut(DROP_S), during_the_cut())


async def stall_is_survived(kernel: tuple[Engine, str, Relay], tmp_path: Path) -> None:
    """A stall of ``DROP_S`` with output printed into it: the cell ends ok with its output and
    the kernel's state."""
    engine, kid, relay = kernel
    cell = await started_cell(kernel, tmp_path)

    async def during_the_stall() -> None:
        await asyncio.sleep(min(1.0, DROP_S / 2))
        cell.release("one")

    await asyncio.gather(relay.stall(DROP_S), during_the_stall())
    cell.release("two")
    done = await cell.end()
    assert done.state == "ok", done.output.text
    assert "before" in done.output.text and "after 42" in done.output.text, done
    if link(engine, kid).reconnects == 0:
        assert "during" in done.output.text  # nothing was dropped: it was only delayed
    await check_state_kept(engine, kid)


# -- SSH ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port())
    yield server
    server.stop()


@pytest.fixture
def ssh_relay(sshd):
    """A relay in front of the sshd and an ssh config that goes through it."""
    relay = Relay(sshd.port)
    key = (sshd.tmp / "known_hosts").read_text().split()
    with open(sshd.tmp / "known_hosts", "a") as fh:
        fh.write(f"[127.0.0.1]:{relay.port} {key[1]} {key[2]}\n")
    config = sshd.tmp / f"ssh_config_{relay.port}"
    config.write_text(
        sshd.client_config(sshd.tmp / "client_key").replace(
            f"Port {sshd.port}", f"Port {relay.port}"
        )
    )
    yield relay, config
    relay.kill()


@pytest_asyncio.fixture
async def ssh_kernel(sshd, ssh_relay, tmp_path):
    relay, config = ssh_relay
    root = make_remote_project(tmp_path)
    engine = make_engine(
        root, ssh_config=str(config), remote_python=sys.executable, remote_reconnect_s=RECONNECT_S
    )
    rec = await engine.create_kernel(cwd=f"ssh://{HOST_ALIAS}{root}", warm=False)
    try:
        yield engine, rec.kernel_id, relay
    finally:
        await engine.shutdown()


@needs_sshd
@pytest.mark.ssh
async def test_ssh_master_killed_mid_cell_reconnects_and_the_cell_runs_on(ssh_kernel, tmp_path):
    engine, kid, _ = ssh_kernel
    cell = await started_cell(ssh_kernel, tmp_path)
    provider = engine.kernels[kid].process.provider
    kernel = psutil.Process(provider.remote_pid)
    os.kill(provider.master.pid, signal.SIGKILL)
    await wait_until(lambda: link(engine, kid).reconnects == 1)
    cell.release("one")
    cell.release("two")
    done = await cell.end()
    assert done.state == "ok", done.output.text
    text = done.output.text
    assert text.index("before") < text.index("was down from") < text.index("after 42"), text
    assert "output the kernel sent meanwhile was not received" in text
    assert "was lost at" in cell.notices() and "re-established" in cell.notices()
    assert provider.remote_pid == kernel.pid and kernel.is_running()
    await check_state_kept(engine, kid)


@needs_sshd
@pytest.mark.ssh
async def test_ssh_network_cut_keeps_the_kernel_and_the_output_before_the_drop(
    ssh_kernel, tmp_path
):
    """The cut resets the master's connection and refuses new ones until it ends: reconnect
    attempts fail, then one succeeds. What the cell printed while the link was down is gone
    (zmq keeps nothing for an absent client); what came before and after is kept."""
    engine, kid, _ = ssh_kernel
    cell = await started_cell(ssh_kernel, tmp_path)
    await cut_then(ssh_kernel, cell, "one")  # printed into the gap
    await wait_until(lambda: link(engine, kid).reconnects == 1)
    cell.release("two")
    done = await cell.end()
    assert done.state == "ok", done.output.text
    text = done.output.text
    assert text.index("before") < text.index("was down from") < text.index("after 42"), text
    assert "dropped; it is being re-established" in cell.notices()
    await check_state_kept(engine, kid)


@needs_sshd
@pytest.mark.ssh
async def test_ssh_network_stall_is_survived(ssh_kernel, tmp_path):
    """A stalled network (the relay stopped): short stalls pass unnoticed and lose nothing;
    past ssh's keep-alive (30 s) the master gives up and the link is re-established."""
    await stall_is_survived(ssh_kernel, tmp_path)


@needs_sshd
@pytest.mark.ssh
async def test_ssh_cell_that_ends_during_the_cut_is_reported_plainly(ssh_kernel, tmp_path):
    engine, kid, _ = ssh_kernel
    cell = await started_cell(ssh_kernel, tmp_path)
    await cut_then(ssh_kernel, cell, "one", "two")  # the cell ends while nothing reaches ipykeep
    done = await cell.end()
    assert done.state == "lost", done
    assert "before" in done.output.text and "it ended while the connection was down" in (
        done.output.text
    ), done
    await check_state_kept(engine, kid)


@needs_sshd
@pytest.mark.ssh
async def test_ssh_kernel_dead_when_the_link_comes_back_is_reported_lost(ssh_kernel, tmp_path):
    engine, kid, relay = ssh_kernel
    cell = await started_cell(ssh_kernel, tmp_path)
    kernel = psutil.Process(engine.kernels[kid].process.provider.remote_pid)

    async def during_the_cut() -> None:
        await wait_until(lambda: link(engine, kid).down, timeout=30)
        kernel.kill()

    await asyncio.gather(relay.cut(DROP_S), during_the_cut())
    await wait_until(lambda: engine.kernels[kid].state == "dead")
    done = await cell.end()
    assert done.state == "lost" and "before" in done.output.text, done
    assert "died; its state is gone" in cell.notices()
    with pytest.raises(KernelDiedError, match="restart"):
        await engine.execute("1", kernel_id=kid)


# -- gateway ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = Gateway(tmp_path_factory.mktemp("gateway"))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_GATEWAY_AUTH_TOKEN", gw.token)
    yield gw
    mp.undo()
    gw.stop()


@pytest_asyncio.fixture
async def gateway_kernel(gateway, tmp_path):
    relay = Relay(gateway.port)
    engine = make_engine(make_remote_project(tmp_path), remote_reconnect_s=RECONNECT_S)
    try:
        rec = await engine.create_kernel(gateway=f"http://127.0.0.1:{relay.port}", warm=False)
        yield engine, rec.kernel_id, relay
    finally:
        await engine.shutdown()
        relay.kill()


async def test_gateway_websocket_dropped_mid_cell_reconnects_and_replays(gateway_kernel, tmp_path):
    engine, kid, _ = gateway_kernel
    cell = await started_cell(gateway_kernel, tmp_path)
    channels = engine.kernels[kid].process.provider.channels
    connect = channels._connect

    async def later(session_id: str):
        cell.release("one")  # printed while no websocket is open: the server keeps it
        await asyncio.sleep(1)
        return await connect(session_id)

    channels._connect = later
    channels._conn.close()
    await wait_until(lambda: link(engine, kid).reconnects == 1)
    channels._connect = connect
    cell.release("two")
    done = await cell.end()
    assert done.state == "ok", done.output.text
    text = done.output.text
    assert "before" in text and "during" in text and "after 42" in text, text
    assert "the server replays what the kernel sent meanwhile" in text
    assert "re-established" in cell.notices()
    await check_state_kept(engine, kid)


async def test_gateway_network_cut_is_survived_with_the_output(gateway_kernel, tmp_path):
    engine, kid, _ = gateway_kernel
    cell = await started_cell(gateway_kernel, tmp_path)
    await cut_then(gateway_kernel, cell, "one")
    await wait_until(lambda: link(engine, kid).reconnects == 1)
    cell.release("two")
    done = await cell.end()
    assert done.state == "ok", done.output.text
    text = done.output.text
    assert "before" in text and "during" in text and "after 42" in text, text
    await check_state_kept(engine, kid)


@pytest.mark.posix
async def test_gateway_network_stall_is_survived(gateway_kernel, tmp_path):
    await stall_is_survived(gateway_kernel, tmp_path)


async def test_gateway_cell_that_ends_during_the_cut_keeps_its_outcome(gateway_kernel, tmp_path):
    """The server noticed the close and kept the reply: the cell's end is replayed."""
    engine, kid, _ = gateway_kernel
    cell = await started_cell(gateway_kernel, tmp_path)
    await cut_then(gateway_kernel, cell, "one", "two")
    done = await cell.end()
    assert done.state == "ok" and "after 42" in done.output.text, done
    await check_state_kept(engine, kid)
