"""The MCP server's link to the project daemon.

Only a call that creates a kernel starts the daemon: the daemon exits when its last kernel is
closed, and a read-only call (``list_kernels``…) must not leave a daemon with no kernel behind.
Without a daemon, the other calls fail the way they would with one that has no such kernel.

Artifacts (full outputs, images) are files under ``.ipykeep/``: they are read here, straight
from disk, so a URI the agent was given stays readable after the last kernel closed and the
daemon exited.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio

from ipykeep.api import methods as api
from ipykeep.api.errors import DaemonUnreachableError, UnknownKernelError
from ipykeep.api.spec import Method, Params
from ipykeep.client.connection import (
    DaemonClient,
    Descriptor,
    ensure_daemon,
    find_daemon,
    pid_alive,
)
from ipykeep.project import stored
from ipykeep.project.layout import ProjectPaths, find_project_root
from ipykeep.project.stored import unknown_kernel_error

log = logging.getLogger("ipykeep.mcp")


class Backend:
    def __init__(self, project: Path) -> None:
        self.root = find_project_root(project)
        self.paths = ProjectPaths(self.root)
        self._client: DaemonClient | None = None
        self._start_lock = anyio.Lock()

    @property
    def descriptor(self) -> Descriptor | None:
        """The daemon the last call reached (None before any, or once it was found gone)."""
        return self._client.descriptor if self._client is not None else None

    def _live_client(self) -> DaemonClient | None:
        # A hot connection skips the pid check (a syscall and a /proc read per call): a daemon
        # that exited closes it, and the call's DaemonUnreachableError leads back here.
        if self._client is not None and (
            self._client.hot or pid_alive(self._client.descriptor.pid)
        ):
            return self._client
        desc = find_daemon(self.root)
        if self._client is not None:
            self._client.close()
        self._client = DaemonClient(desc) if desc is not None else None
        return self._client

    async def _started_client(self) -> DaemonClient:
        async with self._start_lock:
            client = self._live_client()
            if client is None:
                log.info("starting the ipykeep daemon for %s", self.root)
                client = await anyio.to_thread.run_sync(ensure_daemon, self.root)
                self._client = client
            return client

    async def call(self, method: Method[Any, Any], params: Params, *, start: bool = False) -> Any:
        """Call a declared daemon method (starting the daemon first when ``start``); its JSON
        result, which ``results.py`` turns into MCP content."""
        if method is api.READ_ARTIFACT:
            return await anyio.to_thread.run_sync(
                read_artifact, self.paths, str(getattr(params, "uri", ""))
            )
        return await self._call(
            method.name, params.model_dump(mode="json", exclude_unset=True), start=start
        )

    async def _call(self, method: str, params: dict[str, Any], *, start: bool) -> Any:
        if start:
            client = await self._started_client()
            try:
                return await client.acall(method, **params)
            except DaemonUnreachableError:
                # The daemon exited between the check and the call (its last kernel was
                # closed by another client): start a fresh one once.
                if pid_alive(client.descriptor.pid):
                    raise
                self._client = None
                fresh = await self._started_client()
                return await fresh.acall(method, **params)
        live = self._live_client()
        if live is None:
            return self._without_daemon(method, params)
        try:
            return await live.acall(method, **params)
        except DaemonUnreachableError:
            # A daemon whose last kernel was just closed stops listening before it exits.
            if not await self._exits(live.descriptor.pid):
                raise
            live.close()
            self._client = None
            successor = self._live_client()  # another client may have started a new daemon
            if successor is None:
                return self._without_daemon(method, params)
            return await successor.acall(method, **params)

    @staticmethod
    async def _exits(pid: int, within: float = 3.0) -> bool:
        with anyio.move_on_after(within):
            while pid_alive(pid):
                await anyio.sleep(0.05)
            return True
        return False

    def _without_daemon(self, method: str, params: dict[str, Any]) -> Any:
        if method == api.LIST_KERNELS.name:
            return []
        kid = params.get("kernel_id")
        if kid:
            raise unknown_kernel_error(self.paths, str(kid), [])
        raise UnknownKernelError(
            f"no ipykeep daemon is running for {self.root}",
            hint="start a kernel with create_kernel",
        )


def read_artifact(paths: ProjectPaths, uri: str) -> dict[str, Any]:
    """The artifact ``uri`` names, read from disk as the engine's ``read_artifact`` does (so it
    stays readable after the daemon has gone)."""
    return stored.read_artifact(paths.state, uri)
