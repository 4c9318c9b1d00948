"""The project daemon: owns the engine, serves it over RPC, publishes its descriptor.

Run as ``python -m ipykeep.daemon --root PROJECT`` (which composes the engine and its
services, and hands them to ``main`` here) by ``client.ensure_daemon``, fully
detached (new session, stdin from /dev/null, stdout/stderr to ``.ipykeep/run/daemon.log``).
The descriptor ``.ipykeep/run/daemon.json`` (0600 in a 0700 directory) carries pid, address,
token and version. The daemon exits when asked, on SIGTERM/SIGINT, or when its last kernel
has been closed; its kernels go with it, however it exits (see ``core.kernel``).
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
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ipykeep import __version__
from ipykeep.api import methods as api
from ipykeep.api.kernels import ShutdownResult
from ipykeep.api.spec import Binding, bind
from ipykeep.daemon.rpc import RpcServer
from ipykeep.engine.engine import Engine
from ipykeep.project.atomic import atomic_write_text
from ipykeep.project.config import Config, load_config
from ipykeep.project.layout import ProjectPaths

log = logging.getLogger("ipykeep.daemon")


def method_table(
    engine: Engine,
    services: dict[str, Callable[..., Any]],
    stop: Callable[[], Awaitable[ShutdownResult]],
) -> dict[str, Binding[Any, Any]]:
    """Every declared method bound to what serves it: the one place the daemon's API is wired.

    The engine serves the core methods; ``services`` (name -> coroutine) are the methods of the
    staleness, inspection and serving services, as the composition root lists them
    (``ipykeep.daemon.composition.Composition.rpc_methods``), bound here by name to their
    declarations. Every declared method must be served, and nothing undeclared is.
    """
    layers = dict(services)
    undeclared = set(layers) - set(api.BY_NAME)
    if undeclared:
        raise RuntimeError(f"served but not declared in ipykeep.api: {sorted(undeclared)}")

    def layer(method: Any) -> Callable[..., Any]:
        if method.name not in layers:
            raise RuntimeError(f"{method.name} is declared in ipykeep.api but no service serves it")
        return layers[method.name]

    table: list[Binding[Any, Any]] = [
        bind(api.PING, engine.ping),
        bind(api.STATUS, engine.status),
        bind(api.LIST_KERNELS, engine.list_kernels),
        bind(api.CREATE_KERNEL, engine.create_kernel),
        bind(api.WAIT_WARM, engine.wait_warm),
        bind(api.CLOSE_KERNEL, engine.close_kernel),
        bind(api.RESTART, engine.restart),
        bind(api.SHUTDOWN, stop),
        bind(api.EXECUTE, engine.execute),
        bind(api.READ_EXECUTION, engine.read_execution),
        bind(api.INTERRUPT, engine.interrupt),
        bind(api.RUN_CELLS, engine.run_cells),
        bind(api.LIST_CELLS, engine.list_cells),
        bind(api.MARKDOWN, engine.markdown),
        bind(api.READ_ARTIFACT, engine.read_artifact),
        bind(api.RUN_STALE, layer(api.RUN_STALE)),
        bind(api.PLAN_PROGRESS, layer(api.PLAN_PROGRESS)),
        bind(api.WATCH_FILE, layer(api.WATCH_FILE)),
        bind(api.INSPECT, layer(api.INSPECT)),
        bind(api.NAMESPACE, layer(api.NAMESPACE)),
        bind(api.SERVE, layer(api.SERVE)),
        bind(api.UNSERVE, layer(api.UNSERVE)),
        bind(api.PUBLISH, layer(api.PUBLISH)),
        bind(api.CHECKPOINT, layer(api.CHECKPOINT)),
        bind(api.RESTORE, layer(api.RESTORE)),
        bind(api.CHECKPOINTS, layer(api.CHECKPOINTS)),
    ]
    served = {b.method.name: b for b in table}
    if served.keys() != api.BY_NAME.keys():
        raise RuntimeError(
            f"method table and ipykeep.api differ: {sorted(served.keys() ^ api.BY_NAME.keys())}"
        )
    return served


def write_descriptor(paths: ProjectPaths, data: dict[str, Any]) -> None:
    paths.ensure_run()
    atomic_write_text(paths.descriptor, json.dumps(data), mode=0o600)


#: builds the engine with its collaborators; returns it and the collaborators' RPC methods
Compose = Callable[[ProjectPaths, Config], "tuple[Engine, dict[str, Any]]"]


class Daemon:
    def __init__(self, root: Path, compose: Compose) -> None:
        self.paths = ProjectPaths(root)
        self.config = load_config(root)
        self.engine, self.extra_methods = compose(self.paths, self.config)
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

    def methods(self) -> dict[str, Binding[Any, Any]]:
        return method_table(self.engine, self.extra_methods, self.stop)

    async def run(self) -> None:
        server = RpcServer(self.methods(), self.token)
        host, port = await server.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self.stopping.set)
        write_descriptor(
            self.paths,
            {
                "pid": os.getpid(),
                "host": host,
                "port": port,
                "token": self.token,
                "version": __version__,
                "project": str(self.paths.root),
                "started_at": time.time(),
            },
        )
        log.info("daemon %s serving %s on %s:%d", os.getpid(), self.paths.root, host, port)
        try:
            await self.stopping.wait()
        finally:
            log.info("daemon stopping")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.engine.shutdown(), 20)
            await server.close()
            with contextlib.suppress(FileNotFoundError, OSError):
                current = json.loads(self.paths.descriptor.read_text())
                if current.get("pid") == os.getpid():
                    self.paths.descriptor.unlink()


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
    asyncio.run(Daemon(root, compose).run())
