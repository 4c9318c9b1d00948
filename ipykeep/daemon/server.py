"""The project daemon: owns the engine, serves it over RPC, publishes its descriptor.

Run as ``python -m ipykeep.daemon --root PROJECT`` (which composes the engine and its
services, and hands them to ``main`` here) by ``client.ensure_daemon``, fully
detached (new session, stdin from /dev/null, stdout/stderr to ``.ipykeep/run/daemon.log``).
The descriptor ``.ipykeep/run/daemon.json`` (0600 in a 0700 directory) carries pid, address,
token and version. The daemon exits when asked, on SIGTERM/SIGINT, or when its last kernel
has been closed; its kernels go with it, however it exits (see ``ipykeep.kernel``).
"""

from __future__ import annotations

from ipykeep._startup import trim_imports

trim_imports()  # before nbformat is imported (see _startup)

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ipykeep import __version__
from ipykeep.api import kernels as kernels_api
from ipykeep.api import methods as api
from ipykeep.api.kernels import ShutdownResult
from ipykeep.api.spec import Bindings, Served, bind
from ipykeep.daemon.rpc import RpcServer
from ipykeep.engine.engine import Engine
from ipykeep.kernel.providers.local import collect_stale_runtime_dirs
from ipykeep.platform.processes import add_stop_handlers, ignore_user_signal, on_user_signal
from ipykeep.project import daemon_lock
from ipykeep.project.atomic import atomic_write_text
from ipykeep.project.config import Config, load_config
from ipykeep.project.layout import ProjectPaths, tidy_state

log = logging.getLogger("ipykeep.daemon")


def method_table(served: Iterable[Served]) -> dict[str, Served]:
    """Every declared method bound to what serves it: the one place the daemon's API is wired.

    ``served`` is what the engine, its services (``Composition.bindings``) and the daemon
    itself serve. Every declared method must be served once, and nothing undeclared is.
    """
    table: dict[str, Served] = {}
    for binding in served:
        name = binding.method.name
        if name in table:
            raise RuntimeError(f"{name} is served twice")
        if api.BY_NAME.get(name) is not binding.method:
            raise RuntimeError(f"served but not declared in ipykeep.api: {name}")
        table[name] = binding
    if table.keys() != api.BY_NAME.keys():
        missing = sorted(api.BY_NAME.keys() - table.keys())
        raise RuntimeError(f"declared in ipykeep.api but no service serves them: {missing}")
    return table


def write_descriptor(paths: ProjectPaths, data: dict[str, Any]) -> None:
    paths.ensure_run()
    atomic_write_text(paths.descriptor, json.dumps(data), mode=0o600)


#: Seconds between two checks that the project directory is still where the daemon started.
ROOT_WATCH_S = 1.0


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _working_directory() -> str:
    try:
        return os.getcwd()
    except OSError:
        return "gone"


#: The exit status of a daemon that found another one serving its project.
EXIT_ANOTHER_DAEMON = 3

#: builds the engine with its collaborators; returns it and what they serve
Compose = Callable[[ProjectPaths, Config], "tuple[Engine, Bindings]"]


class Daemon:
    def __init__(self, root: Path, compose: Compose) -> None:
        self.paths = ProjectPaths(root)
        self.config = load_config(root)
        self.engine, self.served = compose(self.paths, self.config)
        self.token = secrets.token_urlsafe(32)
        self.stopping = asyncio.Event()
        self.engine.on_empty = self._on_empty

    def _on_empty(self) -> None:
        log.info("last kernel closed; exiting")
        self.stopping.set()

    async def stop(self) -> ShutdownResult:
        """RPC: close every kernel and exit (the reply is sent before the exit)."""
        asyncio.get_running_loop().call_later(0.05, self.stopping.set)
        return ShutdownResult(stopping=True, pid=os.getpid())

    def methods(self) -> dict[str, Served]:
        return method_table((*self.served, bind(kernels_api.SHUTDOWN, self.stop)))

    async def run(self) -> None:
        methods = self.methods()
        server = RpcServer(methods, self.token)
        host, port = await server.start()
        loop = asyncio.get_running_loop()
        add_stop_handlers(loop, self.stopping.set)
        descriptor = {
            "pid": os.getpid(),
            "host": host,
            "port": port,
            "token": self.token,
            "version": __version__,
            "project": str(self.paths.root),
            "started_at": time.time(),
        }
        # A client that found the descriptor damaged (or removed) asks for it again.
        on_user_signal(loop, self._republish, descriptor)
        write_descriptor(self.paths, descriptor)
        log.info("daemon %s serving %s on %s:%d", os.getpid(), self.paths.root, host, port)
        watch = asyncio.create_task(self._watch_root(), name="ipykeep-root-watch")
        try:
            await self.stopping.wait()
        finally:
            log.info("daemon stopping")
            watch.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.engine.shutdown(), 20)
            await server.close()
            # This process holds the daemon lock, so whatever descriptor is there is its own
            # (or damaged): no other daemon can have published one. Relative to the working
            # directory (the project's, which follows it when it moves).
            with contextlib.suppress(OSError):
                self.paths.descriptor.relative_to(self.paths.root).unlink()

    async def _watch_root(self) -> None:
        """Stop when the project directory moves or goes away.

        Every path the engine holds is absolute, so a daemon left running in a moved project
        would write notebooks and checkpoints where the project no longer is. Its clients find
        it no longer serves their directory (``client.connection.serves``) and start a new
        one, which brings the kernels back from their checkpoints.
        """
        identity = _identity(self.paths.root)
        while not self.stopping.is_set():
            await asyncio.sleep(ROOT_WATCH_S)
            if _identity(self.paths.root) != identity:
                log.warning(
                    "project %s moved or was removed (now %s): stopping; `ipykeep start` in its "
                    "new place brings the kernels back from their checkpoints",
                    self.paths.root,
                    _working_directory(),
                )
                self.stopping.set()

    def _republish(self, descriptor: dict[str, Any]) -> None:
        log.warning("descriptor republished on request (it was damaged or removed)")
        try:
            write_descriptor(self.paths, descriptor)
        except OSError as exc:
            log.error("could not republish the descriptor: %s", exc)


def main(argv: list[str] | None, compose: Compose) -> None:
    parser = argparse.ArgumentParser(prog="ipykeep-daemon")
    parser.add_argument("--root", required=True)
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.chdir(root)
    paths = ProjectPaths(root)
    paths.ensure_run()
    # Ignored until the event loop handles it: a client may send it as soon as the lock is held.
    ignore_user_signal()
    lock = daemon_lock.acquire(paths.daemon_lock)
    if lock is None:
        # One project, one daemon: a second one (two clients starting at once, a stray
        # launch) leaves the running one alone.
        log.warning(
            "another daemon (pid %s) serves %s; exiting",
            daemon_lock.holder(paths.daemon_lock),
            root,
        )
        sys.exit(EXIT_ANOTHER_DAEMON)
    tidy_state(paths.state)
    removed = collect_stale_runtime_dirs()
    if removed:
        log.info("removed %d kernel runtime directories of daemons that died", len(removed))
    asyncio.run(Daemon(root, compose).run())
