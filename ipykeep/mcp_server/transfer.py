"""Passing a session's pipes between processes: descriptors and JSON lines over a Unix socket.

The giving side sends one byte carrying the descriptors (``SCM_RIGHTS``), then a JSON line (the
token, the session's state, the input read and not handled); the taking side answers with JSON
lines on the same connection, which stays open as the session's link for as long as the taker
serves it. Standard library only: the daemon accepts on this before it has loaded the SDK.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from typing import Any

#: The header's ``op`` of a session offered to be taken over.
ADOPT = "adopt"
#: Largest header accepted (state and unread input; a session's unread input is a few lines).
MAX_HEADER = 16 * 1024 * 1024
#: Descriptors a session comes with: its input pipe, its output pipe, its in-flight table.
SESSION_FDS = 3


def supported() -> bool:
    """Descriptor passing over Unix sockets (POSIX; not Windows)."""
    return hasattr(socket, "AF_UNIX") and hasattr(socket, "send_fds")


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: Any) -> bytes:
    return base64.b64decode(text) if isinstance(text, str) and text else b""


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def give(
    path: str, fds: list[int], header: dict[str, Any]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to ``path``, send ``fds`` and ``header``; the connection as streams."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, path)
        socket.send_fds(sock, [b"F"], fds)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_HEADER)
    except BaseException:
        sock.close()
        raise
    await send(writer, header)
    return reader, writer


async def take(sock: socket.socket) -> tuple[list[int], asyncio.StreamReader, asyncio.StreamWriter]:
    """The descriptors sent on an accepted connection, and the connection as streams (the
    header is the first line to read)."""
    sock.setblocking(False)
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1, SESSION_FDS)
            break
        except BlockingIOError:
            await _readable(sock)
    if data != b"F" or len(fds) != SESSION_FDS:
        for fd in fds:
            _close(fd)
        raise ValueError("not a session hand-over")
    try:
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_HEADER)
    except BaseException:
        for fd in fds:
            _close(fd)
        raise
    return fds, reader, writer


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


async def send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()


async def receive(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message; None when the other side closed the link (or sent garbage)."""
    try:
        line = await reader.readline()
        message = json.loads(line) if line else None
    except (ValueError, OSError, asyncio.LimitOverrunError, asyncio.IncompleteReadError):
        return None
    return message if isinstance(message, dict) else None
