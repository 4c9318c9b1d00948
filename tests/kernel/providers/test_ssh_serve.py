"""``--serve`` and ``publish`` on a kernel on an SSH host (the loopback sshd of ``sshd.py``).

The Jupyter server ipykeep starts attaches to the kernel through the forwarded ports (a local
connection file); an IDE's websocket then runs code in the agent's kernel on the host, the
browser's interrupt reaches it over ssh, and what would end the kernel stays refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import pytest_asyncio

from tests.kernel.providers.checks import free_port, make_engine, make_remote_project, method
from tests.kernel.providers.sshd import LoopbackSshd, unavailable
from tests.serve.test_serve_api import KernelSocket, http, stdout_of

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ssh,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        unavailable() is not None, reason=f"loopback sshd unavailable: {unavailable()}"
    ),
]


class Server:
    """What ``tests.serve.test_serve_api``'s helpers need of a served server."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.port = int(parts.port or 0)
        self.token = parse_qs(parts.query)["token"][0]
        self.base = f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port())
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(sshd, tmp_path_factory):
    root = make_remote_project(tmp_path_factory.mktemp("sshserve"))
    engine = make_engine(
        root, ssh_config=str(sshd.config), remote_python=sys.executable, dataflow="static"
    )
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(root))
    rec = await method(engine, "serve")(kernel_id=rec.kernel_id)
    assert rec.served_url
    yield engine, rec.kernel_id, Server(rec.served_url)
    await engine.shutdown()


async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A blocking client call, off the loop that runs the engine."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def only_kernel(server: Server) -> str:
    status, kernels = http(server, "GET", "/api/kernels")  # type: ignore[arg-type]
    assert status == 200 and len(kernels) == 1, kernels
    return str(kernels[0]["id"])


async def test_the_served_server_runs_code_in_the_ssh_kernel_with_the_agents_variables(served):
    engine, kid, server = served
    provider = engine.kernels[kid].process.provider
    assert (await engine.execute("agent_var = 12345", kernel_id=kid)).state == "ok"
    status, sessions = await call(http, server, "GET", "/api/sessions")
    assert status == 200 and [s["path"] for s in sessions] == ["n.ipynb"]
    sock = await call(KernelSocket, server, sessions[0]["kernel"]["id"])
    try:
        _m, msgs = await call(
            sock.execute, "import os\nws_var = agent_var + 1\nprint(ws_var, os.getpid())"
        )
    finally:
        sock.close()
    assert stdout_of(msgs).split() == ["12346", str(provider.remote_pid)]  # the kernel on the host
    rec = await engine.execute("print(ws_var * 2)", kernel_id=kid)
    assert rec.output.text.strip() == "24692"
    # The daemon recorded the browser's execution, as for a local kernel.
    deadline = time.monotonic() + 10
    while not [
        e for e in engine.kernels[kid].executions.values() if e.kind == "browser" and e.finished
    ]:
        assert time.monotonic() < deadline, "the browser's execution was not recorded"
        await asyncio.sleep(0.1)


async def test_interrupt_from_the_browser_goes_over_ssh_and_shutdown_is_refused(served):
    engine, kid, server = served
    sid = await call(only_kernel, server)
    pid = engine.kernels[kid].process.provider.remote_pid
    assert (await engine.execute("survivor = 'still here'", kernel_id=kid)).state == "ok"
    sock = await call(KernelSocket, server, sid)
    try:
        msg_id = await call(
            sock.send,
            "execute_request",
            {
                "code": "import time\nfor _ in range(600): time.sleep(0.1)",
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        await asyncio.sleep(1.0)
        status, _ = await call(http, server, "POST", f"/api/kernels/{sid}/interrupt")
        assert status == 204
        msgs = await call(sock.until_idle, msg_id, 30)
        errors = [m["content"]["ename"] for m in msgs if m["msg_type"] == "error"]
        assert errors == ["KeyboardInterrupt"], msgs
        # What would end ipykeep's kernel is refused or dropped.
        status, body = await call(http, server, "DELETE", f"/api/kernels/{sid}")
        assert status == 403 and "ipykeep stop" in body["message"]
        status, _ = await call(http, server, "POST", f"/api/kernels/{sid}/restart")
        assert status == 403
        await call(sock.send, "shutdown_request", {"restart": False}, "control")
        await asyncio.sleep(1.0)
        _m, msgs = await call(sock.execute, "print(survivor)")
        assert stdout_of(msgs) == "still here\n"
    finally:
        sock.close()
    assert engine.kernels[kid].process.provider.remote_pid == pid
    assert (await engine.execute("print(survivor)", kernel_id=kid)).output.text == "still here\n"


async def test_a_lost_ssh_kernel_is_let_go_and_re_adopted_when_restarted(served):
    engine, kid, server = served
    session = engine.kernels[kid]
    old_file = session.process.connection_file
    os.killpg(session.process.provider.remote_pid, signal.SIGKILL)  # the kernel dies on the host
    deadline = time.monotonic() + 20
    while (await call(http, server, "GET", "/api/kernels"))[1]:  # the server lets go of it
        assert time.monotonic() < deadline, "the lost kernel stayed adopted"
        await asyncio.sleep(0.2)
    await engine.restart(kernel_id=kid)
    provider = engine.kernels[kid].process.provider
    assert provider.connection_file != old_file and not Path(old_file).exists()
    sock = await call(KernelSocket, server, await call(only_kernel, server))
    try:
        _m, msgs = await call(
            sock.execute, "import os\nprint('agent_var' in globals(), os.getpid())"
        )
    finally:
        sock.close()
    assert stdout_of(msgs).split() == ["False", str(provider.remote_pid)]  # the new kernel, fresh


async def test_publish_and_close_an_ssh_kernel(served):
    engine, kid, server = served
    res = await method(engine, "publish")(kernel_id=kid, cells={"1": "the total"})
    assert res.url.startswith(f"{server.base}/") and res.kernel_id == kid
    status, nb = await call(http, server, "GET", "/api/contents/" + res.path)
    assert status == 200 and nb["type"] == "notebook"
    conn = Path(engine.kernels[kid].process.connection_file)
    assert json.loads(conn.read_text())["key"]
    await engine.close_kernel(kid)
    assert not conn.exists()  # the local connection file goes with the kernel
    with pytest.raises(OSError):  # the last hosted kernel closed: the server stopped
        await call(http, server, "GET", "/api/kernels")
