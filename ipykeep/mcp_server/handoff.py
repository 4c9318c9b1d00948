"""Handing a stdio MCP session to the project's daemon, so an agent's calls skip a process.

A host starts ``ipykeep mcp-serve`` and talks to it over the process's stdin and stdout; every
tool call then crossed two processes before it reached a kernel (the server, then the daemon),
and each crossing is a wake-up and a copy: on two cores, a fifth of a quick ``ipython`` call.
So once a call has reached the daemon and the session is quiet (every request answered,
every answer written), ``mcp-serve`` gives the daemon its stdin, its stdout and the session's
state (``session.py``) over the Unix socket the daemon's descriptor names (``transfer.py``),
and the daemon serves the session from then on (``daemon/mcp_host.py``): the same catalog,
the same SDK, the same results, with the engine's methods called in-process.

``mcp-serve`` stays, as hosts expect of the process they started, and waits on the link:

- the client closes its end: the daemon says so and ``mcp-serve`` exits;
- the daemon stops (its last kernel closed, ``ipykeep stop``): at a quiet moment it hands the
  session back with the input it had read and not handled, and ``mcp-serve`` serves it again
  (and hands it to the next daemon once a call has reached one);
- the daemon dies: ``mcp-serve`` answers the requests it had open (``inflight.py``) with an
  error that says so, and serves the session again.

A session in the 2026-07-28 era (no handshake to replay) stays in ``mcp-serve``, and so does
every session on a platform without descriptor passing (Windows) or with
``IPYKEEP_MCP_HANDOFF=0``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_types import INTERNAL_ERROR, ErrorData, JSONRPCError, JSONRPCResponse

from ipykeep.api.errors import DaemonUnreachableError
from ipykeep.mcp_server import transfer
from ipykeep.mcp_server.direct import CALL, tool_response
from ipykeep.mcp_server.early import switched_on
from ipykeep.mcp_server.inflight import InflightTable
from ipykeep.mcp_server.session import SessionState
from ipykeep.mcp_server.stdio import Replay, wire_text

if TYPE_CHECKING:
    from ipykeep.mcp_server.server import IpykeepMcp
    from ipykeep.mcp_server.session import Handshake

log = logging.getLogger("ipykeep.mcp")

#: Seconds a hand-over may take before the session stays where it is.
GIVE_TIMEOUT_S = 5.0
#: Seconds before trying again a daemon that could not take the session.
RETRY_S = 30.0


def enabled() -> bool:
    return transfer.supported() and switched_on("IPYKEEP_MCP_HANDOFF")


@dataclass
class Outcome:
    """How the daemon's part of a session ended."""

    ended: bool
    replay: Replay = field(default_factory=Replay)
    #: ``(id, method)`` of the requests it took and never answered (it died)
    lost: list[tuple[Any, str]] = field(default_factory=list)


class Giver:
    """``mcp-serve``'s side: when to hand the session over, the hand-over, and what came of it."""

    def __init__(
        self, app: IpykeepMcp, handshake: Handshake, fds: tuple[int, int], table: InflightTable
    ) -> None:
        self.app = app
        self.handshake = handshake
        self.fds = fds
        self.table = table
        #: (daemon pid, monotonic time) before which that daemon is not offered the session
        self._not_before = (0, 0.0)
        self._link: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._wake: Callable[[], None] | None = None

    @classmethod
    def start(cls, app: IpykeepMcp, handshake: Handshake, fds: tuple[int, int]) -> Giver | None:
        return cls(app, handshake, fds, InflightTable.create()) if enabled() else None

    def close(self) -> None:
        self.table.close()

    def bind(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wanted(self) -> bool:
        if not self.handshake.ready:
            return False
        daemon = self.app.linked_daemon
        if daemon is None or not daemon.mcp_socket:
            return False
        pid, until = self._not_before
        return daemon.pid != pid or time.monotonic() >= until  # a new daemon is asked at once

    async def attempt(self, unread: bytes) -> bool:
        daemon = self.app.linked_daemon
        state = SessionState.capture(self.app, self.handshake)
        header = {
            "token": daemon.token,
            "op": transfer.ADOPT,
            "state": state.to_json(),
            "unread": transfer.encode_bytes(unread),
        }
        self.table.reset()
        link: list[asyncio.StreamWriter] = []

        async def hand_over() -> tuple[asyncio.StreamReader, dict[str, Any] | None]:
            reader, writer = await transfer.give(
                daemon.mcp_socket, [*self.fds, self.table.fd], header
            )
            link.append(writer)
            return reader, await transfer.receive(reader)

        reply: dict[str, Any] | None = None
        try:
            reader, reply = await asyncio.wait_for(hand_over(), GIVE_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            log.debug("session not handed to the daemon: %s", exc)
        if reply is not None and reply.get("adopted") is True:
            self._link = (reader, link[0])
            return True
        if link:
            link[0].close()
        retry = reply.get("retry_after") if reply else None
        delay = float(retry) if isinstance(retry, int | float) else RETRY_S
        self._not_before = (daemon.pid, time.monotonic() + delay)
        if self._wake is not None:  # look again then, even if the session stays quiet
            asyncio.get_running_loop().call_later(delay, self._wake)
        if reply is not None and "refused" in reply:
            log.warning("the daemon did not take the session: %s", reply["refused"])
        return False

    async def outcome(self) -> Outcome:
        """Wait for the daemon's part to end (it may last the whole session)."""
        assert self._link is not None
        reader, writer = self._link
        self._link = None
        try:
            message = await transfer.receive(reader)
        finally:
            writer.close()
        if message is not None and message.get("ended") is True:
            return Outcome(ended=True)
        if message is not None and message.get("returned") is True:
            try:
                state = SessionState.from_json(message.get("state"))
            except ValueError:
                state = SessionState.capture(self.app, self.handshake)
            state.apply(self.app)
            self.table.reset()
            return Outcome(False, state.replay(transfer.decode_bytes(message.get("unread"))))
        lost = self.table.held()
        self.table.reset()
        log.warning(
            "the daemon serving this session is gone; serving it here again (%d open requests "
            "answered with an error)",
            len(lost),
        )
        # A daemon that died may have read input it never handled: that input is lost.
        state = SessionState.capture(self.app, self.handshake)
        return Outcome(False, state.replay(b""), lost)


def lost_answers(lost: list[tuple[Any, str]], version: str | None) -> bytes:
    """Answers to requests a dead daemon took and never answered, as the client expects them:
    a tool call gets ipykeep's error envelope, anything else a JSON-RPC error."""
    from ipykeep.mcp_server.results import error_result

    err = DaemonUnreachableError(
        "the ipykeep daemon stopped while it served this call (it exited or was killed)",
        hint="call again: a call that needs a kernel starts a new daemon, and kernels come "
        "back from their checkpoints",
    )
    out = []
    for rid, method in lost:
        message: JSONRPCResponse | JSONRPCError
        if method == CALL and version is not None:
            message = tool_response(rid, error_result(err), version)
        else:
            message = JSONRPCError(
                jsonrpc="2.0", id=rid, error=ErrorData(code=INTERNAL_ERROR, message=err.message)
            )
        out.append(wire_text(message))
    return "".join(out).encode("utf-8")
