"""The stdio transport: the SDK's dispatcher reading and writing a pair of pipes on the event loop.

The SDK's own stdio transport reads and writes through ``anyio.wrap_file``, which sends every
line read and every write and flush to a worker thread, and passes each message through a
memory stream to or from a reader or writer task: ~0.6 ms of CPU per tool call on two cores.
Here the pipes are asyncio pipe transports on the event loop, and the SDK's dispatcher reads
its messages from the input pipe and writes them to the output pipe itself. Nothing here knows
a protocol message: each line is parsed by the SDK's ``jsonrpc_message_adapter`` (a line that
does not parse goes to the SDK as the error, which the SDK answers) and each message is written
as the SDK's stdio transport writes it (``model_dump_json(by_alias=True, exclude_unset=True)``
and a newline).

``stdio_pipes`` points the process's fd 0 at the null device and fd 1 at stderr while serving,
as the SDK does, so nothing else can read the protocol stream or write stray bytes into it; both
are restored on exit. When stdin or stdout is not a pipe (a file, say) the SDK's own transport
is used (``server.run_stdio``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

#: A line longer than this (with no newline) ends the input: nothing reads it further.
MAX_LINE = 64 * 1024 * 1024


class LineReader(asyncio.Protocol):
    """Lines of an input pipe, read on the event loop."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) > MAX_LINE and self._buf.find(b"\n") < 0 and self.transport:
            self.transport.pause_reading()  # a runaway line: read no more of it
            self._eof = True
        self._wake()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def readline(self) -> bytes:
        """The next line; ``b""`` at end of input."""
        while (nl := self._buf.find(b"\n")) < 0 and not self._eof:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if nl < 0:  # end of input: a last line without its newline, then b""
            line = bytes(self._buf)
            self._buf.clear()
            return line
        line = bytes(self._buf[: nl + 1])
        del self._buf[: nl + 1]
        return line


class _StreamEnds:
    """Context-manager and closing faces of the SDK's stream protocols (nothing to release:
    the transports are closed by ``serve_pipes``)."""

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
    """The dispatcher's read stream: one message per input line, parsed by the SDK (or the parse
    error, which the SDK answers), as ``mcp.server.stdio`` reads them."""

    def __init__(self, lines: LineReader) -> None:
        self._lines = lines

    def __aiter__(self) -> _MessageReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        line = await self._lines.readline()
        if not line:
            raise StopAsyncIteration
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(
                line.decode("utf-8", errors="replace"), by_name=False
            )
        except Exception as exc:
            return exc
        return SessionMessage(message)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None


class _MessageWriter(_StreamEnds):
    """The dispatcher's write stream: each message a line on the output pipe, in the order
    sent, serialized as the SDK's stdio transport serializes it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage, /) -> None:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._writer.write(text.encode("utf-8") + b"\n")
        await self._writer.drain()


def is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.contextmanager
def stdio_pipes() -> Iterator[tuple[int, int] | None]:
    """Private copies of stdin and stdout for the protocol (None if either is not a pipe),
    with fd 0 on the null device and fd 1 on stderr meanwhile."""
    if not (is_pipe(0) and is_pipe(1)):
        yield None
        return
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    saved_in, saved_out = os.dup(0), os.dup(1)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield in_fd, out_fd
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, in_fd, out_fd):
            os.close(fd)


async def serve_pipes(server: Server[Any], in_fd: int, out_fd: int) -> None:
    """Serve the session on ``in_fd``/``out_fd`` until end of input (both left open: the
    transports run on copies of them)."""
    loop = asyncio.get_running_loop()
    lines = LineReader()
    read_transport, _ = await loop.connect_read_pipe(
        lambda: lines, os.fdopen(os.dup(in_fd), "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(out_fd), "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    try:
        await server.run(
            _MessageReader(lines), _MessageWriter(writer), server.create_initialization_options()
        )
    finally:
        with contextlib.suppress(Exception):
            await writer.drain()
        read_transport.close()
        write_transport.close()
