"""MCP sessions served in the daemon, taken over from ``ipykeep mcp-serve``.

``mcp_server/handoff.py`` says why and when a stdio session comes here. This side listens on a
Unix socket in a private runtime directory (named in the daemon's descriptor), takes a session's
pipes and state from a caller holding the daemon's token, and serves it with the same
``IpykeepMcp`` as ``mcp-serve`` does, its backend being the daemon's own method table
(``HostedBackend``: the same validation and result types as over RPC, without the hop). When the
daemon stops, every session goes back to its ``mcp-serve`` at a quiet moment, with the input read
and not handled; when an ``mcp-serve`` goes away, its session ends here too.

The SDK is loaded the first time a session is offered, in a thread, so the daemon of a CLI user
never pays for it: that first offer is declined with a short ``retry_after``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib
import logging
import os
import shutil
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipykeep.api.errors import IpykeepError
from ipykeep.daemon.rpc import internal_error, invoke
from ipykeep.kernel.providers.local import short_runtime_dir
from ipykeep.mcp_server import transfer

if TYPE_CHECKING:
    from ipykeep.api.spec import Method, Params, Served
    from ipykeep.project.config import Config

log = logging.getLogger("ipykeep.mcp")

#: Seconds an offered session has to send its header.
HEADER_TIMEOUT_S = 10.0
#: Seconds the sessions have to go back once the daemon stops (calls in flight end first).
RETURN_TIMEOUT_S = 10.0
#: What the daemon imports to serve a session (the SDK among them).
_SERVING_MODULES = (
    "ipykeep.mcp_server.server",
    "ipykeep.mcp_server.direct",
    "ipykeep.mcp_server.session",
    "ipykeep.mcp_server.stdio",
    "ipykeep.mcp_server.inflight",
)


class HostedBackend:
    """``IpykeepMcp``'s backend in the daemon: each declared method called in-process."""

    descriptor = None  # no daemon to hand the session to: it is here

    def __init__(self, methods: Mapping[str, Served]) -> None:
        self._methods = methods

    async def call(self, method: Method[Any, Any], params: Params, *, start: bool = False) -> Any:
        try:
            return await invoke(
                self._methods[method.name], params.model_dump(mode="json", exclude_unset=True)
            )
        except IpykeepError:
            raise
        except Exception as exc:
            raise internal_error(method.name, exc) from exc


class McpHost:
    """The daemon's side of MCP session hand-overs."""

    def __init__(self, config: Config, methods: Mapping[str, Served], token: str) -> None:
        self.config = config
        self.methods = methods
        self._token = token.encode()
        self._dir: Path | None = None
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._loading: asyncio.Task[None] | None = None
        self._sessions: dict[asyncio.Task[None], _HostedSession] = {}
        self._offers: set[asyncio.Task[None]] = set()
        self.returning = False

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    async def start(self) -> str | None:
        """Listen; the socket's path for the descriptor (None where sessions cannot move)."""
        if not transfer.supported():
            return None
        self._dir = short_runtime_dir()
        path = self._dir / "mcp.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.create_task(self._accept(), name="ipykeep-mcp-host")
        return str(path)

    async def _accept(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._sock)
            # held until done: the loop keeps only weak references to its tasks
            offer = asyncio.create_task(self._offered(conn), name="ipykeep-mcp-offer")
            self._offers.add(offer)
            offer.add_done_callback(self._offers.discard)

    def _loaded(self) -> bool:
        if self._loading is None:

            def load() -> None:
                for name in _SERVING_MODULES:
                    importlib.import_module(name)

            self._loading = asyncio.create_task(asyncio.to_thread(load), name="ipykeep-mcp-load")
        if not self._loading.done():
            return False
        if self._loading.exception() is not None:
            raise RuntimeError(f"cannot serve MCP sessions: {self._loading.exception()}")
        return True

    async def _offered(self, conn: socket.socket) -> None:
        try:
            fds, reader, writer = await asyncio.wait_for(transfer.take(conn), HEADER_TIMEOUT_S)
        except Exception as exc:
            log.warning("an MCP session offer failed: %s", exc)
            conn.close()
            return
        opened: asyncio.StreamWriter | None = writer
        try:
            header = await asyncio.wait_for(transfer.receive(reader), HEADER_TIMEOUT_S)
            token = header.get("token") if header else None
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
                log.warning("refused an MCP session offered without the daemon's token")
                await transfer.send(writer, {"refused": "missing or wrong token"})
                return
            assert header is not None
            if header.get("op") != transfer.ADOPT:
                await transfer.send(writer, {"refused": f"unknown op {header.get('op')!r}"})
                return
            if self.returning:
                await transfer.send(writer, {"retry_after": 5.0})
                return
            if not self._loaded():
                await transfer.send(writer, {"retry_after": 0.5})
                return
            session = _HostedSession(self, fds, reader, writer, header)
            fds, opened = [], None  # the session owns them now
            task = asyncio.current_task()
            assert task is not None
            self._sessions[task] = session
            try:
                await session.run()
            finally:
                del self._sessions[task]
        except Exception as exc:  # a bad offer never takes the daemon down
            log.warning("an MCP session offer failed: %s", exc)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if opened is not None:
                opened.close()

    def begin_return(self) -> None:
        """Stop taking sessions; send each back at its next quiet moment."""
        self.returning = True
        if self._accepting is not None:
            self._accepting.cancel()
        if self._sock is not None:
            self._sock.close()
        for session in self._sessions.values():
            session.wake()

    async def finish_return(self, timeout: float = RETURN_TIMEOUT_S) -> None:
        """Wait for the sessions to go back (cancelling any still busy after ``timeout``)."""
        tasks = list(self._sessions)
        if tasks:
            _, busy = await asyncio.wait(tasks, timeout=timeout)
            for task in busy:
                task.cancel()
            if busy:
                await asyncio.wait(busy, timeout=2)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


class _HostedSession:
    """One session served here, until its client closes, its ``mcp-serve`` goes or the daemon
    stops."""

    def __init__(
        self,
        host: McpHost,
        fds: list[int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        header: dict[str, Any],
    ) -> None:
        from ipykeep.mcp_server.server import IpykeepMcp
        from ipykeep.mcp_server.session import Handshake, SessionState

        self.host = host
        self.in_fd, self.out_fd, self.table_fd = fds
        self.link = (reader, writer)
        self.state = SessionState.from_json(header.get("state"))
        self.unread = transfer.decode_bytes(header.get("unread"))
        self.app = IpykeepMcp(Path(self.state.project), host.config)
        self.app.use_backend(HostedBackend(host.methods))
        self.state.apply(self.app)
        self.handshake = Handshake()  # read again off the replayed handshake
        self.gone = False  # the mcp-serve that gave the session is gone
        self._wake: Callable[[], None] | None = None

    def wake(self) -> None:
        if self._wake is not None:
            self._wake()

    # -- PassOn --------------------------------------------------------------------------------
    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wanted(self) -> bool:
        return self.host.returning or self.gone

    async def attempt(self, unread: bytes) -> bool:
        if not self.gone:
            from ipykeep.mcp_server.session import SessionState

            state = SessionState.capture(self.app, self.handshake)
            message = {
                "returned": True,
                "state": state.to_json(),
                "unread": transfer.encode_bytes(unread),
            }
            with contextlib.suppress(OSError):
                await transfer.send(self.link[1], message)
        return True

    # -- serving -------------------------------------------------------------------------------
    async def run(self) -> None:
        from ipykeep.mcp_server import direct
        from ipykeep.mcp_server.inflight import InflightTable, Ledger
        from ipykeep.mcp_server.stdio import serve_pipes

        table = InflightTable(self.table_fd)
        calls = direct.DirectCalls(self.app, self.handshake) if direct.enabled() else None
        watch = asyncio.create_task(self._watch_link(), name="ipykeep-mcp-link")
        await transfer.send(self.link[1], {"adopted": True})
        log.info("serving an MCP session handed over by mcp-serve")
        try:
            ending = await serve_pipes(
                self.app.server(),
                self.in_fd,
                self.out_fd,
                self.state.replay(self.unread),
                Ledger(table),
                self.handshake,
                direct=calls,
                pass_on=self,
            )
            if not ending.passed_on and not self.gone:
                with contextlib.suppress(OSError):
                    await transfer.send(self.link[1], {"ended": True})
        finally:
            watch.cancel()
            self.link[1].close()
            table.close()
            for fd in (self.in_fd, self.out_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            log.info("an MCP session left the daemon")

    async def _watch_link(self) -> None:
        """The link says nothing until the session ends: end of it means ``mcp-serve`` died."""
        await transfer.receive(self.link[0])
        self.gone = True
        self.wake()
