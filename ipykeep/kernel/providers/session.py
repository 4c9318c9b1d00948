"""The message session of ipykeep's kernel clients: jupyter_client's, without date parsing.

jupyter_client's ``Session.deserialize`` turns every ISO 8601 string of a message's header and
parent header into a ``datetime`` with dateutil: two parses per message, five messages for the
smallest execution, about a tenth of the daemon's CPU on a quick ``1+1``. Nothing in ipykeep
reads those dates (executions are timed with the daemon's own clock), so they stay the
strings the kernel sent. Signatures are checked and replays refused as jupyter_client does,
with its signing and digest history.
"""

from __future__ import annotations

import hmac
from typing import Any

import zmq
from jupyter_client.adapter import adapt
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

#: Frames before the buffers: signature, header, parent header, metadata, content.
MIN_FRAMES = 5


class UndatedSession(Session):
    """A ``Session`` whose received messages keep their header dates as strings."""

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


def unlimited_receive(kc: AsyncKernelClient) -> None:
    """No receive limit on ``kc``'s sockets: with zmq's default (1000 messages on each side) a
    burst of output while the daemon is busy overflows the queues and the kernel's PUB socket
    drops the rest, the idle status among them.

    Set on the client's own context (the one it destroys when its channels stop) before any
    channel connects: a limit applies to the connections made after it is set.
    """
    kc.context.setsockopt(zmq.RCVHWM, 0)


class IopubChannel(AsyncZMQSocketChannel):
    """jupyter_client's async channel, whose wait without a deadline is the receive itself.

    ``get_msg`` polls the socket (a poller and its futures) and then receives (another future)
    for every message; a reader that waits for whatever comes next, as the daemon's iopub
    reader does, needs the receive alone: half the event-loop work per output message, five
    of them for the smallest execution. A wait with a deadline is jupyter_client's.
    """

    # jupyter_client declares the sync channel's signature; the async channel's is a coroutine
    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]
        if timeout is not None:
            return await super().get_msg(timeout)
        assert self.socket is not None
        frames = await self.socket.recv_multipart()
        _, message = self.session.feed_identities(frames)
        return self.session.deserialize(message)
