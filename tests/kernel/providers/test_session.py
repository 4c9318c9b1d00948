"""The kernel clients' session: jupyter_client's messages, with header dates left as strings."""

from __future__ import annotations

import pytest
import zmq
from jupyter_client.session import Session

from ipykeep.kernel.providers.session import UndatedSession

KEY = b"k" * 32


def _wire(session: Session, *, buffers: list[bytes] | None = None) -> list[bytes]:
    """A signed iopub message as the kernel puts it on the socket, after the identities."""
    parent = session.msg("execute_request", {"code": "1+1"})["header"]
    msg = session.msg(
        "execute_result",
        {"data": {"text/plain": "2"}, "metadata": {}, "execution_count": 1},
        parent=parent,
    )
    frames = session.serialize(msg)
    return frames[frames.index(b"<IDS|MSG>") + 1 :] + (buffers or [])  # unsigned, as sent


def test_same_message_as_jupyter_client_but_dates_stay_strings() -> None:
    frames = _wire(Session(key=KEY))
    ours = UndatedSession(key=KEY).deserialize(frames)
    theirs = Session(key=KEY).deserialize(frames)
    assert isinstance(ours["header"]["date"], str)
    assert isinstance(ours["parent_header"]["date"], str)
    for part in ("header", "parent_header"):
        dates = (ours[part].pop("date"), theirs[part].pop("date"))
        assert dates[0] == dates[1].isoformat().replace("+00:00", "Z")
    assert ours == theirs


def test_buffers_and_uncopied_frames_are_read_like_jupyter_client() -> None:
    frames = _wire(Session(key=KEY), buffers=[b"abc"])
    ours = UndatedSession(key=KEY).deserialize([zmq.Frame(f) for f in frames], copy=False)
    theirs = Session(key=KEY).deserialize([zmq.Frame(f) for f in frames], copy=False)
    assert (
        ours["content"]
        == theirs["content"]
        == {
            "data": {"text/plain": "2"},
            "metadata": {},
            "execution_count": 1,
        }
    )
    assert [bytes(b) for b in ours["buffers"]] == [bytes(b) for b in theirs["buffers"]] == [b"abc"]


def test_signatures_are_checked_and_replays_refused() -> None:
    frames = _wire(Session(key=KEY))
    with pytest.raises(ValueError, match="Invalid Signature"):
        UndatedSession(key=b"other").deserialize(frames)
    with pytest.raises(ValueError, match="Unsigned"):
        UndatedSession(key=KEY).deserialize([b"", *frames[1:]])
    session = UndatedSession(key=KEY)
    session.deserialize(frames)
    with pytest.raises(ValueError, match="Duplicate Signature"):
        session.deserialize(frames)


def test_a_peek_does_not_use_up_the_signature() -> None:
    frames = _wire(Session(key=KEY))
    session = UndatedSession(key=KEY)
    peek = session.deserialize(frames, content=False)
    assert peek["content"] == frames[4]
    assert session.deserialize(frames)["content"]["execution_count"] == 1


def test_too_few_frames_are_refused() -> None:
    with pytest.raises(TypeError, match="malformed"):
        UndatedSession(key=KEY).deserialize([b"sig", b"{}"])


async def test_the_channel_reads_each_message_as_jupyter_clients_does() -> None:
    """Over a real zmq socket pair: waits with and without a deadline give every message, in
    order; a wait that times out raises ``queue.Empty`` and takes nothing off the socket."""
    import queue

    import zmq.asyncio

    from ipykeep.kernel.providers.session import KernelChannel

    context = zmq.asyncio.Context()
    kernel_side = context.socket(zmq.PUB)
    client_side = context.socket(zmq.SUB)
    client_side.setsockopt(zmq.SUBSCRIBE, b"")
    port = kernel_side.bind_to_random_port("tcp://127.0.0.1")
    client_side.connect(f"tcp://127.0.0.1:{port}")
    sender = Session(key=KEY)
    channel = KernelChannel(client_side, UndatedSession(key=KEY))
    try:
        got: list[str] = []
        while not got:  # a subscription takes a moment: send until a message arrives
            sender.send(kernel_side, sender.msg("status", {"execution_state": "busy"}))
            try:
                got.append((await channel.get_msg(timeout=0.05))["msg_type"])
            except Exception:
                continue
        for i in range(3):
            sender.send(kernel_side, sender.msg("stream", {"name": "stdout", "text": f"{i}\n"}))
        texts = []
        while len(texts) < 3:
            message = await channel.get_msg()  # no deadline: the receive alone
            if message["msg_type"] == "stream":
                texts.append(message["content"]["text"])
                assert isinstance(message["header"]["date"], str)  # the session's reading
        assert texts == ["0\n", "1\n", "2\n"]
        for i in range(3):
            with pytest.raises(queue.Empty):
                await channel.get_msg(timeout=0.02)
            sender.send(kernel_side, sender.msg("stream", {"name": "stdout", "text": f"{i}\n"}))
            message = await channel.get_msg(timeout=5)
            assert message["content"]["text"] == f"{i}\n"
    finally:
        client_side.close(0)
        kernel_side.close(0)
        context.term()


def test_the_signatures_remembered_against_replays_stay_bounded() -> None:
    from ipykeep.kernel.providers.session import DIGEST_HISTORY

    sender, reader = Session(key=KEY), UndatedSession(key=KEY)
    assert Session(key=KEY).digest_history_size > DIGEST_HISTORY
    latest = []
    for _ in range(DIGEST_HISTORY + 500):
        latest = _wire(sender)
        reader.deserialize(latest)
    assert len(reader.digest_history) <= DIGEST_HISTORY
    with pytest.raises(ValueError, match="Duplicate Signature"):
        reader.deserialize(latest)  # the most recent are still refused when replayed
