"""The endpoints an IDE uses reach ipykeep's kernel; destructive ones are refused."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import websocket

from tests.serve.conftest import Served, run_cli

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]


def http(
    served: Served, method: str, path: str, *, token: bool | str = True, body: Any = None
) -> tuple[int, Any]:
    """A request with the server's token (``token=True``), none, or the given one."""
    data = (
        json.dumps(body).encode()
        if body is not None
        else (b"" if method in ("POST", "PUT") else None)
    )
    req = urllib.request.Request(served.base + path, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {served.token if token is True else token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def kernel_id(served: Served) -> str:
    status, kernels = http(served, "GET", "/api/kernels")
    assert status == 200
    assert len(kernels) == 1, kernels
    return kernels[0]["id"]


class KernelSocket:
    """A kernel websocket client speaking the JSON protocol, as an IDE extension does."""

    def __init__(self, served: Served, kid: str) -> None:
        url = f"ws://127.0.0.1:{served.port}/api/kernels/{kid}/channels?token={served.token}"
        self.ws = websocket.create_connection(url, timeout=30)
        self.session = uuid.uuid4().hex

    def send(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "msg_type": msg_type,
                "username": "ide",
                "session": self.session,
                "date": "",
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self.ws.send(json.dumps(msg))
        return msg_id

    def execute(self, code: str, timeout: float = 60) -> tuple[str, list[dict[str, Any]]]:
        msg_id = self.send(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        return msg_id, self.until_idle(msg_id, timeout)

    def until_idle(self, msg_id: str, timeout: float = 60) -> list[dict[str, Any]]:
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            seen.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return seen
        raise AssertionError(f"no idle for {msg_id}: {seen}")

    def close(self) -> None:
        self.ws.close()


def stdout_of(msgs: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def test_rest_lists_exactly_the_adopted_kernel_and_its_session(served: Served) -> None:
    kid = kernel_id(served)
    status, sessions = http(served, "GET", "/api/sessions")
    assert status == 200
    assert [(s["path"], s["kernel"]["id"]) for s in sessions] == [("analysis.ipynb", kid)]
    assert served.url.startswith(f"{served.base}/lab/tree/analysis.ipynb?token=")


def test_without_the_token_everything_is_refused(served: Served) -> None:
    kid = kernel_id(served)
    for method, path in [
        ("GET", "/api/kernels"),
        ("GET", "/api/sessions"),
        ("POST", f"/api/kernels/{kid}/interrupt"),
        ("GET", "/api/contents/analysis.ipynb"),
        ("POST", "/ipykeep/sync"),
    ]:
        status, _ = http(served, method, path, token=False)
        assert status in (401, 403), (method, path, status)
    with pytest.raises(websocket.WebSocketBadStatusException) as info:
        websocket.create_connection(
            f"ws://127.0.0.1:{served.port}/api/kernels/{kid}/channels", timeout=10
        )
    assert info.value.status_code in (401, 403)
    # Nor is the server's token the daemon's.
    from ipykeep.client.connection import find_daemon

    assert find_daemon(served.root).token != served.token


def test_cell_marks_need_the_token_and_follow_the_plan(served: Served) -> None:
    query = "/ipykeep/cells?path=analysis.ipynb"
    status, _ = http(served, "GET", query, token=False)
    assert status == 403
    served.rpc("run_cells", cells=["1"])
    status, body = http(served, "GET", query)
    assert status == 200, body
    nb = nbformat.read(str(served.notebook), as_version=4)
    code_ids = [c.id for c in nb.cells if c.cell_type == "code"]
    assert [m["id"] for m in body["cells"]] == code_ids
    marks = {m["id"]: m for m in body["cells"]}
    assert marks[nb.cells[1].id]["state"] == "fresh"
    # Warm-up ran it before the agent bound agent_var: it failed, so the plan re-runs it.
    failed = marks[nb.cells[2].id]
    assert failed["state"] == "stale" and "raised" in failed["title"], failed
    assert body["kernel_id"] == served.rpc("list_cells")["kernel_id"]
    # A path no served kernel hosts has no marks (and the daemon is not asked to start one).
    status, body = http(served, "GET", "/ipykeep/cells?path=other.ipynb")
    assert (status, body) == (200, {"kernel_id": None, "cells": []})


def test_websocket_runs_code_in_the_agents_kernel_and_ipykeep_records_it(served: Served) -> None:
    res = run_cli("exec", "agent_var = 12345", cwd=served.root)
    assert res.returncode == 0, res.stderr
    sock = KernelSocket(served, kernel_id(served))
    try:
        _msg_id, msgs = sock.execute("ws_var = agent_var + 1\nprint('ws_var is', ws_var)")
    finally:
        sock.close()
    assert "ws_var is 12346" in stdout_of(msgs)
    # The agent sees what the IDE did: same kernel, and a "browser" execution in the records.
    res = run_cli("exec", "print(ws_var * 2)", cwd=served.root)
    assert res.stdout.strip() == "24692", res.stderr
    deadline = time.monotonic() + 10
    while True:
        cells = served.rpc("list_cells")
        browser = [r for r in cells["scratch"] if r["kind"] == "browser"]
        if browser and browser[-1]["state"] == "ok":
            break
        assert time.monotonic() < deadline, cells["scratch"]
        time.sleep(0.2)
    rec = served.rpc("read_execution", handle=browser[-1]["handle"])
    assert "ws_var is 12346" in rec["output"]["text"]
    archive = (served.root / ".ipykeep/kernels").glob("k*/record.jsonl")
    lines = [json.loads(line) for f in archive for line in f.read_text().splitlines()]
    assert [
        e["state"]
        for e in lines
        if e.get("kind") == "browser" and "ws_var = agent_var + 1" in e.get("code", "")
    ] == ["ok"]


def test_restart_and_shutdown_are_refused_and_the_state_survives(served: Served) -> None:
    run_cli("exec", "survivor = 'still here'", cwd=served.root)
    kid = kernel_id(served)
    status, body = http(served, "POST", f"/api/kernels/{kid}/restart")
    assert status == 403 and "refused" in body["message"]
    status, body = http(served, "DELETE", f"/api/kernels/{kid}")
    assert status == 403 and "ipykeep stop" in body["message"]
    _s, sessions = http(served, "GET", "/api/sessions")
    status, _ = http(served, "DELETE", f"/api/sessions/{sessions[0]['id']}")
    assert status == 403
    status, body = http(served, "POST", "/api/kernels", body={"name": "python3"})
    assert status == 403, "the server must not start kernels of its own"
    # A shutdown_request over the websocket is dropped.
    sock = KernelSocket(served, kid)
    try:
        sock.send("shutdown_request", {"restart": False}, channel="control")
        time.sleep(1.5)
        _m, msgs = sock.execute("print(survivor)")
        assert stdout_of(msgs) == "still here\n"
    finally:
        sock.close()
    assert kernel_id(served) == kid
    res = run_cli("exec", "print(survivor)", cwd=served.root)
    assert res.stdout == "still here\n", res.stderr
    status, sessions_after = http(served, "GET", "/api/sessions")
    assert [s["path"] for s in sessions_after] == ["analysis.ipynb"]


def test_interrupt_from_the_browser_reaches_the_kernel(served: Served) -> None:
    run_cli("exec", "agent_var = 12345", cwd=served.root)
    kid = kernel_id(served)
    sock = KernelSocket(served, kid)
    try:
        msg_id = sock.send(
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
        time.sleep(1.0)
        started = time.monotonic()
        status, _ = http(served, "POST", f"/api/kernels/{kid}/interrupt")
        assert status == 204
        msgs = sock.until_idle(msg_id, timeout=20)
        assert time.monotonic() - started < 10
        errors = [m["content"]["ename"] for m in msgs if m["msg_type"] == "error"]
        assert errors == ["KeyboardInterrupt"]
    finally:
        sock.close()
    res = run_cli("exec", "print(agent_var)", cwd=served.root)
    assert res.stdout == "12345\n"


@pytest.mark.posix
def test_a_publish_url_can_read_the_published_view_and_nothing_else(served: Served) -> None:
    published = served.rpc("publish")
    url = urlsplit(published["url"])
    view = parse_qs(url.query)["token"][0]
    assert view != served.token
    path = published["path"]
    # the published copy is in the owner's state like the rest of it
    for part in (served.root / path).relative_to(served.root / ".ipykeep").parents:
        if part != Path("."):
            mode = (served.root / ".ipykeep" / part).stat().st_mode & 0o777
            assert mode == 0o700, (part, oct(mode))
    assert (served.root / path).stat().st_mode & 0o777 == 0o600
    with urllib.request.urlopen(published["url"], timeout=30) as resp:  # the page
        assert resp.status == 200
    status, model = http(served, "GET", "/api/contents/" + path, token=view)
    assert status == 200 and model["content"]["cells"]
    req = urllib.request.Request(f"{served.base}/files/{path}")
    req.add_header("Authorization", f"token {view}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert json.loads(resp.read())["cells"]
    before = (served.root / path).read_bytes()
    notebook = served.notebook.read_bytes()
    kid = kernel_id(served)
    refused = [
        ("PUT", "/api/contents/" + path, {"type": "notebook", "content": model["content"]}),
        ("PUT", "/api/contents/analysis.ipynb", {"type": "file", "format": "text", "content": ""}),
        ("POST", "/api/contents/.ipykeep/publish", {"type": "file"}),
        ("DELETE", "/api/contents/" + path, None),
        ("GET", "/api/contents/analysis.ipynb", None),
        ("GET", "/api/contents/", None),
        ("GET", "/api/contents/.ipykeep/publish/../run/daemon.json", None),
        ("GET", "/files/analysis.ipynb", None),
        ("GET", "/api/kernels", None),
        ("POST", "/api/kernels", {"name": "python3"}),
        ("POST", f"/api/kernels/{kid}/interrupt", None),
        ("GET", "/api/sessions", None),
        ("POST", "/api/sessions", {"path": path, "type": "notebook", "kernel": {"id": kid}}),
        ("POST", "/ipykeep/sync", None),
        ("GET", "/ipykeep/cells?path=analysis.ipynb", None),
        ("GET", f"/ipykeep/cells?path={path}", None),
    ]
    for method, api, body in refused:
        status, _ = http(served, method, api, token=view, body=body)
        assert status == 403, (method, api, status)
    with pytest.raises(websocket.WebSocketBadStatusException) as info:
        websocket.create_connection(
            f"ws://127.0.0.1:{served.port}/api/kernels/{kid}/channels?token={view}", timeout=10
        )
    assert info.value.status_code == 403
    assert (served.root / path).read_bytes() == before
    assert served.notebook.read_bytes() == notebook
    # the server's token keeps every right
    assert http(served, "GET", "/api/contents/analysis.ipynb")[0] == 200
    assert http(served, "GET", "/api/sessions")[0] == 200
    assert http(served, "GET", "/ipykeep/cells?path=analysis.ipynb")[0] == 200


def test_stop_returns_once_the_jupyter_server_is_down(served: Served) -> None:
    """Runs last in this module: `ipykeep stop --all` takes the hosting server down with it."""
    import socket

    settings = json.loads((served.root / ".ipykeep/run/serve/settings.json").read_text())
    assert oct((served.root / ".ipykeep/run/serve/settings.json").stat().st_mode & 0o777) == "0o600"
    assert served.token not in (served.root / ".ipykeep/run/serve/server.log").read_text()
    res = run_cli("stop", "--all", cwd=served.root)
    assert res.returncode == 0, res.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", settings["port"]), timeout=2).close()
