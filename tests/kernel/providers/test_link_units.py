"""The reconnect policy of a remote kernel's link (``providers/link.py``), as a pure unit."""

from __future__ import annotations

import asyncio

from ipykeep.kernel.providers.link import RemoteLink, Stop


def run(link: RemoteLink, answers: list[str | Stop | None]) -> tuple[str | None, int]:
    calls = 0

    async def attempt() -> str | Stop | None:
        nonlocal calls
        calls += 1
        return answers.pop(0) if answers else "still refused"

    return asyncio.run(link.retry(attempt)), calls


def test_retries_until_an_attempt_connects():
    assert run(RemoteLink("the link", 60, replays="-"), ["refused", "refused", None]) == (None, 3)


def test_a_stop_gives_up_at_once():
    assert run(RemoteLink("the link", 60, replays="-"), ["refused", Stop("gone")]) == ("gone", 2)


def test_gives_up_with_the_last_reason_when_the_time_is_up():
    why, calls = run(RemoteLink("the link", 0.2, replays="-"), [])
    assert why == "still refused" and calls >= 1


def test_drop_and_restore_tell_the_owner_once_each():
    link = RemoteLink("the ssh connection to box", 60, replays="output meanwhile is gone")
    downs: list[bool] = []
    ups: list[tuple[str, str]] = []
    link.on_down = lambda: downs.append(True)
    link.on_up = lambda notice, gap: ups.append((notice, gap))
    link.dropped()
    link.dropped()  # the same drop seen twice
    assert link.down and downs == [True]
    link.restored()
    assert not link.down and link.reconnects == 1
    ((notice, gap),) = ups
    assert (
        notice.startswith("the ssh connection to box was lost at ") and "re-established" in notice
    )
    assert gap.endswith("; output meanwhile is gone")
    assert "within 60 s (remote_reconnect_s): refused" in link.given_up("refused")
