"""Kernels on an SSH host: a loopback sshd started with generated keys (see ``sshd.py``).

The "host" is this machine, so the tests can look at the remote side directly: the kernel's
process, its working directory and the ports it listens on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from ipykeep.api.errors import KernelDiedError, RemoteAuthError, RemoteUnreachableError, UsageError
from ipykeep.kernel.providers.ssh import PORT_NAMES, SshTarget
from tests.kernel.providers.checks import (
    check_files_are_stat_through_the_kernel,
    check_inspect,
    check_interrupt,
    check_restart,
    check_run_and_cwd,
    check_run_stale_after_data_edit,
    free_port,
    make_engine,
    make_kernel_side_dir,
    make_remote_project,
)
from tests.kernel.providers.sshd import LoopbackSshd, unavailable

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ssh,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        unavailable() is not None, reason=f"loopback sshd unavailable: {unavailable()}"
    ),
]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port())
    yield server
    server.stop()


def ssh_engine(root: Path, sshd: LoopbackSshd, **config):
    return make_engine(root, ssh_config=str(sshd.config), remote_python=sys.executable, **config)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def remote(sshd, tmp_path_factory):
    root = make_remote_project(tmp_path_factory.mktemp("sshproj"))
    engine = ssh_engine(root, sshd)
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(root))
    yield engine, rec.kernel_id, root
    await engine.shutdown()


def remote_kernel(engine, kid) -> psutil.Process:
    provider = engine.kernels[kid].process.provider
    assert provider.kind == "ssh" and provider.remote_pid
    return psutil.Process(provider.remote_pid)


def test_ssh_urls_parse():
    assert SshTarget.parse("ssh://me@gpu.example.org:2222/data/proj") == SshTarget(
        "gpu.example.org", "me", 2222, "/data/proj"
    )
    assert SshTarget.parse("ssh://box/~/proj").path == "~/proj"
    assert SshTarget.parse("ssh://box").path == "~"
    with pytest.raises(UsageError, match="password"):
        SshTarget.parse("ssh://me:secret@box/x")


async def test_start_runs_on_the_host_in_the_path_listening_on_loopback_only(remote):
    engine, kid, root = remote
    process = engine.kernels[kid].process
    assert process.pid is None  # nothing local to signal
    # a local connection file for the forwarded ports (what --serve attaches to), private
    conn = Path(process.connection_file)
    assert conn.stat().st_mode & 0o777 == 0o600 and conn.parent.stat().st_mode & 0o777 == 0o700
    assert {json.loads(conn.read_text())[p] for p in PORT_NAMES} == set(
        process.provider.local_ports
    )
    kernel = remote_kernel(engine, kid)
    assert Path(kernel.cwd()) == root
    listening = [
        c.laddr for c in kernel.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
    ]
    assert listening and {a.ip for a in listening} == {
        "127.0.0.1"
    }  # nothing reachable from outside
    assert engine.kernels[kid].warm.failed == []
    await check_run_and_cwd(engine, kid, root)
    # the launcher passes the kernel's options: no IPython history database on the host
    hist = await engine.execute("print(get_ipython().history_manager.hist_file)", kernel_id=kid)
    assert hist.output.text.strip() == ":memory:"


async def test_interrupt_signals_the_remote_process_group(remote):
    engine, kid, _ = remote
    await check_interrupt(engine, kid)


async def test_run_stale_after_a_data_file_edit(remote):
    engine, kid, root = remote
    await check_run_stale_after_data_edit(engine, kid, root)


async def test_inspect(remote):
    engine, kid, _ = remote
    await check_inspect(engine, kid)


async def test_close_stops_the_remote_kernel_and_the_connection(remote, sshd):
    engine, _, root = remote
    rec = await engine.create_kernel(cwd=sshd.url(root), warm=False)
    provider = engine.kernels[rec.kernel_id].process.provider
    kernel, master = remote_kernel(engine, rec.kernel_id), psutil.Process(provider.master.pid)
    await engine.close_kernel(kernel_id=rec.kernel_id)
    gone, alive = psutil.wait_procs([kernel, master], timeout=5)
    assert not alive


async def test_an_unknown_key_is_an_auth_error(sshd, tmp_path):
    other = tmp_path / "other_key"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    config = tmp_path / "ssh_config"
    config.write_text(sshd.client_config(other))
    root = make_remote_project(tmp_path)
    engine = make_engine(root, ssh_config=str(config), remote_python=sys.executable)
    try:
        with pytest.raises(RemoteAuthError, match="failed authentication: .*Permission denied"):
            await engine.create_kernel(cwd=sshd.url(root), warm=False)
    finally:
        await engine.shutdown()


async def test_an_unreachable_host_and_a_missing_directory_are_reported(sshd, tmp_path):
    root = make_remote_project(tmp_path)
    engine = ssh_engine(root, sshd)
    try:
        with pytest.raises(RemoteUnreachableError, match="cannot reach .* over ssh: .*refused"):
            await engine.create_kernel(cwd=f"ssh://ipykeep-test-host:{free_port()}/tmp", warm=False)
        with pytest.raises(Exception, match="no such directory on the host: /nonexistent/dir"):
            await engine.create_kernel(cwd=sshd.url("/nonexistent/dir"), warm=False)
    finally:
        await engine.shutdown()


async def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert condition()


async def test_a_dropped_link_is_re_established_to_the_same_kernel(sshd, tmp_path):
    root = make_remote_project(tmp_path)
    engine = ssh_engine(root, sshd)
    try:
        rec = await engine.create_kernel(cwd=sshd.url(root), warm=False)
        kid = rec.kernel_id
        kernel = remote_kernel(engine, kid)
        assert (await engine.execute("x = 41", kernel_id=kid)).state == "ok"
        provider = engine.kernels[kid].process.provider
        old_master, ports = provider.master.pid, list(provider.local_ports)
        os.kill(old_master, signal.SIGKILL)  # the link drops
        await _wait_for(lambda: provider.link.reconnects == 1)
        session = engine.kernels[kid]
        assert any("and was re-established" in n for n in session.notices), session.notices
        after = await engine.execute("print(x + 1)", kernel_id=kid)
        assert after.state == "ok" and after.output.text.strip() == "42", (
            after
        )  # same kernel, same state
        assert provider.master.pid != old_master and provider.local_ports == ports
        assert remote_kernel(engine, kid).pid == kernel.pid and session.state != "dead"
        # the interrupt line reaches the kernel through the new link too
        await check_interrupt_after_reconnect(engine, kid)
    finally:
        await engine.shutdown()
    gone, alive = psutil.wait_procs([kernel], timeout=8)
    assert not alive, "closing still stops the kernel on the host"


async def check_interrupt_after_reconnect(engine, kid) -> None:
    slow = await engine.execute(
        "import time\nfor _ in range(600): time.sleep(0.1)", kernel_id=kid, yield_time_ms=0
    )
    await asyncio.sleep(0.5)
    assert (await engine.interrupt(kernel_id=kid, handle=slow.handle)).action == "interrupted"


async def test_a_kernel_that_died_with_the_link_takes_the_restart_path(sshd, tmp_path):
    root = make_remote_project(tmp_path)
    engine = ssh_engine(root, sshd)
    try:
        rec = await engine.create_kernel(cwd=sshd.url(root), warm=False)
        kid = rec.kernel_id
        await engine.execute("x = 41", kernel_id=kid)
        kernel = remote_kernel(engine, kid)
        os.kill(engine.kernels[kid].process.provider.master.pid, signal.SIGKILL)
        kernel.kill()
        await _wait_for(lambda: engine.kernels[kid].state == "dead")
        assert any("died; its state is gone" in n for n in engine.kernels[kid].notices)
        await engine.restart(kernel_id=kid)
        again = await engine.execute("print('x' in globals())", kernel_id=kid)
        assert again.output.text.strip() == "False"
    finally:
        await engine.shutdown()


async def test_an_unreachable_host_after_a_drop_is_reported_and_the_orphan_stops(sshd, tmp_path):
    root = make_remote_project(tmp_path)
    engine = ssh_engine(root, sshd, ssh_orphan_timeout_s=2, remote_reconnect_s=2)
    try:
        rec = await engine.create_kernel(cwd=sshd.url(root), warm=False)
        kid = rec.kernel_id
        kernel = remote_kernel(engine, kid)
        running = await engine.execute(
            "import time; time.sleep(30)", kernel_id=kid, yield_time_ms=0
        )
        provider = engine.kernels[kid].process.provider
        provider.target = dataclasses.replace(
            provider.target, port=free_port()
        )  # nothing listens there
        os.kill(provider.master.pid, signal.SIGKILL)  # the link drops and cannot come back
        await _wait_for(lambda: engine.kernels[kid].state == "dead")
        lost = await engine.read_execution(running.handle, kernel_id=kid)
        assert lost.state == "lost" and "ssh connection" in lost.output.text
        with pytest.raises(
            KernelDiedError,
            match=r"was lost and could not be re-established within 2 s \(remote_reconnect_s\): "
            "cannot reach",
        ):
            await engine.execute("1", kernel_id=kid)
        gone, alive = psutil.wait_procs([kernel], timeout=15)
        assert not alive, "a kernel nobody re-attaches to must stop after ssh_orphan_timeout_s"
    finally:
        await engine.shutdown()


async def test_restart_replaces_the_remote_kernel(remote):
    engine, kid, _ = remote
    before = remote_kernel(engine, kid)
    await check_restart(engine, kid)
    assert remote_kernel(engine, kid).pid != before.pid
    assert not psutil.pid_exists(before.pid) or before.status() == psutil.STATUS_ZOMBIE


async def test_an_ipyflow_kernel_over_ssh(sshd, tmp_path):
    root = make_remote_project(tmp_path)
    engine = ssh_engine(root, sshd, dataflow="ipyflow")
    try:
        rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(root))
        assert rec.dataflow == "ipyflow" and engine.kernels[rec.kernel_id].warm.failed == []
        assert "ipyflow" in " ".join(remote_kernel(engine, rec.kernel_id).cmdline())
        await check_run_stale_after_data_edit(engine, rec.kernel_id, root)
    finally:
        await engine.shutdown()


async def test_data_files_are_stat_and_watched_through_the_kernel(sshd, tmp_path):
    """The kernel works in its own directory: "data.csv" there is not the copy beside the
    notebook, and only the kernel's stat can see its edit."""
    root = make_remote_project(tmp_path / "nb")
    kernel_dir = make_kernel_side_dir(tmp_path)
    engine = ssh_engine(root, sshd, remote_watch_interval_s=0.5)
    try:
        rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(kernel_dir))
        await check_files_are_stat_through_the_kernel(engine, rec.kernel_id, root, kernel_dir)
    finally:
        await engine.shutdown()
