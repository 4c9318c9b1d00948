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
import queue
import secrets
import socket
import struct
from typing import Any

from jupyter_client.jsonutil import extract_dates, json_default
from jupyter_client.session import Session

CHANNELS = ("shell", "iopub", "control", "stdin")
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def decode_frame(frame: str | bytes) -> dict[str, Any]:
    """One websocket frame as a message dict (binary frames: offsets table, JSON, buffers)."""
    if isinstance(frame, str):
        msg = json.loads(frame)
    else:
        nbufs = struct.unpack("!i", frame[:4])[0]
        offsets: list[int | None] = list(struct.unpack("!" + "I" * nbufs, frame[4 : 4 * (nbufs + 1)]))
        offsets.append(None)
        parts = [frame[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        msg = json.loads(parts[0])
        msg["buffers"] = [memoryview(b) for b in parts[1:]]
    # Local clients see dates as datetimes; keep remote messages alike.
    msg["header"] = extract_dates(msg.get("header") or {})
    msg["parent_header"] = extract_dates(msg.get("parent_header") or {})
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

    def __init__(self, conn: Any, *, where: str) -> None:
        self._conn = conn  # tornado WebSocketClientConnection
        self.where = where
        # The server re-signs what it forwards to the kernel; this key never leaves the process.
        self.session = Session(key=secrets.token_hex(16).encode(), username="ipykeep")
        self._queues: dict[str, asyncio.Queue[dict[str, Any]]] = {ch: asyncio.Queue() for ch in CHANNELS}
        self.closed = False
        self.close_reason: str | None = None
        self._sock: socket.socket | None = None
        self.shell_channel = _Sender(self, "shell")
        self.control_channel = _Sender(self, "control")
        self.stdin_channel = _Sender(self, "stdin")
        self._reader = asyncio.create_task(self._read(), name=f"ws-{where}")

    def _tcp_socket(self) -> socket.socket | None:
        stream = getattr(getattr(self._conn, "protocol", None), "stream", None)
        return getattr(stream, "socket", None)

    def _quickack(self) -> None:
        """Acknowledge at once (Linux). Servers do not set TCP_NODELAY on kernel websockets, so
        the kernel's burst of small messages (status, output, reply, idle) waits on Nagle's
        algorithm for our ACK of the previous one, which delayed ACKs hold up to 40 ms: measured
        as +40 ms on every round trip through a loopback gateway. The flag resets itself, so it
        is set again after every read."""
        sock = self._sock
        if sock is not None and QUICKACK is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)

    async def _read(self) -> None:
        self._sock = self._tcp_socket()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            self._quickack()
            frame = await self._conn.read_message()
            if frame is None:
                self.closed = True
                code = getattr(self._conn, "close_code", None)
                self.close_reason = f"the connection to {self.where} was lost" + (f" (close code {code})" if code else "")
                return
            try:
                msg = decode_frame(frame)
            except (ValueError, struct.error, IndexError):
                continue  # not a kernel message; nothing to route
            q = self._queues.get(msg.pop("channel", "") or "")
            if q is not None:
                q.put_nowait(msg)

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        if self.closed:
            raise ConnectionError(self.close_reason or f"the connection to {self.where} is closed")
        out = {k: v for k, v in msg.items() if k != "buffers"}
        out["channel"] = channel
        # write_message returns a future; errors surface as a closed connection in _read.
        self._conn.write_message(json.dumps(out, default=json_default))

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
                    raise TimeoutError(f"the kernel at {self.where} did not answer kernel_info within {timeout:g} s")
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
        self._reader.cancel()
        with contextlib.suppress(Exception):
            self._conn.close()
