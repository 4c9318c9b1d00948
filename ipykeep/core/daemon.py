"""The project daemon: owns the engine, serves it over RPC, publishes its descriptor.

Run as ``python -m ipykeep.core.daemon --root PROJECT`` by ``client.ensure_daemon``, fully
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
from pathlib import Path
from typing import Any, Awaitable, Callable

from .. import __version__
from ..api import methods as api
from ..api.kernels import ShutdownResult
from ..api.spec import Binding, bind
from .config import load_config
from .engine import Engine
from .project import ProjectPaths
from .rpc import RpcServer

log = logging.getLogger("ipykeep.daemon")

def method_table(engine: Engine, stop: Callable[[], Awaitable[ShutdownResult]]) -> dict[str, Binding[Any, Any]]:
    """Every declared method bound to what serves it: the one place the daemon's API is wired.

    The engine serves the core methods; the staleness, inspection and serving layers still
    hand theirs over as ``rpc_methods()`` (name -> coroutine), bound here by name to their
    declarations. Every declared method must be served, and nothing undeclared is.
    """
    layers: dict[str, Callable[..., Any]] = {}
    for plugin in engine.plugins:
        layers.update(plugin.rpc_methods())
    undeclared = set(layers) - set(api.BY_NAME)
    if undeclared:
        raise RuntimeError(f"served but not declared in ipykeep.api: {sorted(undeclared)}")

    def layer(method: Any) -> Callable[..., Any]:
        if method.name not in layers:
            raise RuntimeError(f"{method.name} is declared in ipykeep.api but no layer serves it")
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
    ]
    served = {b.method.name: b for b in table}
    if served.keys() != api.BY_NAME.keys():
        raise RuntimeError(f"method table and ipykeep.api differ: {sorted(served.keys() ^ api.BY_NAME.keys())}")
    return served


def write_descriptor(paths: ProjectPaths, data: dict[str, Any]) -> None:
    paths.ensure_run()
    tmp = paths.descriptor.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.chmod(tmp, 0o600)
    os.replace(tmp, paths.descriptor)


class Daemon:
    def __init__(self, root: Path) -> None:
        self.paths = ProjectPaths(root)
        self.config = load_config(root)
        self.engine = Engine(self.paths, self.config)
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

    async def run(self) -> None:
        from .plugins import install_plugins

        install_plugins(self.engine)
        server = RpcServer(method_table(self.engine, self.stop), self.token)
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


def main(argv: list[str] | None = None) -> None:
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
    asyncio.run(Daemon(root).run())


if __name__ == "__main__":
    main()
