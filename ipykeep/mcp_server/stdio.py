"""Stdio for the MCP server without a thread hop per message.

The SDK's default stdio transport reads and writes through ``anyio.wrap_file``, which sends
every line read and every write and flush to a worker thread: a few milliseconds per tool
call, a large share of a quick ``ipython`` round trip. Here stdin and stdout are asyncio pipe
transports on the event loop instead. As the SDK does, the process's fd 0 is pointed at the
null device and fd 1 at stderr while serving, so nothing else can read the protocol stream or
write stray bytes into it; both are restored on exit. When stdin or stdout is not a pipe (a
file, say) the SDK's own transport is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipykeep.mcp_server.early import EarlyAnswers, StdinPrefetch

MAX_LINE = 64 * 1024 * 1024


class _LineReader:
    def __init__(
        self, reader: asyncio.StreamReader, early: EarlyAnswers | None, first: list[bytes]
    ) -> None:
        self._reader = reader
        self._early = early
        self._first = first

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        if self._first:
            line = self._first.pop(0)
        else:
            line = await self._reader.readline()
            if not line:
                raise StopAsyncIteration
            if self._early is not None:
                self._early.on_request(line)  # learns answers for the next start
        return line.decode("utf-8", errors="replace")


class _Writer:
    def __init__(self, writer: asyncio.StreamWriter, early: EarlyAnswers | None) -> None:
        self._writer = writer
        self._early = early

    async def write(self, text: str) -> None:
        if self._early is not None and not self._early.on_response(text):
            return  # answered early, before the SDK was loaded
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.asynccontextmanager
async def pipe_stdio(
    prefetch: StdinPrefetch | None = None,
) -> AsyncIterator[tuple[Any, Any] | None]:
    """``(stdin, stdout)`` streams for ``mcp.server.stdio.stdio_server``, or None if not pipes.

    ``prefetch`` is the reader that answered the handshake while the SDK loaded: its lines come
    first, and the SDK's own answers to what it answered are dropped.
    """
    import stat

    first: list[bytes] = []
    partial = b""
    early = None
    if prefetch is not None:
        first, partial = prefetch.handover()
        early = prefetch.answers
    if not all(
        stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in (0, 1)
    ):
        yield None
        return
    loop = asyncio.get_running_loop()
    in_fd, out_fd = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    if partial:
        reader.feed_data(partial)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    try:
        yield _LineReader(reader, early, first), _Writer(writer, early)
    finally:
        read_transport.close()
        write_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
