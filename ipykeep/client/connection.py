"""Finding, starting and talking to a project's daemon (used by the CLI and the MCP server).

``DaemonClient`` is the one RPC client. Its async face (``acall``/``ainvoke``) goes over a pool of
asyncio connections; its sync face (``call``/``invoke``) over one blocking socket per call
(``wire.call_sync``), not over an event loop: importing asyncio alone would add about a third
of a bare interpreter's start-up to every thin-CLI call. Both faces share the framing, the
method names (``api.names``) and the error registry (``api.errors``). ``call``/``acall`` take a
method name and return the JSON result (the thin CLI renders it without pydantic);
``invoke``/``ainvoke`` take a declared ``api`` method and its params model and return the
typed result.

``ensure_daemon`` holds an exclusive lock on ``.ipykeep/run/start.lock`` while it checks for a
live daemon and starts one, so two clients starting at once end with one daemon. A descriptor
whose process is gone (or does not answer) is treated as stale and replaced.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ipykeep.api import names
from ipykeep.api.errors import DaemonUnreachableError, IpykeepError
from ipykeep.client.wire import Endpoint, call_sync
from ipykeep.project.layout import ProjectPaths, find_project_root

if TYPE_CHECKING:
    import subprocess

    from ipykeep.api.spec import Method, Params
    from ipykeep.client.pool import AsyncRpcPool

    P = TypeVar("P", bound=Params)
    R = TypeVar("R")


class Descriptor(NamedTuple):  # immutable; a NamedTuple keeps dataclasses off the CLI's path
    pid: int
    host: str
    port: int
    token: str
    version: str
    project: str

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port, self.token)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (only possible when this process started the daemon) counts as dead.
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().split(")")[-1].split()[0] == "Z":
                return False
    return True


def read_descriptor(paths: ProjectPaths) -> Descriptor | None:
    try:
        data = json.loads(paths.descriptor.read_text())
        return Descriptor(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            token=str(data["token"]),
            version=str(data.get("version", "")),
            project=str(data.get("project", paths.root)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_daemon(root: Path | None = None) -> Descriptor | None:
    """The live daemon of the project at ``root`` (found by walking up), or None."""
    paths = ProjectPaths(find_project_root(root))
    desc = read_descriptor(paths)
    if desc is None or not pid_alive(desc.pid):
        return None
    return desc


class DaemonClient:
    def __init__(self, descriptor: Descriptor) -> None:
        self.descriptor = descriptor
        self._pool: AsyncRpcPool | None = None

    def call(self, method: str, /, **params: Any) -> Any:
        """A blocking call of ``method`` (an ``api.names`` constant); its JSON result."""
        return call_sync(self.descriptor.endpoint, method, params)

    async def acall(self, method: str, /, **params: Any) -> Any:
        """An RPC call from asyncio code, over pooled connections (one pool per client)."""
        if self._pool is None:
            from ipykeep.client.pool import (
                AsyncRpcPool,  # asyncio: loaded by async clients only, not the CLI
            )

            self._pool = AsyncRpcPool(self.descriptor.endpoint)
        return await self._pool.call(method, params)

    @property
    def hot(self) -> bool:
        """An idle pooled connection is open: the daemon answered on it and has not closed it."""
        return self._pool is not None and self._pool.has_idle

    def invoke(self, method: Method[P, R], params: P) -> R:
        """A blocking call of a declared method: typed params in, typed result out."""
        return method.load_result(self.call(method.name, **_wire_params(params)))

    async def ainvoke(self, method: Method[P, R], params: P) -> R:
        """``invoke`` from asyncio code."""
        return method.load_result(await self.acall(method.name, **_wire_params(params)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


def _wire_params(params: Params) -> dict[str, Any]:
    # Only what the caller set: the daemon applies the same model's defaults.
    return params.model_dump(mode="json", exclude_unset=True)


def connect(root: Path | None = None) -> DaemonClient:
    """A client of the running daemon; a clear error when there is none."""
    desc = find_daemon(root)
    if desc is None:
        raise DaemonUnreachableError(
            f"no ipykeep daemon is running for {find_project_root(root)}",
            hint="start one with `ipykeep start NOTEBOOK`",
        )
    return DaemonClient(desc)


def _answers(desc: Descriptor) -> bool:
    try:
        call_sync(desc.endpoint, names.PING, timeout=5)
        return True
    except IpykeepError:
        return False


def ensure_daemon(root: Path | None = None, *, timeout: float = 60.0) -> DaemonClient:
    """Connect to the project's daemon, starting it (once, under a lock) if none runs."""
    paths = ProjectPaths(find_project_root(root))
    paths.ensure_run()
    with open(paths.start_lock, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            desc = read_descriptor(paths)
            if desc is not None and pid_alive(desc.pid) and _answers(desc):
                return DaemonClient(desc)
            with contextlib.suppress(FileNotFoundError):
                paths.descriptor.unlink()
            proc = _spawn(paths)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                desc = read_descriptor(paths)
                if desc is not None and desc.pid == proc.pid and _answers(desc):
                    return DaemonClient(desc)
                if proc.poll() is not None:
                    break
                time.sleep(0.05)
            tail = _log_tail(paths)
            raise DaemonUnreachableError(
                f"the daemon for {paths.root} did not start" + (f":\n{tail}" if tail else ""),
                hint=f"see {paths.log}",
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _spawn(paths: ProjectPaths) -> subprocess.Popen[bytes]:
    import subprocess  # only when a daemon must start

    log = open(paths.log, "ab")
    os.chmod(paths.log, 0o600)
    env = dict(os.environ)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "ipykeep.daemon", "--root", str(paths.root)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=paths.root,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()


def _log_tail(paths: ProjectPaths, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(paths.log.read_text(errors="replace").splitlines()[-lines:])
    return ""
