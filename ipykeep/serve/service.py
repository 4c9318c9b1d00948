"""The engine collaborator behind ``--serve`` and ``publish``.

``ServeService(engine)`` keeps, per daemon, at most one Jupyter server (``launcher``) and the
set of kernels it hosts. A kernel is hosted while it is *served* (``serve``) or *published*
(``publish``); the server starts with the first hosted kernel and stops with the last one,
when a kernel closes (``kernel_closing``), and on daemon exit (``shutdown``), each time
waiting for the process to be gone.

Executions started by other clients of a kernel (JupyterLab, VS Code, the websocket API) reach
the daemon on the broadcast iopub channel; ``foreign_message`` turns them into executions of
kind ``"browser"``: recorded like scratch code, archived, and reported to the other
collaborators (staleness) through ``Engine.note_foreign_execution``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ipykeep.api import serve as serve_api
from ipykeep.api.errors import (
    KernelStartError,
    MissingExtraError,
    RemoteNotSupportedError,
    UsageError,
)
from ipykeep.api.records import KernelRecord
from ipykeep.api.serve import PublishResult
from ipykeep.api.spec import Bindings, bind
from ipykeep.engine import writeback
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.execution import Execution
from ipykeep.serve.adoption import AdoptedKernel, AdoptionSpec
from ipykeep.serve.document import SharedDocument

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

log = logging.getLogger("ipykeep.serve")

EXTRA_HINT = "pip install 'ipykeep[serve]'"


@dataclass(frozen=True)
class Hosting:
    """What the server does with one kernel."""

    server_id: str
    served: bool = False
    #: API path of the published copy (relative to the project root), when published
    published_path: str | None = None
    captions: tuple[tuple[str, str], ...] = ()


@dataclass
class BrowserRuns:
    """Executions other clients of a served kernel (a browser) run, by their request's msg_id."""

    by_msg_id: dict[str, Execution] = field(default_factory=dict)


def require_serve_extra(command: str, collaboration: bool = False) -> None:
    """Fail fast, before any process starts, when the Jupyter packages are missing (with
    ``collaboration``, jupyter-collaboration too: the serve extra brings it)."""
    needed = ["jupyter_server", "jupyterlab" if command == "lab" else "notebook"]
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"serving kernels to Jupyter needs {', '.join(missing)}, which is not installed",
            hint=f"install the serve extra: {EXTRA_HINT}",
        )
    if collaboration and importlib.util.find_spec("jupyter_server_ydoc") is None:
        # Not a silent fallback to the file: beside an agent, that mode can lose a person's
        # typing to JupyterLab's "File Changed" dialog; turning it on is the user's choice.
        raise MissingExtraError(
            "serving a notebook as a shared document needs jupyter-collaboration, "
            "which is not installed",
            hint=f"install the serve extra ({EXTRA_HINT}), or set serve_collaboration = false "
            "in ipykeep.toml (the browser then edits the file: an agent's write while a person "
            'has unsaved typing brings up JupyterLab\'s "File Changed" dialog)',
        )


def collaboration_available(wanted: bool) -> bool:
    """Shared documents need jupyter-collaboration in ipykeep's environment (the serve extra
    brings it); with ``serve_collaboration = false`` the file is the document."""
    return wanted and importlib.util.find_spec("jupyter_server_ydoc") is not None


class ServeService(SessionObserver):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.server: Any = None  # launcher.JupyterServer while one runs
        self.tunnel: Any = None  # tunnel.QuickTunnel while one runs
        #: what the server hosts, by kernel id (the server is one per daemon)
        self.hosting: dict[str, Hosting] = {}
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- RPC methods (registered by the daemon) -----------------------------------------------
    async def serve(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> KernelRecord:
        """Host the kernel in the project's Jupyter server; the record carries ``served_url``."""
        session = self.engine.live(kernel_id, notebook)
        _require_hostable(session.process)
        require_serve_extra(session.config.server_command, session.config.serve_collaboration)
        await writeback.flush(session)  # the page opens the notebook file: with every output in it
        async with self._lock:
            old = self.hosting.get(session.kernel_id) or Hosting(server_id=str(uuid.uuid4()))
            self.hosting[session.kernel_id] = replace(old, served=True)
            try:
                await self._apply()
            except BaseException:
                self._forget(session.kernel_id, old if old.served or old.published_path else None)
                raise
            api_path = self._notebook_api_path(session)
            session.hosting.served_url = self._url(api_path)
            if self.server.collaboration and api_path is not None:
                await writeback.flush(session)  # into the file, before the document takes over
                session.hosting.document = SharedDocument(self.server, api_path)
        return self.engine.kernel_record(session)

    async def unserve(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> KernelRecord:
        """Detach the kernel from the Jupyter server (also ends its publication)."""
        session = self.engine.session(kernel_id, notebook)
        async with self._lock:
            if self.hosting.pop(session.kernel_id, None) is not None:
                await self._apply()
            session.hosting.served_url = None
            session.hosting.published = False
            session.hosting.document = None
        return self.engine.kernel_record(session)

    async def publish(
        self,
        kernel_id: str | None = None,
        notebook: str | None = None,
        cells: dict[str, str] | None = None,
        tunnel: bool = False,
    ) -> PublishResult:
        """A read-only view of the kernel's notebook (its own token, see ``viewer``), ``cells``
        captioned.

        The same URL while the publication lives.
        """
        from ipykeep.serve import publish as view
        from ipykeep.serve.tunnel import QuickTunnel, require_cloudflared

        session = self.engine.live(kernel_id, notebook)
        _require_hostable(session.process)
        require_serve_extra(session.config.server_command, session.config.serve_collaboration)
        if tunnel:
            require_cloudflared()
        if cells is not None and not isinstance(cells, dict):
            raise UsageError(
                "cells must map cell ids (or indexes) to captions", hint='e.g. {"a1b2": "the fit"}'
            )
        captions = tuple(sorted((str(k), str(v)) for k, v in (cells or {}).items()))
        await writeback.flush(session)  # the view is copied from the notebook file
        async with self._lock:
            target, nb, handles = self._publish_source(session)
            rendered = view.highlight(nb, dict(captions), handles)  # bad cell names fail here
            view.write_view(target, rendered)
            rel = target.relative_to(self.engine.paths.root).as_posix()
            old = self.hosting.get(session.kernel_id)
            base = old or Hosting(server_id=str(uuid.uuid4()))
            self.hosting[session.kernel_id] = replace(base, published_path=rel, captions=captions)
            try:
                await self._apply()
            except BaseException:
                self._forget(session.kernel_id, old)
                raise
            if tunnel and self.tunnel is None:
                t = QuickTunnel(self.server.base_url)
                await t.start()  # raises TunnelError: no silent local fallback
                self.tunnel = t
                await self._apply()
            session.hosting.published = True
            public = self.tunnel.public_url if (tunnel and self.tunnel) else None
            url = self._url(rel, base=public, token=self.server.view_token)
            return PublishResult(url=url, kernel_id=session.kernel_id, path=rel)

    # -- observer events ---------------------------------------------------------------------
    async def kernel_closing(self, session: KernelSession) -> None:
        session.hosting.served_url = None
        session.hosting.published = False
        session.hosting.document = None
        session.features.of(BrowserRuns).by_msg_id.clear()
        async with self._lock:
            if self.hosting.pop(session.kernel_id, None) is not None:
                await self._apply()

    async def kernel_restarted(self, session: KernelSession) -> None:
        # A new process and connection file: the server re-adopts it under the same id.
        session.features.of(BrowserRuns).by_msg_id.clear()
        async with self._lock:
            if session.kernel_id in self.hosting:
                await self._apply()

    def kernel_lost(self, session: KernelSession) -> None:
        # A remote kernel has no local process for the server to watch: let go of it (a
        # restart re-adopts it), so the browser sees it gone instead of idle and silent.
        if session.kernel_id in self.hosting and session.process.pid is None:
            task = asyncio.get_running_loop().create_task(self._resync())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _resync(self) -> None:
        async with self._lock:
            if self.hosting:
                try:
                    await self._apply()
                except Exception:
                    log.exception("could not let the Jupyter server go of a lost kernel")

    def foreign_message(self, session: KernelSession, msg: dict[str, Any]) -> None:
        parent = (msg.get("parent_header") or {}).get("msg_id")
        if not parent:
            return
        runs = session.features.of(BrowserRuns).by_msg_id
        mtype = msg["header"]["msg_type"]
        ex = runs.get(parent)
        if ex is None:
            if mtype != "execute_input":
                return  # not an execution (kernel_info, comms, completions…)
            ex = self.engine.new_execution(session, msg["content"].get("code", ""), "browser")
            ex.msg_id = parent
            ex.start()
            runs[parent] = ex
            session.touch()
        if mtype == "status" and msg["content"].get("execution_state") == "idle":
            runs.pop(parent, None)
            ex.finish(ex.outcome_after_idle())
            session.touch()
            # The engine archives the execution and tells the other collaborators (staleness).
            task = asyncio.get_running_loop().create_task(self._note(session, ex))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        ex.on_iopub(msg)

    async def shutdown(self) -> None:
        """Daemon exit: stop the tunnel and the server, waiting for both processes."""
        async with self._lock:
            self.hosting.clear()
            await self._stop_processes()

    # -- internals ---------------------------------------------------------------------------
    async def _note(self, session: KernelSession, ex: Execution) -> None:
        try:
            await self.engine.note_foreign_execution(session, ex)
        except Exception:
            log.exception("staleness update for browser execution %s failed", ex.handle)

    def _forget(self, kernel_id: str, previous: Hosting | None) -> None:
        if previous is None:
            self.hosting.pop(kernel_id, None)
        else:
            self.hosting[kernel_id] = previous

    def _notebook_api_path(self, session: KernelSession) -> str | None:
        if session.notebook is None:
            return None
        try:
            return Path(session.notebook).relative_to(self.engine.paths.root).as_posix()
        except ValueError:
            raise UsageError(
                f"{session.notebook} is outside the project {self.engine.paths.root}; "
                "Jupyter cannot open it",
                hint="start ipykeep from a directory that contains the notebook",
            ) from None

    def _publish_source(self, session: KernelSession) -> tuple[Path, Any, list[str | None] | None]:
        from ipykeep.serve.publish import notebook_view

        out_dir = self.engine.paths.state / "publish" / session.kernel_id
        if session.notebook is not None:
            return (
                out_dir / Path(session.notebook).name,
                notebook_view(Path(session.notebook)),
                None,
            )
        nb = session.archive.to_notebook()
        handles = [e.get("handle") for e in session.archive.entries()]
        return out_dir / "record.ipynb", nb, handles

    def _spec(self) -> AdoptionSpec:
        kernels = []
        for kid, host in self.hosting.items():
            session = self.engine.kernels.get(kid)
            if session is None or session.closed:
                continue
            where = _attach_point(session.process)
            if where is None:
                continue
            connection_file, pid, interrupt = where
            paths: list[str] = []
            nb = self._notebook_api_path(session)
            if host.served and nb:
                paths.append(nb)
            if host.published_path:
                paths.append(host.published_path)
            kernels.append(
                AdoptedKernel(
                    server_id=host.server_id,
                    kernel_id=kid,
                    connection_file=connection_file,
                    pid=pid,
                    session_paths=tuple(paths),
                    interrupt_command=interrupt,
                )
            )
        import os

        origin = self.tunnel.public_url if self.tunnel is not None else None
        return AdoptionSpec(daemon_pid=os.getpid(), kernels=tuple(kernels), origin=origin)

    async def _apply(self) -> None:
        """Make the server host exactly ``self.hosting`` (start or stop it as needed)."""
        if not self.hosting:
            await self._stop_processes()
            return
        spec = self._spec()
        if self.server is None or not self.server.running:
            from ipykeep.serve.launcher import JupyterServer

            cfg = self.engine.config
            self.server = JupyterServer(
                self.engine.paths,
                command=cfg.server_command,
                port=cfg.serve_port,
                collaboration=collaboration_available(cfg.serve_collaboration),
            )
            await self.server.start(spec)
        await self.server.sync(spec)

    async def _stop_processes(self) -> None:
        if self.tunnel is not None:
            await self.tunnel.stop()
            self.tunnel = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
        for session in self.engine.kernels.values():
            session.hosting.served_url = None
            session.hosting.published = False
            session.hosting.document = None

    def _url(
        self, api_path: str | None, *, base: str | None = None, token: str | None = None
    ) -> str:
        assert self.server is not None
        root = base or self.server.base_url
        lab = self.server.command == "lab"
        if api_path is None:
            page = "/lab" if lab else "/tree"
        else:
            page = ("/lab/tree/" if lab else "/notebooks/") + quote(api_path)
        return f"{root}{page}?token={token or self.server.token}"

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (
            bind(serve_api.SERVE, self.serve),
            bind(serve_api.UNSERVE, self.unserve),
            bind(serve_api.PUBLISH, self.publish),
        )


def _require_hostable(process: Any) -> None:
    """The Jupyter server adopts a kernel by a local connection file: local kernels have one, and
    SSH kernels one for their forwarded ports. A gateway kernel is reached through the gateway's
    own websocket, which this server cannot share."""
    if process.provider.kind == "gateway":
        url = process.location.removeprefix("gateway ")
        remote_id = getattr(process.provider, "kernel_id", None) or "?"
        raise RemoteNotSupportedError(
            f"kernel {process.name} runs on {process.location}: "
            "--serve and publish cannot attach to a gateway kernel",
            hint="use a Jupyter front end of that server instead: "
            f"{url}/lab on a Jupyter Server or JupyterHub, or "
            f"`jupyter lab --gateway-url={url}` (same JUPYTER_GATEWAY_AUTH_TOKEN) "
            "for a Kernel or Enterprise Gateway; "
            f"there, Kernel > Change Kernel… > Connect to Existing Kernel, kernel {remote_id} "
            "(a shutdown from there ends ipykeep's kernel too)",
        )


def _attach_point(process: Any) -> tuple[str, int, tuple[str, ...]] | None:
    """Connection file, local pid (0 when remote) and remote interrupt command of a running
    kernel; None when it has nothing to attach to (not started, a lost SSH kernel, a gateway
    kernel)."""
    if not process.connection_file:
        return None
    if process.pid:
        return str(process.connection_file), int(process.pid), ()
    provider = process.provider  # by kind, not class: the SSH code is imported only when used
    if provider.kind == "ssh" and process.alive:
        try:
            return str(process.connection_file), 0, tuple(provider.interrupt_command())
        except KernelStartError:
            return None
    return None
