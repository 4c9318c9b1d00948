"""Security limits: artifacts, project boundaries, the RPC port before authentication, terminals."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipykeep.api.errors import UsageError
from ipykeep.client.connection import DaemonClient
from ipykeep.client.wire import encode_request
from ipykeep.daemon import rpc
from tests.conftest import run_cli, stop_daemon
from tests.reliability.helpers import STATIC, error_of, start_project, write_notebook


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, DaemonClient]]:
    root = tmp_path_factory.mktemp("sec") / "p"
    client = start_project(root, ["x = 1"])
    yield root, client
    stop_daemon(root)


def test_a_symlink_in_an_artifacts_directory_serves_nothing(proj):
    root, client = proj
    rec = client.call("execute", code="print('\\n'.join(map(str, range(20000))))")
    uri = rec["output"]["uri"]
    assert client.call("read_artifact", uri=uri)["text"].startswith("0\n1\n")
    kid = client.call("list_kernels")[0]["kernel_id"]
    link = root / ".ipykeep" / "kernels" / kid / "artifacts" / "evil.txt"
    link.symlink_to("/etc/passwd")
    exc = error_of(client, "read_artifact", uri=f"ipykeep://artifacts/{kid}/evil.txt")
    assert exc.code == "bad_argument" and "root:" not in exc.message


def test_a_hard_linked_file_or_a_fifo_in_an_artifacts_directory_serves_nothing(
    proj, tmp_path: Path
):
    root, client = proj
    rec = client.call("execute", code="print('\\n'.join(map(str, range(20000))))")
    assert rec["output"]["uri"]  # the artifacts directory exists
    kid = client.call("list_kernels")[0]["kernel_id"]
    artifacts = root / ".ipykeep" / "kernels" / kid / "artifacts"
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's secret")
    os.link(secret, artifacts / "linked.txt")
    exc = error_of(client, "read_artifact", uri=f"ipykeep://artifacts/{kid}/linked.txt")
    assert exc.code == "bad_argument" and "secret" not in exc.message
    os.mkfifo(artifacts / "pipe.txt")
    exc = error_of(client, "read_artifact", uri=f"ipykeep://artifacts/{kid}/pipe.txt")
    assert exc.code == "bad_argument"  # at once: the daemon did not block on the FIFO
    assert client.call("ping")["pid"] == client.descriptor.pid


@pytest.mark.posix
def test_every_entry_under_ipykeep_is_for_the_owner_only(proj):
    import stat

    root, client = proj
    client.call("execute", code="print('x' * 300_000)")  # an artifact
    state = root / ".ipykeep"
    seen = {}
    for path in state.rglob("*"):
        # (what the tests here planted is not ipykeep's: symlinks, the FIFO, the hard link)
        if path.is_symlink() or path.name in ("pipe.txt", "linked.txt"):
            continue
        seen[path.relative_to(state).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    for name in ("run/start.lock", "run/daemon.lock", "kernels", "kernels/counters.json"):
        assert name in seen, sorted(seen)
    assert any(n.endswith("record.jsonl") for n in seen)
    loose = {n: oct(m) for n, m in seen.items() if m & 0o077}
    assert not loose, loose


def test_a_symlinked_kernel_or_artifacts_directory_serves_nothing(proj):
    from ipykeep.mcp_server.backend import read_artifact
    from ipykeep.project.layout import ProjectPaths

    root, client = proj
    kernels = root / ".ipykeep" / "kernels"
    (kernels / "k900").symlink_to("/etc")  # a whole kernel directory
    (kernels / "k901").mkdir()
    (kernels / "k901" / "artifacts").symlink_to("/etc")  # its artifacts directory
    paths = ProjectPaths(root)
    for uri in ("ipykeep://artifacts/k900/passwd", "ipykeep://artifacts/k901/passwd"):
        exc = error_of(client, "read_artifact", uri=uri)  # the daemon
        assert exc.code == "bad_argument" and "root:" not in exc.message
        with pytest.raises(UsageError) as caught:  # the MCP server reads artifacts from disk itself
            read_artifact(paths, uri)
        assert "not a file ipykeep stored" in caught.value.message


def test_a_notebook_outside_the_project_is_refused_like_a_cwd(proj, tmp_path: Path):
    root, client = proj
    outside = tmp_path / "elsewhere.ipynb"
    write_notebook(outside, ["print('outside')"])
    exc = error_of(client, "create_kernel", notebook=str(outside))
    assert exc.code == "bad_argument" and "outside the project" in exc.message
    exc = error_of(client, "create_kernel", cwd=str(tmp_path))
    assert exc.code == "bad_argument" and "outside the project" in exc.message


def _closed(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1 << 16) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_the_daemon_port_closes_oversized_unauthenticated_lines(proj):
    root, client = proj
    ep = client.descriptor.endpoint
    with socket.create_connection((ep.host, ep.port)) as sock:
        try:
            sock.sendall(b"x" * (rpc.MAX_UNAUTHENTICATED_LINE + 10))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed(sock, 5)
    # an authenticated client may still send large requests
    big = "y = '" + "z" * 200_000 + "'"
    assert client.call("execute", code=big)["state"] == "ok"


async def _serve(**limits: float) -> tuple[rpc.RpcServer, int]:
    for name, value in limits.items():
        setattr(rpc, name, value)

    from ipykeep.api import methods as api
    from ipykeep.api.spec import bind

    async def ping() -> dict:
        return {"pid": 1, "version": "pong", "project": "p", "started_at": 0.0}

    server = rpc.RpcServer({"ping": bind(api.PING, ping)}, "secret")
    _, port = await server.start()
    return server, port


def test_unauthenticated_connections_get_a_hard_deadline_and_the_oldest_make_room(monkeypatch):
    monkeypatch.setattr(rpc, "UNAUTHENTICATED_DEADLINE", 0.8)
    monkeypatch.setattr(rpc, "MAX_UNAUTHENTICATED", 3)

    async def scenario() -> None:
        server, port = await _serve()
        try:
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
            await asyncio.sleep(0.1)
            # a fourth unauthenticated connection closes the oldest one
            r4, w4 = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(idle[0][0].read(), 2) == b""
            # bytes do not extend the deadline: it runs from accept
            began = time.monotonic()
            for _ in range(6):
                w4.write(b"x")
                await asyncio.sleep(0.1)
            for r, _ in (*idle[1:], (r4, w4)):
                assert await asyncio.wait_for(r.read(), 3) == b""
            assert time.monotonic() - began < 1.5
            # a garbage line ends the connection at once (no second try before the token)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"garbage\n")
            assert b"parse error" in await asyncio.wait_for(r.readline(), 2)
            assert await asyncio.wait_for(r.read(), 2) == b""
            # a real client gets in, and stays past the deadline once authenticated
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(encode_request("ping", {}, "secret", 1))
            assert b'"version": "pong"' in await r.readline()
            await asyncio.sleep(1.0)
            w.write(encode_request("ping", {}, "secret", 2))
            assert b'"version": "pong"' in await r.readline()
            w.close()
        finally:
            await server.close()

    asyncio.run(scenario())


def test_256_slow_garbage_connections_do_not_lock_the_owner_out(proj):
    root, client = proj
    ep = client.descriptor.endpoint
    stop = time.monotonic() + 25

    async def attacker() -> None:
        # Each connection sends a garbage byte every 0.5 s (a line every few seconds) and
        # reconnects as soon as the daemon closes it.
        while time.monotonic() < stop:
            try:
                _, w = await asyncio.open_connection(ep.host, ep.port)
                while time.monotonic() < stop and not w.is_closing():
                    w.write(b"x" if int(time.monotonic() * 2) % 6 else b"\n")
                    await w.drain()
                    await asyncio.sleep(0.5)
            except (ConnectionError, OSError):
                await asyncio.sleep(0.05)

    async def attack() -> None:
        await asyncio.gather(*(attacker() for _ in range(256)))

    import threading

    thread = threading.Thread(target=asyncio.run, args=(attack(),), daemon=True)
    thread.start()
    try:
        time.sleep(3)  # the attack is in place
        for i in range(3):
            res = run_cli("exec", f"print({i} * 7)", cwd=root, env=STATIC)
            assert res.returncode == 0 and str(i * 7) in res.stdout, res.stderr
        # an authenticated call longer than the pre-auth deadline is neither evicted nor cut
        res = run_cli("exec", "import time; time.sleep(11); print('slept')", cwd=root, env=STATIC)
        assert res.returncode == 0 and "slept" in res.stdout, res.stderr
    finally:
        thread.join(40)


def test_the_served_jupyter_server_has_no_terminals(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    pytest.importorskip("jupyter_server")
    root = tmp_path / "p"
    client = start_project(root, ["x = 1"])
    try:
        rec = client.call("serve", kernel_id=client.call("list_kernels")[0]["kernel_id"])
        url = rec["served_url"]
        base, _, query = url.partition("?")
        base = base.split("/lab")[0].split("/notebooks")[0].rstrip("/")
        token = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("token", "")
        req = urllib.request.Request(
            f"{base}/api/terminals", headers={"Authorization": f"token {token}"}
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
        assert info.value.code == 404
        ok = urllib.request.Request(
            f"{base}/api/kernels", headers={"Authorization": f"token {token}"}
        )
        assert urllib.request.urlopen(ok, timeout=10).status == 200
    finally:
        stop_daemon(root)
        os.environ.pop("_IPYKEEP_UNUSED", None)


def _served(client: DaemonClient) -> tuple[str, str]:
    """The served Jupyter server's base URL and token."""
    rec = client.call("serve", kernel_id=client.call("list_kernels")[0]["kernel_id"])
    base, _, query = rec["served_url"].partition("?")
    base = base.split("/lab")[0].split("/notebooks")[0].rstrip("/")
    token = dict(p.split("=", 1) for p in query.split("&") if "=" in p)["token"]
    return base, token


def _http(method: str, url: str, token: str, body: dict | None = None) -> tuple[int, bytes]:
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Authorization": f"token {token}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_served_contents_stop_at_the_project_and_hide_ipykeep(tmp_path: Path) -> None:
    import json

    pytest.importorskip("jupyter_server")
    root = tmp_path / "p"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    client = start_project(root, ["x = 1"])
    try:
        (root / "etc_link").symlink_to("/etc")
        (root / "out_link").symlink_to(outside)
        (root / "data").mkdir()
        (root / "data" / "inside.txt").write_text("fine")
        (root / "in_link").symlink_to(root / "data")
        base, token = _served(client)
        api = f"{base}/api/contents"
        for path in ("etc_link/passwd", "out_link/secret.txt", "out_link"):
            assert _http("GET", f"{api}/{path}", token)[0] in (403, 404), path
            assert _http("GET", f"{base}/files/{path}", token)[0] in (403, 404), path
        put = {"type": "file", "format": "text", "content": "planted"}
        assert _http("PUT", f"{api}/out_link/planted.txt", token, put)[0] in (403, 404)
        assert not (outside / "planted.txt").exists()
        status, _ = _http("POST", f"{api}/out_link/secret.txt/checkpoints", token, {})
        assert status in (403, 404) and not (outside / ".ipynb_checkpoints").exists()
        # ipykeep's state: not listed, not readable by path
        status, body = _http("GET", f"{api}/", token)
        assert status == 200
        names = {entry["name"] for entry in json.loads(body)["content"]}
        assert ".ipykeep" not in names and "nb.ipynb" in names and "in_link" in names
        assert "etc_link" not in names and "out_link" not in names
        for path in (".ipykeep", ".ipykeep/run/daemon.json", "data/../.ipykeep/run/daemon.json"):
            assert _http("GET", f"{api}/{path}", token)[0] in (403, 404), path
            assert _http("GET", f"{base}/files/{path}", token)[0] in (403, 404), path
        assert _http("PUT", f"{api}/.ipykeep/run/x.txt", token, put)[0] in (403, 404)
        assert not (root / ".ipykeep" / "run" / "x.txt").exists()
        # what is inside the project, symlinked or not, is served as before
        assert _http("GET", f"{api}/in_link/inside.txt", token)[0] == 200
        assert _http("GET", f"{api}/nb.ipynb", token)[0] == 200
        assert _http("PUT", f"{api}/data/new.txt", token, put)[0] in (200, 201)
        assert (root / "data" / "new.txt").read_text() == "planted"
    finally:
        stop_daemon(root)


def test_watch_file_refuses_paths_outside_the_project_without_probing_them(proj, tmp_path: Path):
    root, client = proj
    kid = client.call("list_kernels")[0]["kernel_id"]
    (root / "passwd_link").symlink_to("/etc/passwd")
    # an existing file and a missing one answer alike: nothing is learnt about either
    for path in ("/etc/passwd", "../../etc/shadow", "/nonexistent/x", "passwd_link", ".ipykeep"):
        exc = error_of(client, "watch_file", kernel_id=kid, path=path)
        assert exc.code == "bad_argument", path
        assert "not a file inside the project" in exc.message and exc.hint, exc
        assert "exists" not in exc.message
    inside = client.call("watch_file", kernel_id=kid, path="data.txt")
    assert inside["path"] == str((root / "data.txt").resolve()) and not inside["exists"]
    assert inside["watched"] == [inside["path"]]
