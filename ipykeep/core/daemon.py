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
from typing import Any, Callable

from .. import __version__
from .config import Config, load_config
from .engine import Engine
from .project import ProjectPaths
from .rpc import RpcServer

log = logging.getLogger("ipykeep.daemon")

#: Engine coroutines reachable over RPC (the rest of the engine is internal).
RPC_METHODS = (
    "ping",
    "status",
    "list_kernels",
    "create_kernel",
    "wait_warm",
    "close_kernel",
    "restart",
    "run_cells",
    "execute",
    "read_execution",
    "interrupt",
    "list_cells",
    "markdown",
    "read_artifact",
)


def write_descriptor(paths: ProjectPaths, data: dict[str, Any]) -> None:
    paths.ensure_run()
    tmp = paths.descriptor.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.chmod(tmp, 0o600)
    os.replace(tmp, paths.descriptor)


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

    async def stop(self) -> dict[str, Any]:
        """RPC: close every kernel and exit (the reply is sent before the exit)."""
        asyncio.get_running_loop().call_later(0.05, self.stopping.set)
        return {"stopping": True, "pid": os.getpid()}

    def methods(self) -> dict[str, Any]:
        table = {name: getattr(self.engine, name) for name in RPC_METHODS}
        table.update(self.extra_methods)
        table["shutdown"] = self.stop
        return table

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


def main(argv: list[str] | None = None, compose: Compose | None = None) -> None:
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
    if compose is None:
        # Run as ``-m ipykeep.core.daemon``: the composition root lives outside core (it
        # imports the serving layer); ``ipykeep.daemon_main`` passes it in instead.
        from ..composition import compose_for_daemon

        compose = compose_for_daemon
    asyncio.run(Daemon(root, compose).run())


if __name__ == "__main__":
    main()
