"""A stdio session handed to the daemon, and what happens to it when the daemon goes.

Pure checks of what travels with a session (its handshake, state, unread input and open
requests), then real ``mcp-serve`` processes driven line by line as a host drives them: the
session moves to the daemon once a call reached it, survives the daemon stopping (it comes
back, and moves to the next daemon), the daemon being killed mid-call (the call is answered
with an error that says so), and the client leaving (``mcp-serve`` exits, the kernel stays).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ipykeep.client.connection import Descriptor, find_daemon, pid_alive
from ipykeep.mcp_server import transfer
from ipykeep.mcp_server.inflight import InflightTable, Ledger
from ipykeep.mcp_server.session import INITIALIZED_LINE, Handshake, SessionState
from tests.mcp_server.harness import (
    NOTEBOOK,
    RawServer,
    make_project,
    shutdown_daemon,
    tool_call,
)

HANDED = "serving an MCP session handed over by mcp-serve"


def test_a_session_state_replays_the_handshake_then_the_unread_input() -> None:
    state = SessionState(
        project="/p",
        initialize={"protocolVersion": "2025-06-18", "capabilities": {}},
        log_level="error",
        reader="mcp-abc",
        shown={"k1": ["kernel restarted"]},
    )
    again = SessionState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state
    replay = again.replay(b'{"id":1}\n{"id":2}\n{"id"')
    first = json.loads(replay.lines[0])
    assert first["method"] == "initialize" and first["params"] == state.initialize
    assert replay.drop == {first["id"]}
    assert replay.lines[1:] == [INITIALIZED_LINE, b'{"id":1}\n', b'{"id":2}\n']
    assert replay.partial == b'{"id"'
    # A 2026-07-28 session has no handshake: only its input is replayed.
    modern = SessionState(project="/p", initialize=None).replay(b"x\n")
    assert modern.lines == [b"x\n"] and modern.drop == set()


def test_the_handshake_is_read_off_the_traffic() -> None:
    handshake = Handshake()
    handshake.saw_request(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"a":1}}\n')
    assert handshake.params == {"a": 1} and not handshake.ready
    handshake.saw_response('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}')
    # A call whose arguments mention the notification is not the notification.
    handshake.saw_request(tool_call(1, "ipython", {"code": "'notifications/initialized'"}))
    assert not handshake.ready
    handshake.saw_request(INITIALIZED_LINE)
    assert handshake.ready and handshake.version == "2025-06-18"


def test_open_requests_are_in_the_shared_table_until_answered() -> None:
    table = InflightTable.create()
    other_side = InflightTable(os.dup(table.fd))  # the daemon maps the same page
    try:
        ledger = Ledger(other_side)
        quiet: list[bool] = []
        ledger.on_quiet = lambda: quiet.append(True)
        ledger.opened(7, "tools/call")
        ledger.opened("8", "resources/read")
        assert table.held() == [(7, "tools/call"), ("8", "resources/read")]
        ledger.closed(8)  # "8" and 8 are one id (the SDK's rule)
        assert table.held() == [(7, "tools/call")] and not ledger.quiet() and not quiet
        ledger.closed(7)
        assert table.held() == [] and ledger.quiet() and quiet == [True]
        ledger.opened("x" * 1000, "tools/call")  # too long to record: served, not recorded
        assert table.held() == []
    finally:
        other_side.close()
        table.close()


# -- real processes ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    root = make_project(tmp_path / "proj")
    yield root
    shutdown_daemon(root)


def _daemon_log(root: Path) -> str:
    try:
        return (root / ".ipykeep" / "run" / "daemon.log").read_text()
    except OSError:
        return ""


def _wait(predicate: Any, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _ran(server: RawServer, rid: Any, kid: str, code: str) -> str:
    reply = server.ask(tool_call(rid, "ipython", {"kernel_id": kid, "code": code}), rid)
    assert reply["result"]["isError"] is False, reply
    return str(reply["result"]["structuredContent"].get("output", ""))


@pytest.mark.posix
@pytest.mark.kernel
def test_the_session_moves_to_the_daemon_and_keeps_its_state(project: Path) -> None:
    server = RawServer(project)
    try:
        server.handshake()
        level = (
            b'{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"error"}}'
        )
        server.ask(level + b"\n", "lvl")
        kid = server.create_kernel(1, notebook=NOTEBOOK)
        handle = server.ask(
            tool_call(2, "ipython", {"kernel_id": kid, "code": "print('a')", "yield_time_ms": 0}),
            2,
        )["result"]["structuredContent"]["handle"]
        assert _wait(lambda: HANDED in _daemon_log(project))
        # Served by the daemon now: state, cursors and answers go on as before.
        assert "42" in _ran(server, 3, kid, "x = 41 + 1\nx")
        read = server.ask(
            tool_call(4, "read_cell", {"kernel_id": kid, "handle": handle, "yield_time_ms": 5000}),
            4,
        )["result"]["structuredContent"]
        assert read.get("state") == "ok" and read.get("output") == "a\n", read
        # Twenty requests at once: each answered once (input read and not handled moves too).
        for i in range(20):
            server.send(tool_call(100 + i, "ipython", {"kernel_id": kid, "code": f"{i}"}))
        answers = [server.answer(100 + i) for i in range(20)]
        assert all(a["result"]["isError"] is False for a in answers)
        # A notice after the move rides the result, and the level set before it holds: the
        # warning is not sent as a log message.
        nb = nbformat.read(project / NOTEBOOK, as_version=4)
        nb.cells[1].source = "total = 0"
        nbformat.write(nb, project / NOTEBOOK)
        notices: list[str] = []
        deadline = time.monotonic() + 20
        while not notices and time.monotonic() < deadline:
            time.sleep(0.3)
            reply = server.ask(tool_call(200, "ipython", {"kernel_id": kid, "code": "1"}), 200)
            notices = reply["result"]["structuredContent"].get("notices") or []
        assert any("changed on disk" in n for n in notices), notices
        assert not [n for n in server.notes if n.get("method") == "notifications/message"]
    finally:
        server.close()
    assert server.proc.returncode == 0
    daemon = find_daemon(project)
    assert daemon is not None and pid_alive(daemon.pid)  # the client left; the kernel stays


@contextlib.contextmanager
def _handed_over(project: Path) -> Iterator[tuple[RawServer, str, Descriptor]]:
    """A session whose first kernel is made and which the daemon serves; ``mcp-serve`` must
    exit 0 when the client closes it."""
    server = RawServer(project)
    try:
        server.handshake()
        kid = server.create_kernel(1)
        assert _wait(lambda: HANDED in _daemon_log(project))
        daemon = find_daemon(project)
        assert daemon is not None
        yield server, kid, daemon
    finally:
        server.close()
    assert server.proc.returncode == 0


@pytest.mark.posix
@pytest.mark.kernel
def test_the_session_comes_back_when_the_daemon_stops_and_moves_to_the_next(
    project: Path,
) -> None:
    with _handed_over(project) as (server, kid, first):
        closed = server.ask(tool_call(2, "close_kernel", {"kernel_id": kid}), 2)
        assert closed["result"]["isError"] is False
        assert _wait(lambda: not pid_alive(first.pid))  # its last kernel closed: it exits
        listed = server.ask(tool_call(3, "list_kernels", {}), 3)  # served by mcp-serve again
        assert listed["result"]["structuredContent"] == {"kernels": []}
        kid = server.create_kernel(4)
        second = find_daemon(project)
        assert second is not None and second.pid != first.pid
        assert _wait(lambda: _daemon_log(project).count(HANDED) == 2)  # the log is appended
        assert "9" in _ran(server, 5, kid, "3 * 3")


@pytest.mark.posix
@pytest.mark.kernel
def test_a_killed_daemon_leaves_no_call_unanswered(project: Path) -> None:
    with _handed_over(project) as (server, kid, daemon):
        slow = {"kernel_id": kid, "code": "import time; time.sleep(60)", "yield_time_ms": 30000}
        server.send(tool_call(2, "ipython", slow))
        time.sleep(0.5)
        os.kill(daemon.pid, signal.SIGKILL)
        lost = server.answer(2, timeout=15)["result"]
        assert lost["isError"] is True
        assert lost["structuredContent"]["code"] == "daemon_unreachable"
        assert "call again" in lost["structuredContent"]["hint"]
        kid = server.create_kernel(3)  # a new daemon; the session goes on, and moves there
        assert "ok" in _ran(server, 4, kid, "'ok'")
        assert _wait(lambda: _daemon_log(project).count(HANDED) == 2)  # the log is appended


@pytest.mark.posix
@pytest.mark.kernel
def test_the_socket_is_private_and_takes_no_session_without_the_token(project: Path) -> None:
    with _handed_over(project) as (_, _, daemon):
        assert daemon.mcp_socket
        path = Path(daemon.mcp_socket)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        r, w = os.pipe()
        table = InflightTable.create()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(path))
                socket.send_fds(sock, [b"F"], [r, w, table.fd])
                header = {"token": "wrong", "op": "adopt", "state": {"project": str(project)}}
                sock.sendall(json.dumps(header).encode() + b"\n")
                sock.settimeout(10)
                reply = json.loads(sock.makefile().readline())
            assert reply == {"refused": "missing or wrong token"}
            assert "refused an MCP session offered without the daemon's token" in _daemon_log(
                project
            )
            assert "wrong" not in _daemon_log(project)  # no token in the log
        finally:
            os.close(r)
            os.close(w)
            table.close()
        assert transfer.supported()


@pytest.mark.posix
@pytest.mark.kernel
def test_handoff_off_keeps_the_session_in_mcp_serve(project: Path) -> None:
    server = RawServer(project, IPYKEEP_MCP_HANDOFF="0")
    try:
        server.handshake()
        kid = server.create_kernel(1)
        assert "4" in _ran(server, 2, kid, "2 + 2")
        time.sleep(0.5)
        assert HANDED not in _daemon_log(project)
    finally:
        server.close()
