"""Kernels behind a Jupyter Kernel Gateway started on loopback with a token.

The gateway is jupyter_kernel_gateway (a dev dependency) on a random free port; its default
kernel spec runs this interpreter's ipykernel, as a remote server's would run its own. One
gateway and one kernel serve the module; the failure tests start what they break.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal
import time
from collections.abc import Iterator

import pytest
import pytest_asyncio

from ipykeep.api.errors import (
    KernelDiedError,
    KernelStartError,
    RemoteAuthError,
    RemoteNotSupportedError,
    RemoteUnreachableError,
)
from tests.conftest import cli_env, run_cli, stop_daemon
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
    method,
)
from tests.kernel.providers.gateway_server import Gateway

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[Gateway]:
    gw = Gateway(tmp_path_factory.mktemp("gateway"))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_GATEWAY_AUTH_TOKEN", gw.token)
    yield gw
    mp.undo()
    gw.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def remote(gateway, tmp_path_factory):
    root = make_remote_project(tmp_path_factory.mktemp("gwproj"))
    engine = make_engine(root)
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), gateway=gateway.url)
    yield engine, rec.kernel_id, root
    await engine.shutdown()


async def test_start_runs_in_the_notebook_directory_on_the_gateway(remote, gateway):
    engine, kid, root = remote
    process = engine.kernels[kid].process
    assert process.provider.kind == "gateway" and process.pid is None
    assert [k["id"] for k in gateway.kernels()] == [process.provider.kernel_id]
    assert engine.kernels[kid].warm.failed == []
    await check_run_and_cwd(engine, kid, root)


async def test_interrupt_uses_the_gateway_endpoint(remote):
    engine, kid, _ = remote
    await check_interrupt(engine, kid)


async def test_run_stale_after_a_data_file_edit(remote):
    engine, kid, root = remote
    await check_run_stale_after_data_edit(engine, kid, root)


async def test_inspect(remote):
    engine, kid, _ = remote
    await check_inspect(engine, kid)


async def test_close_deletes_the_kernel_on_the_gateway(remote, gateway):
    engine, _, root = remote
    rec = await engine.create_kernel(cwd=str(root), gateway=gateway.url, warm=False)
    assert len(gateway.kernels()) == 2
    await engine.close_kernel(kernel_id=rec.kernel_id)
    assert len(gateway.kernels()) == 1


async def test_a_wrong_token_is_an_auth_error_that_does_not_leak_it(
    gateway, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv("IPYKEEP_TEST_GATEWAY_TOKEN", wrong)
    engine = make_engine(
        make_remote_project(tmp_path), gateway_token_env="IPYKEEP_TEST_GATEWAY_TOKEN"
    )
    try:
        with pytest.raises(RemoteAuthError) as err:
            await engine.create_kernel(cwd=None, gateway=gateway.url, warm=False)
        assert (
            "refused the credentials" in err.value.message
            and "IPYKEEP_TEST_GATEWAY_TOKEN" in err.value.hint
        )
        monkeypatch.delenv("IPYKEEP_TEST_GATEWAY_TOKEN")
        with pytest.raises(RemoteAuthError, match="no token was sent"):
            await engine.create_kernel(cwd=None, gateway=gateway.url, warm=False)
    finally:
        await engine.shutdown()
    assert wrong not in caplog.text and gateway.token not in caplog.text
    assert wrong not in str(err.value) and not engine.kernels


async def test_an_unreachable_gateway_is_reported(tmp_path):
    engine = make_engine(make_remote_project(tmp_path))
    try:
        with pytest.raises(
            RemoteUnreachableError, match=r"cannot reach the Jupyter server at http://127\.0\.0\.1"
        ):
            await engine.create_kernel(gateway=f"http://127.0.0.1:{free_port()}", warm=False)
    finally:
        await engine.shutdown()


async def test_a_dropped_websocket_reconnects_to_the_same_kernel_and_replays_its_messages(remote):
    engine, kid, _ = remote
    channels = engine.kernels[kid].process.provider.channels
    before = channels.link.reconnects
    await engine.execute("kept = 41", kernel_id=kid)
    connect = channels._connect

    async def slow_connect(session_id: str):
        await asyncio.sleep(2.5)  # the link stays down until the cell has finished
        return await connect(session_id)

    channels._connect = slow_connect
    running = await engine.execute(
        "import time; time.sleep(1); print('finished meanwhile')", kernel_id=kid, yield_time_ms=0
    )
    channels._conn.close()  # the link drops while the cell runs (the server sees the close)
    done = await engine.read_execution(running.handle, kernel_id=kid, yield_time_ms=15000)
    assert done.state == "ok" and done.output.text.strip().endswith("finished meanwhile"), done
    assert "the server replays what the kernel sent meanwhile" in done.output.text
    channels._connect = connect
    assert channels.link.reconnects == before + 1 and engine.kernels[kid].state != "dead"
    assert (await engine.execute("print(kept + 1)", kernel_id=kid)).output.text.strip() == "42"


@pytest.mark.posix
async def test_a_lost_gateway_is_a_clear_connection_lost_error(tmp_path, monkeypatch):
    gw = Gateway(tmp_path)
    monkeypatch.setenv("JUPYTER_GATEWAY_AUTH_TOKEN", gw.token)
    engine = make_engine(make_remote_project(tmp_path / "proj"), remote_reconnect_s=1)
    try:
        rec = await engine.create_kernel(gateway=gw.url, warm=False)
        running = await engine.execute(
            "import time; time.sleep(30)", kernel_id=rec.kernel_id, yield_time_ms=0
        )
        gw.stop(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while engine.kernels[rec.kernel_id].state != "dead" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert engine.kernels[rec.kernel_id].state == "dead"
        lost = await engine.read_execution(running.handle, kernel_id=rec.kernel_id)
        assert lost.state == "lost" and "connection" in lost.output.text
        with pytest.raises(
            KernelDiedError,
            match="connection to gateway http://127.0.0.1:.* was lost and could not be "
            r"re-established within 1 s \(remote_reconnect_s\): cannot reach",
        ):
            await engine.execute("1", kernel_id=rec.kernel_id)
    finally:
        gw.stop()
        await engine.shutdown()


def test_cli_start_gateway_through_the_daemon(gateway, tmp_path):
    """`ipykeep start --gateway URL`: the daemon (it inherits the token) runs the kernel there."""
    root = make_remote_project(tmp_path)
    env = cli_env(JUPYTER_GATEWAY_AUTH_TOKEN=gateway.token)
    before = len(gateway.kernels())
    try:
        started = run_cli("start", "n.ipynb", "--gateway", gateway.url, "--json", cwd=root, env=env)
        assert started.returncode == 0, started.stderr
        assert gateway.token not in started.stdout + started.stderr
        assert len(gateway.kernels()) == before + 1
        out = run_cli("exec", "print(total)", cwd=root, env=env)
        assert out.returncode == 0 and out.stdout.strip() == "3", out.stdout + out.stderr
        log = "".join(p.read_text(errors="replace") for p in (root / ".ipykeep").rglob("*.log"))
        assert gateway.token not in log
    finally:
        stop_daemon(root)
    assert len(gateway.kernels()) == before


async def test_serve_refuses_a_remote_kernel_clearly(remote):
    engine, kid, _ = remote
    for name in ("serve", "publish"):
        with pytest.raises(
            RemoteNotSupportedError, match="cannot attach to a gateway kernel"
        ) as info:
            await method(engine, name)(kernel_id=kid)
        hint = info.value.hint or ""
        assert "--gateway-url=http://127.0.0.1:" in hint
        assert (
            f"Connect to Existing Kernel, kernel {engine.kernels[kid].process.provider.kernel_id} "
            in hint
        )


async def test_restart_replaces_the_kernel_on_the_gateway(remote, gateway):
    engine, kid, _ = remote
    before = engine.kernels[kid].process.provider.kernel_id
    await check_restart(engine, kid)
    after = engine.kernels[kid].process.provider.kernel_id
    assert after != before and after in [k["id"] for k in gateway.kernels()]
    assert before not in [k["id"] for k in gateway.kernels()]


async def test_ipyflow_on_a_plain_gateway_kernel_spec_is_refused_clearly(gateway, tmp_path):
    engine = make_engine(make_remote_project(tmp_path), dataflow="ipyflow")
    before = len(gateway.kernels())
    try:
        with pytest.raises(KernelStartError, match="does not run ipyflow") as err:
            await engine.create_kernel(gateway=gateway.url, warm=False)
        assert "gateway_kernel_name" in err.value.hint
    finally:
        await engine.shutdown()
    assert len(gateway.kernels()) == before  # the refused kernel was deleted on the server


async def test_a_kernel_dying_on_the_gateway_is_reported_as_died(gateway, tmp_path):
    """The server restarts a dead kernel under the same id; ipykeep must not trust its state."""
    engine = make_engine(make_remote_project(tmp_path))
    try:
        rec = await engine.create_kernel(gateway=gateway.url, warm=False)
        await engine.execute("kept = 1", kernel_id=rec.kernel_id)
        await engine.execute("import os; os._exit(1)", kernel_id=rec.kernel_id, yield_time_ms=0)
        deadline = time.monotonic() + 15
        while engine.kernels[rec.kernel_id].state != "dead" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert engine.kernels[rec.kernel_id].state == "dead"
        assert any("died; its state is gone" in n for n in engine.kernels[rec.kernel_id].notices)
        await engine.restart(kernel_id=rec.kernel_id)
        again = await engine.execute("print('kept' in globals())", kernel_id=rec.kernel_id)
        assert again.output.text.strip() == "False"
    finally:
        await engine.shutdown()


async def test_data_files_are_stat_and_watched_through_the_kernel(gateway, tmp_path):
    """The kernel works in its own directory: "data.csv" there is not the copy beside the
    notebook, and only the kernel's stat can see its edit."""
    root = make_remote_project(tmp_path / "nb")
    kernel_dir = make_kernel_side_dir(tmp_path)
    engine = make_engine(root, kernel_cwd=str(kernel_dir), remote_watch_interval_s=0.5)
    try:
        rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), gateway=gateway.url)
        await check_files_are_stat_through_the_kernel(engine, rec.kernel_id, root, kernel_dir)
    finally:
        await engine.shutdown()
