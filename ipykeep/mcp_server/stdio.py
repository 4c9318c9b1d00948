"""An MCP session over a pair of pipes, without a thread hop or a task hop per message.

The SDK's default stdio transport reads and writes through ``anyio.wrap_file``, which sends
every line read and every write and flush to a worker thread, and passes each message through
a memory stream to or from a reader or writer task: a few milliseconds per tool call, a large
share of a quick ``ipython`` round trip. Here the pipes are asyncio pipe transports on the event
loop instead, and the SDK's dispatcher reads its messages from the input pipe and writes them
to the output pipe itself (through the SDK's own stream protocols), parsed and serialized as the
SDK's transport does.

The same session can be served by more than one process in turn (``handoff.py``): a round of
serving starts from a ``Replay`` (lines already read elsewhere, the handshake to replay to a
fresh SDK server) and ends at end of input, or at a quiet moment between two messages when its
``PassOn`` takes the session elsewhere, with what was read and not yet handled.

``stdio_pipes`` points the process's fd 0 at the null device and fd 1 at stderr while serving,
as the SDK does, so nothing else can read the protocol stream or write stray bytes into it; both
are restored on exit. When stdin or stdout is not a pipe (a file, say) the SDK's own transport
is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from ipykeep.mcp_server.direct import DirectCalls
    from ipykeep.mcp_server.early import EarlyAnswers
    from ipykeep.mcp_server.inflight import Ledger
    from ipykeep.mcp_server.session import Handshake

MAX_LINE = 64 * 1024 * 1024


class LineReader(asyncio.Protocol):
    """Lines of an input pipe, read on the event loop; what was read and not taken can be taken
    back whole (``detach``) when the session moves elsewhere."""

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
        self.poke()

    def eof_received(self) -> bool | None:
        self._eof = True
        self.poke()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self.poke()

    def poke(self) -> None:
        """Wake ``readline`` (with a line if there is one, else with None)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def readline(self) -> bytes | None:
        """The next line; ``b""`` at end of input; None when poked before a line came."""
        nl = self._buf.find(b"\n")
        if nl < 0 and not self._eof:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
            nl = self._buf.find(b"\n")
            if nl < 0 and not self._eof:
                return None
        if nl < 0:  # end of input: a last line without its newline, then b""
            line = bytes(self._buf)
            self._buf.clear()
            return line
        line = bytes(self._buf[: nl + 1])
        del self._buf[: nl + 1]
        return line

    def detach(self) -> bytes:
        """Stop reading the pipe; returns what was read and not taken as lines."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        left = bytes(self._buf)
        self._buf.clear()
        return left

    def reattach(self, left: bytes) -> None:
        """Undo ``detach``: the session stays here."""
        self._buf[:0] = left
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class PassOn(Protocol):
    """Where a session goes when this process stops serving it (``handoff.py``)."""

    def bind(self, wake: Callable[[], None]) -> None:
        """``wake()`` makes the serving round look again at whether the session moves on."""

    def wanted(self) -> bool:
        """Whether to pass the session on at the next quiet moment."""

    async def attempt(self, unread: bytes) -> bool:
        """Pass it on with ``unread`` (input read and not handled); False: it stays here."""


@dataclass
class Replay:
    """What a round of serving reads before its pipe: lines read elsewhere, and the ids of
    replayed requests (the handshake given to a fresh SDK server) whose answers are not sent."""

    lines: list[bytes] = field(default_factory=list)
    partial: bytes = b""
    drop: set[Any] = field(default_factory=set)


@dataclass
class Ending:
    """Why a round of serving ended: end of input, or the session passed on."""

    passed_on: bool


class _StreamEnds:
    """Context-manager and closing faces of the SDK's stream protocols (nothing to release:
    the pipes are closed by ``serve_pipes``)."""

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
    """The dispatcher's read stream: one JSON-RPC message per input line (or the parse error,
    which the SDK answers), as ``mcp.server.stdio`` reads them; a tool call that ``direct``
    serves itself is not passed on. At a quiet moment (every request answered) it asks
    ``pass_on`` whether the session moves on, and ends if it did."""

    def __init__(
        self,
        lines: LineReader,
        replay: Replay,
        ledger: Ledger,
        handshake: Handshake,
        early: EarlyAnswers | None,
        direct: DirectCalls | None,
        pass_on: PassOn | None,
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self._lines = lines
        self._first = replay.lines
        self._ledger = ledger
        self._handshake = handshake
        self._early = early
        self._direct = direct
        self._pass_on = pass_on
        self._flush = flush
        self.passed_on = False

    def __aiter__(self) -> _MessageReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        while True:
            line = await self._next_line()
            self._handshake.saw_request(line)
            if self._direct is not None and self._direct.take(line):
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(
                    line.decode("utf-8", errors="replace"), by_name=False
                )
            except Exception as exc:
                return exc
            if isinstance(message, mcp_types.JSONRPCRequest):
                self._ledger.opened(message.id, message.method)
            return SessionMessage(message)

    async def _next_line(self) -> bytes:
        if self._first:
            return self._first.pop(0)
        while True:
            if self._pass_on is not None and self._ledger.quiet() and self._pass_on.wanted():
                await self._flush()  # every answer on its way before another process writes
                unread = self._lines.detach()
                if await self._pass_on.attempt(unread):
                    self.passed_on = True
                    raise StopAsyncIteration
                self._lines.reattach(unread)
            line = await self._lines.readline()
            if line is None:
                continue  # poked: a quiet moment to look at again
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
    """The dispatcher's write stream: each message a line on the output pipe, in the order
    sent, less the answers to replayed requests."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        replay: Replay,
        ledger: Ledger,
        handshake: Handshake,
        early: EarlyAnswers | None,
    ) -> None:
        self._writer = writer
        self._drop = replay.drop
        self._ledger = ledger
        self._handshake = handshake
        self._early = early

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        text = wire_text(message)
        self._handshake.saw_response(text)
        if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            self._ledger.closed(message.id)
            if message.id in self._drop:
                self._drop.discard(message.id)
                return  # the answer to a replayed handshake: the client had it long ago
        if self._early is not None and not self._early.on_response(text):
            return  # answered early, before the SDK was loaded
        self._writer.write(text.encode("utf-8"))
        await self._writer.drain()


def wire_text(message: mcp_types.JSONRPCMessage) -> str:
    """A message as one protocol line, serialized as the SDK's stdio transport does."""
    return message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"


def is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
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


async def serve_pipes(
    server: Server[Any],
    in_fd: int,
    out_fd: int,
    replay: Replay,
    ledger: Ledger,
    handshake: Handshake,
    *,
    early: EarlyAnswers | None = None,
    direct: DirectCalls | None = None,
    pass_on: PassOn | None = None,
) -> Ending:
    """Serve one round of the session on ``in_fd``/``out_fd`` (left open: the transports run on
    copies of them) until end of input or until ``pass_on`` took it."""
    loop = asyncio.get_running_loop()
    lines = LineReader()
    if replay.partial:
        lines.data_received(replay.partial)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: lines, os.fdopen(os.dup(in_fd), "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(out_fd), "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)

    async def flush() -> None:
        while write_transport.get_write_buffer_size() and not write_transport.is_closing():
            await asyncio.sleep(0.002)

    ledger.on_quiet = lines.poke
    if pass_on is not None:
        pass_on.bind(lines.poke)
    if direct is not None:
        direct.attach(writer, ledger)
    reader = _MessageReader(lines, replay, ledger, handshake, early, direct, pass_on, flush)
    try:
        await server.run(
            reader,
            _MessageWriter(writer, replay, ledger, handshake, early),
            server.create_initialization_options(),
        )
    finally:
        ledger.on_quiet = None
        if direct is not None:
            await direct.close()
        with contextlib.suppress(Exception):
            await writer.drain()
        read_transport.close()
        write_transport.close()
    return Ending(passed_on=reader.passed_on)
