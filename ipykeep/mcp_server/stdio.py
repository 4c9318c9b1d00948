"""Stdio for the MCP server without a thread hop or a task hop per message.

The SDK's default stdio transport reads and writes through ``anyio.wrap_file``, which sends
every line read and every write and flush to a worker thread, and passes each message through
a memory stream to or from a reader or writer task: a few milliseconds per tool call, a large
share of a quick ``ipython`` round trip. Here stdin and stdout are asyncio pipe transports on
the event loop instead, and the SDK's dispatcher reads its messages from stdin and writes them
to stdout itself (through the SDK's own stream protocols), parsed and serialized as the SDK's
transport does. As the SDK does, the process's fd 0 is pointed at the null device and fd 1 at
stderr while serving, so nothing else can read the protocol stream or write stray bytes into
it; both are restored on exit. When stdin or stdout is not a pipe (a file, say) the SDK's own
transport is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from ipykeep.mcp_server.direct import DirectCalls
    from ipykeep.mcp_server.early import EarlyAnswers, StdinPrefetch

MAX_LINE = 64 * 1024 * 1024


class _StreamEnds:
    """Context-manager and closing faces of the SDK's stream protocols (nothing to release:
    the pipes are closed by ``pipe_stdio``)."""

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        return None


class _MessageReader(_StreamEnds):
    """The dispatcher's read stream: one JSON-RPC message per stdin line (or the parse error,
    which the SDK answers), as ``mcp.server.stdio`` reads them; a tool call that ``direct``
    serves itself is not passed on."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        early: EarlyAnswers | None,
        first: list[bytes],
        direct: DirectCalls | None,
    ) -> None:
        self._reader = reader
        self._early = early
        self._first = first
        self._direct = direct

    def __aiter__(self) -> _MessageReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        line = await self._next_line()
        while self._direct is not None and self._direct.take(line):
            line = await self._next_line()
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(
                line.decode("utf-8", errors="replace"), by_name=False
            )
        except Exception as exc:
            return exc
        return SessionMessage(message)

    async def _next_line(self) -> bytes:
        if self._first:
            return self._first.pop(0)
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        if self._early is not None:
            self._early.on_request(line)  # learns answers for the next start
        return line

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None


class _MessageWriter(_StreamEnds):
    """The dispatcher's write stream: each message a line on stdout, in the order sent."""

    def __init__(
        self, writer: asyncio.StreamWriter, early: EarlyAnswers | None, direct: DirectCalls | None
    ) -> None:
        self._writer = writer
        self._early = early
        self._direct = direct

    async def send(self, item: SessionMessage, /) -> None:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        if self._direct is not None:
            self._direct.saw_response(text)
        if self._early is not None and not self._early.on_response(text):
            return  # answered early, before the SDK was loaded
        self._writer.write(text.encode("utf-8"))
        await self._writer.drain()


@contextlib.asynccontextmanager
async def pipe_stdio(
    prefetch: StdinPrefetch | None = None, direct: DirectCalls | None = None
) -> AsyncIterator[tuple[Any, Any] | None]:
    """``(read, write)`` message streams for the SDK's ``Server.run``, or None if not pipes.

    ``prefetch`` is the reader that answered the handshake while the SDK loaded: its lines come
    first, and the SDK's own answers to what it answered are dropped. ``direct`` serves the tool
    calls it takes (``direct.py``) on the same pipes.
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
    if direct is not None:
        direct.writer = writer
    try:
        yield _MessageReader(reader, early, first, direct), _MessageWriter(writer, early, direct)
    finally:
        if direct is not None:
            await direct.close()
        read_transport.close()
        write_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
