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
live daemon and starts one, so two clients starting at once end with one daemon. The daemon
itself holds ``.ipykeep/run/daemon.lock`` (``project.daemon_lock``) while it runs: a descriptor
that is damaged, missing or names a dead process is recovered from the lock's holder (asked to
publish it again), and no second daemon is started while the lock is held.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ipykeep.api import names
from ipykeep.api.errors import DaemonUnreachableError, IpykeepError
from ipykeep.client.wire import Endpoint, call_sync
from ipykeep.platform.files import make_private, open_private
from ipykeep.platform.locks import lock_fd, unlock_fd
from ipykeep.platform.processes import detached_popen_kwargs
from ipykeep.platform.processes import pid_alive as pid_alive  # re-exported for its callers
from ipykeep.project import daemon_lock
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


def serves(desc: Descriptor, root: Path) -> bool:
    """Whether ``desc`` is the descriptor of a daemon started for ``root``: a project copied
    with its ``.ipykeep`` holds the original's, and a moved one that of a daemon still bound to
    where the project was."""
    if desc.project == str(root):
        return True
    try:
        return os.path.samefile(desc.project, root)
    except OSError:
        return False


def own_descriptor(paths: ProjectPaths) -> Descriptor | None:
    """The project's descriptor if it names a daemon started for this project, else None."""
    desc = read_descriptor(paths)
    return desc if desc is not None and serves(desc, paths.root) else None


#: Seconds a client waits for the daemon of a moved project to notice the move and exit.
MOVED_DAEMON_EXIT_S = 5.0


def find_daemon(root: Path | None = None) -> Descriptor | None:
    """The live daemon of the project at ``root`` (found by walking up), or None."""
    paths = ProjectPaths(find_project_root(root))
    desc = read_descriptor(paths)
    owner = daemon_lock.holder(paths.daemon_lock)
    if desc is not None and not serves(desc, paths.root):
        if owner is not None and owner == desc.pid:
            _moved_daemon_gone(paths, desc)
            owner = None
        desc = None
    if owner is None:
        return desc if desc is not None and pid_alive(desc.pid) else None
    if desc is not None and desc.pid == owner:
        return desc
    return _recovered_descriptor(paths, owner)


def _moved_daemon_gone(paths: ProjectPaths, desc: Descriptor) -> None:
    """Wait for the daemon of a project that moved here to exit (it watches its directory and
    stops when it moves); an error naming it if it does not."""
    deadline = time.monotonic() + MOVED_DAEMON_EXIT_S
    while time.monotonic() < deadline:
        if daemon_lock.holder(paths.daemon_lock) is None:
            return None
        time.sleep(0.05)
    raise DaemonUnreachableError(
        f"the daemon (pid {desc.pid}) holding {paths.root}'s lock was started for "
        f"{desc.project}: the project moved here since, and that daemon did not stop",
        hint=f"stop it (`kill {desc.pid}`), then `ipykeep start NOTEBOOK` here: the kernels "
        "come back from their checkpoints",
    )


def _recovered_descriptor(paths: ProjectPaths, owner: int, wait: float = 3.0) -> Descriptor | None:
    """The descriptor of ``owner``, the daemon holding the project's lock, asked to publish it
    again (the file was damaged, removed or overwritten by another's); None if it does not."""
    with contextlib.suppress(OSError):
        daemon_lock.ask_to_republish(owner)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        desc = own_descriptor(paths)
        if desc is not None and desc.pid == owner:
            return desc
        time.sleep(0.02)
    return None


def unanswered_daemon(paths: ProjectPaths) -> DaemonUnreachableError:
    """The error for a daemon that holds the project's lock but cannot be reached."""
    owner = daemon_lock.holder(paths.daemon_lock)
    return DaemonUnreachableError(
        f"the daemon for {paths.root} (pid {owner}) is running but does not answer and has "
        f"not published a usable {paths.descriptor}",
        hint=f"stop it with `ipykeep stop --all` (or `kill {owner}`), then start again",
    )


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
        paths = ProjectPaths(find_project_root(root))
        if daemon_lock.holder(paths.daemon_lock) is not None:
            raise unanswered_daemon(paths)
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
    """Connect to the project's daemon, starting it (once, under a lock) if none runs.

    A daemon holding the project's lock is never replaced: while it starts (or stops) this
    waits for it, and one that never answers is an error naming its pid.
    """
    paths = ProjectPaths(find_project_root(root))
    paths.ensure_run()
    fd = open_private(paths.start_lock, os.O_RDWR)
    with os.fdopen(fd, "r+") as lock:
        lock_fd(lock.fileno())
        try:
            return _reach_or_start(paths, time.monotonic() + timeout)
        finally:
            unlock_fd(lock.fileno())


def _reach_or_start(paths: ProjectPaths, deadline: float) -> DaemonClient:
    proc: subprocess.Popen[bytes] | None = None
    asked = 0.0
    while time.monotonic() < deadline:
        desc = own_descriptor(paths)
        if desc is not None and pid_alive(desc.pid) and _answers(desc):
            return DaemonClient(desc)
        owner = daemon_lock.holder(paths.daemon_lock)
        if owner is None:
            if proc is not None and proc.poll() is not None:
                break  # the one this call started exited without serving
            if proc is None:
                with contextlib.suppress(FileNotFoundError):
                    paths.descriptor.unlink()
                proc = _spawn(paths)
        elif (desc is None or desc.pid != owner) and time.monotonic() - asked > 1.0:
            # A running daemon whose descriptor is damaged or stale: ask it to publish again
            # (ignored while it is still starting; it publishes when it is ready).
            with contextlib.suppress(OSError):
                daemon_lock.ask_to_republish(owner)
            asked = time.monotonic()
        time.sleep(0.05)
    if daemon_lock.holder(paths.daemon_lock) is not None:
        raise unanswered_daemon(paths)
    tail = _log_tail(paths)
    raise DaemonUnreachableError(
        f"the daemon for {paths.root} did not start" + (f":\n{tail}" if tail else ""),
        hint=f"see {paths.log}",
    )


def _spawn(paths: ProjectPaths) -> subprocess.Popen[bytes]:
    import subprocess  # only when a daemon must start

    log = open(paths.log, "ab")
    make_private(paths.log)
    env = dict(os.environ)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "ipykeep.daemon", "--root", str(paths.root)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=paths.root,
            env=env,
            **detached_popen_kwargs(),
            close_fds=True,
        )
    finally:
        log.close()


def _log_tail(paths: ProjectPaths, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(paths.log.read_text(errors="replace").splitlines()[-lines:])
    return ""
