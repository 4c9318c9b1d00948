"""Following a long daemon call's progress: one polling loop and one stderr progress line.

Warm-up (``wait_warm`` long-polls) and a running plan (``plan_progress`` polled beside the
blocking ``run_stale`` call) both go through :func:`follow`; only what they poll differs.
Standard library only: the thin CLI imports this on its hot path.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

S = TypeVar("S")
R = TypeVar("R")

#: Width a progress line is padded to on a terminal, so a shorter line hides a longer one.
WIDTH = 78


class ProgressLine:
    """A status line on stderr: rewritten in place on a terminal, one line per change otherwise."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.last: str | None = None

    def show(self, text: str) -> None:
        """Print ``text`` unless it is what the line already says."""
        if self.quiet or text == self.last:
            return
        self._write(("\r" + text.ljust(WIDTH)) if self.tty else text + "\n")
        self.last = text

    def close(self, final: str | None = None) -> None:
        """End the line: with ``final`` in its place, or just a newline after what it showed."""
        if self.quiet:
            return
        if final is not None:
            self._write(("\r" + final.ljust(WIDTH) + "\n") if self.tty else final + "\n")
        elif self.last is not None and self.tty:
            self._write("\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def follow(
    poll: Callable[[], S],
    render: Callable[[S], str | None],
    finished: Callable[[S], bool],
    line: ProgressLine,
) -> S:
    """Poll until ``finished``, showing each state ``render`` describes; the last state.

    ``poll`` paces the loop: a long-poll that waits on the daemon, or a wait then a quick call.
    """
    while True:
        state = poll()
        text = render(state)
        if text is not None:
            line.show(text)
        if finished(state):
            return state


class _Done:
    """The state :func:`run_with_progress` polls once its call has returned."""


_DONE = _Done()


def run_with_progress(
    call: Callable[[], R],
    progress: Callable[[], S],
    render: Callable[[S], str | None],
    line: ProgressLine,
    *,
    interval: float = 0.5,
    name: str = "ipykeep-call",
) -> R:
    """Run the blocking ``call`` in a thread; every ``interval`` s, show what ``progress`` says."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, daemon=True, name=name)
    worker.start()

    def poll() -> S | _Done:
        worker.join(interval)
        return _DONE if not worker.is_alive() else progress()

    def describe(state: S | _Done) -> str | None:
        return None if isinstance(state, _Done) else render(state)

    follow(poll, describe, lambda state: isinstance(state, _Done), line)
    line.close()
    if "error" in box:
        raise box["error"]
    value: R = box["value"]
    return value
