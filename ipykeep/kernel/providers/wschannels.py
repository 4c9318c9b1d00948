"""Kernel channels over one Jupyter kernel websocket (``/api/kernels/<id>/channels``).

The adapter gives ``KernelProcess`` the same client surface as jupyter_client's (``session``,
``shell_channel.send``, ``get_*_msg`` raising ``queue.Empty``) for a kernel behind a Jupyter
Server, Kernel Gateway or Enterprise Gateway. jupyter_server's own ``GatewayKernelClient`` does
not fit a daemon: it reads in a thread and its ``get_msg`` spins on ``asyncio.sleep(0)`` while
waiting (a core per channel reader), its settings are a process-wide singleton (one gateway per
process), and it sends control requests without a channel name, which servers route to shell.
The wire format is the servers' default (JSON text frames; binary frames carry buffers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session

from ipykeep.kernel.providers.link import RemoteLink, Stop

CHANNELS = ("shell", "iopub", "control", "stdin")
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
#: Seconds one attempt to reopen the websocket may take (the connection's own timeouts are 20 s).
ATTEMPT_TIMEOUT = 30.0

log = logging.getLogger("ipykeep.gateway")


def decode_frame(frame: str | bytes) -> dict[str, Any]:
    """One websocket frame as a message dict (binary frames: offsets table, JSON, buffers)."""
    msg: dict[str, Any]  # JSON from the wire
    if isinstance(frame, str):
        msg = json.loads(frame)
    else:
        nbufs = struct.unpack("!i", frame[:4])[0]
        offsets: list[int | None] = list(
            struct.unpack("!" + "I" * nbufs, frame[4 : 4 * (nbufs + 1)])
        )
        offsets.append(None)
        parts = [frame[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        msg = json.loads(parts[0])
        msg["buffers"] = [memoryview(b) for b in parts[1:]]
    # Header dates stay strings, as local clients receive them (providers/session.py).
    msg["header"] = msg.get("header") or {}
    msg["parent_header"] = msg.get("parent_header") or {}
    msg.setdefault("metadata", {})
    msg.setdefault("content", {})
    return msg


class _Sender:
    def __init__(self, owner: WebsocketChannels, channel: str) -> None:
        self._owner = owner
        self._channel = channel

    def send(self, msg: dict[str, Any]) -> None:
        self._owner.send(self._channel, msg)


class WebsocketChannels:
    """A kernel client whose five channels share one websocket connection."""

    def __init__(
        self,
        connect: Callable[[str], Awaitable[Any]],
        *,
        where: str,
        link: RemoteLink,
    ) -> None:
        """``connect(session_id)`` opens the websocket; it is called again after a drop, for as
        long as ``link`` allows (its ``reconnect_for`` seconds; 0: never)."""
        self._connect = connect
        self._conn: Any = None  # tornado WebSocketClientConnection
        self.where = where
        self.link = link
        self._outbox: list[str] | None = None  # messages sent while reconnecting
        self._stopped = False
        # The server re-signs what it forwards to the kernel; this key never leaves the process.
        # Its session id names this client to the server, which keeps the kernel's messages for
        # it while the websocket is down and replays them when it reconnects.
        self.session = Session(key=secrets.token_hex(16).encode(), username="ipykeep")
        self._queues: dict[str, asyncio.Queue[dict[str, Any]]] = {
            ch: asyncio.Queue() for ch in CHANNELS
        }
        self.closed = False
        self.close_reason: str | None = None
        self._sock: socket.socket | None = None
        self.quickack = QUICKACK  # None turns immediate ACKs off (benchmarks compare both)
        #: "restarting" or "dead" once the server reported the kernel died
        self.kernel_died: str | None = None
        self.shell_channel = _Sender(self, "shell")
        self.control_channel = _Sender(self, "control")
        self.stdin_channel = _Sender(self, "stdin")
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._conn = await self._connect(self.session.session)
        self._reader = asyncio.create_task(self._read(), name=f"ws-{self.where}")

    def _tcp_socket(self) -> socket.socket | None:
        stream = getattr(getattr(self._conn, "protocol", None), "stream", None)
        return getattr(stream, "socket", None)

    def _quickack(self) -> None:
        """Acknowledge at once (Linux). Servers do not set TCP_NODELAY on kernel websockets, so
        the kernel's burst of small messages (status, output, reply, idle) waits on Nagle's
        algorithm for our ACK of the previous one, which delayed ACKs hold up to 40 ms (measured
        through a loopback gateway: median round trip 57.8 ms without, 46.8 ms with; README,
        "Remote kernels"). The flag resets itself, so it is set again before every read."""
        sock = self._sock
        if sock is not None and self.quickack is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, self.quickack, 1)

    def _tune_socket(self) -> None:
        self._sock = self._tcp_socket()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def _reconnect(self) -> bool:
        """Open the websocket again (same session), with backoff, while the link allows."""
        self._outbox = []
        self.link.dropped()

        async def attempt() -> str | Stop | None:
            if self._stopped:
                return Stop("the channels were closed")
            try:
                self._conn = await asyncio.wait_for(
                    self._connect(self.session.session), ATTEMPT_TIMEOUT
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # refused, unreachable, timed out: try again
                why = str(getattr(exc, "message", None) or exc or type(exc).__name__)
                if getattr(exc, "code", None) in ("remote_auth_failed", "kernel_start_failed"):
                    return Stop(why)  # the server answered: no use trying again
                return why
            return None

        failed = await self.link.retry(attempt)
        if failed is not None:
            self._outbox = None
            self.close_reason = self.link.given_up(failed)
            return False
        self._tune_socket()
        pending, self._outbox = self._outbox, None
        for text in pending:
            self._conn.write_message(text)
        self.link.restored()
        return True

    async def _read(self) -> None:
        self._tune_socket()
        while True:
            self._quickack()
            frame = await self._conn.read_message()
            if frame is None:
                code = getattr(self._conn, "close_code", None)
                if not self._stopped and self.link.reconnect_for > 0 and await self._reconnect():
                    continue
                self.closed = True
                self.close_reason = self.close_reason or (
                    f"the connection to {self.where} was lost"
                    + (f" (close code {code})" if code else "")
                )
                return
            try:
                msg = decode_frame(frame)
            except (ValueError, struct.error, IndexError):
                continue  # not a kernel message; nothing to route
            channel = msg.pop("channel", "") or ""
            if (
                channel == "iopub"
                and not msg["parent_header"]
                and msg.get("msg_type", msg["header"].get("msg_type")) == "status"
            ):
                state = msg["content"].get("execution_state")
                if state in ("restarting", "dead"):
                    # The server's restarter replaced a kernel that died (or gave up): whatever
                    # ipykeep knew of its state is gone.
                    self.kernel_died = self.kernel_died or state
            q = self._queues.get(channel)
            if q is not None:
                q.put_nowait(msg)

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        if self.closed:
            raise ConnectionError(self.close_reason or f"the connection to {self.where} is closed")
        out = {k: v for k, v in msg.items() if k != "buffers"}
        out["channel"] = channel
        text = json.dumps(out, default=json_default)
        if self._outbox is not None:
            self._outbox.append(text)  # reconnecting: sent once the websocket is back
            return
        # write_message returns a future; errors surface as a closed connection in _read.
        with contextlib.suppress(Exception):
            self._conn.write_message(text)

    async def _get(self, channel: str, timeout: float | None) -> dict[str, Any]:
        q = self._queues[channel]
        if timeout is None:
            return await q.get()
        try:
            return await asyncio.wait_for(q.get(), timeout)
        except asyncio.TimeoutError:
            raise queue.Empty from None

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("iopub", timeout)

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("shell", timeout)

    async def get_control_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("control", timeout)

    async def wait_for_ready(self, timeout: float) -> None:
        """Ask for kernel_info until the kernel answers (the server queues nothing for us)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msg = self.session.msg("kernel_info_request", {})
            self.send("shell", msg)
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(
                        f"the kernel at {self.where} did not answer kernel_info "
                        f"within {timeout:g} s"
                    )
                try:
                    reply = await self._get("shell", min(left, 1.0))
                except queue.Empty:
                    if self.closed:
                        raise ConnectionError(self.close_reason or "connection closed") from None
                    break  # ask again: the first request may have reached a kernel still starting
                if reply.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]:
                    # Drain iopub of the start-up chatter so routing starts clean.
                    for q in (self._queues["iopub"],):
                        while not q.empty():
                            q.get_nowait()
                    return

    def stop_channels(self) -> None:
        self.closed = True
        self._stopped = True
        if self._reader is not None:
            self._reader.cancel()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
