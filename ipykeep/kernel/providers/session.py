"""The client the daemon reads kernels with: jupyter_client's, reading less per message.

Its channels wait on the receive alone and it has no receive limit (``KernelClient``); its
session leaves dates unparsed (``UndatedSession``).

jupyter_client's ``Session.deserialize`` turns every ISO 8601 string of a message's header and
parent header into a ``datetime`` with dateutil: two parses per message, five messages for the
smallest execution, about a tenth of the daemon's CPU on a quick ``1+1``. Nothing in ipykeep
reads those dates (executions are timed with the daemon's own clock), so they stay the
strings the kernel sent. Signatures are checked and replays refused as jupyter_client does,
with its signing and digest history.
"""

from __future__ import annotations

import asyncio
import hmac
import queue
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.adapter import adapt
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from traitlets import Type, default

#: Frames before the buffers: signature, header, parent header, metadata, content.
MIN_FRAMES = 5


#: Signatures remembered to refuse a replayed message. jupyter_client keeps 65,536 (about
#: 10 MB with the set's table), reached only after thousands of calls: a daemon's memory kept
#: growing for its first hours. The kernel's messages reach the daemon over its own
#: connections, signed with a key only the two hold, so a shorter window loses nothing real.
#: Kernels are started with the same bound (``base.kernel_options``).
DIGEST_HISTORY = 4096


class UndatedSession(Session):
    """A ``Session`` whose received messages keep their header dates as strings, and which
    remembers ``DIGEST_HISTORY`` signatures."""

    @default("digest_history_size")
    def _shorter_digest_history(self) -> int:
        return DIGEST_HISTORY

    def deserialize(
        self,
        msg_list: list[bytes] | list[zmq.Message],
        content: bool = True,
        copy: bool = True,
    ) -> dict[str, Any]:
        """``Session.deserialize`` (jupyter_client 8) minus ``extract_dates``."""
        frames: list[Any] = list(msg_list)
        if not copy:  # pyzmq left the frames as Messages: copy the small ones
            frames = [bytes(m.bytes) for m in frames[:MIN_FRAMES]] + frames[MIN_FRAMES:]
        if len(frames) < MIN_FRAMES:
            raise TypeError(f"malformed message, must have at least {MIN_FRAMES} elements")
        if self.auth is not None:
            self._check_signature(frames, record=content)
        header = self.unpack(frames[1])
        message: dict[str, Any] = {
            "header": header,
            "msg_id": header["msg_id"],
            "msg_type": header["msg_type"],
            "parent_header": self.unpack(frames[2]),
            "metadata": self.unpack(frames[3]),
            "content": self.unpack(frames[4]) if content else frames[4],
        }
        buffers = [memoryview(b) for b in frames[MIN_FRAMES:]]
        if buffers and buffers[0].shape is None:  # pyzmq #646: copy, as jupyter_client does
            buffers = [memoryview(bytes(b.bytes)) for b in frames[MIN_FRAMES:]]
        message["buffers"] = buffers
        return adapt(message)

    def _check_signature(self, frames: list[bytes], *, record: bool) -> None:
        signature = frames[0]
        if not signature:
            raise ValueError("Unsigned Message")
        if signature in self.digest_history:
            raise ValueError(f"Duplicate Signature: {signature!r}")
        if record:  # a peek (content=False) does not use the signature up
            self._add_digest(signature)
        if not hmac.compare_digest(signature, self.sign(frames[1:MIN_FRAMES])):
            raise ValueError(f"Invalid Signature: {signature!r}")


class KernelChannel(AsyncZMQSocketChannel):
    """jupyter_client's async channel, whose wait is the receive itself.

    ``get_msg`` polls the socket (a poller, its futures and a timer) and then receives (another
    future) for every message; here the receive alone does, under ``wait_for`` when there is a
    deadline. That is half the event-loop work per message, five of them for the smallest
    execution. A receive that times out takes nothing off the socket (pyzmq skips a cancelled
    receive), and the next one reads the socket's events afresh, so a wake-up missed under
    concurrent sends costs at most one deadline (``kernel/channels.py``).
    """

    # jupyter_client declares the sync channel's signature; the async channel's is a coroutine
    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]
        assert self.socket is not None
        receive = self.socket.recv_multipart()
        if timeout is None:
            frames = await receive
        else:
            try:
                frames = await asyncio.wait_for(receive, timeout)
            except asyncio.TimeoutError:
                raise queue.Empty from None
        _, message = self.session.feed_identities(frames)
        return self.session.deserialize(message)


class KernelClient(AsyncKernelClient):
    """jupyter_client's async client as the daemon reads a kernel: ``KernelChannel`` for the
    channels it reads, read directly (no ``ensure_async`` wrapper per message), and no receive
    limit.

    zmq's default limit (1000 messages on each side) makes a burst of output while the daemon
    is busy overflow the queues, and the kernel's PUB socket then drops the rest, the idle
    status among them. A limit applies to the connections made after it is set, so it is set
    on the client's own context (the one it destroys when its channels stop) before any
    channel connects.
    """

    iopub_channel_class = Type(KernelChannel)
    shell_channel_class = Type(KernelChannel)
    control_channel_class = Type(KernelChannel)

    @default("context")
    def _unlimited_context(self) -> zmq.asyncio.Context:
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.RCVHWM, 0)
        return context

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self.iopub_channel.get_msg(timeout)  # type: ignore[no-any-return]

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self.shell_channel.get_msg(timeout)  # type: ignore[no-any-return]

    async def get_control_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self.control_channel.get_msg(timeout)  # type: ignore[no-any-return]
