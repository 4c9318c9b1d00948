"""Execution records: what one execute_request did, as its messages arrive.

An ``Execution`` is mutable while its kernel works on it (outputs are appended as iopub
messages arrive) and is only ever read through immutable snapshots (``ExecutionRecord``).
Output handling is linear in the number of messages: stream text is kept as chunk lists and
joined lazily, ``clear_output`` drops the current list in O(1), and readers follow an
append-only event log through their own cursors.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ExecutionState = Literal["queued", "running", "ok", "failed", "interrupted", "lost"]
FINISHED_STATES = frozenset({"ok", "failed", "interrupted", "lost"})

# CSI sequences (colours, cursor moves), OSC (window title, clipboard, hyperlinks) and DCS/SOS/
# PM/APC strings ended by BEL or ST, and any other two-byte escape: none may reach a terminal.
ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][\s\S]*?(?:\x07|\x1b\\|$)"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x80-\x9f]"
)


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


@dataclass
class StreamOutput:
    name: str
    chunks: list[str] = field(default_factory=list)

    def text(self) -> str:
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""

    def to_nbformat(self) -> dict[str, Any]:
        return {"output_type": "stream", "name": self.name, "text": self.text()}


@dataclass
class RichOutput:
    """display_data, execute_result or error, stored as the nbformat output dict."""

    output: dict[str, Any]

    def to_nbformat(self) -> dict[str, Any]:
        return self.output


Output = StreamOutput | RichOutput


@dataclass(frozen=True)
class OutputEvent:
    """One entry of the append-only log readers follow (text is already ANSI-free)."""

    seq: int
    kind: Literal["stream", "result", "display", "error", "clear", "note"]
    text: str
    data: dict[str, Any] | None = None


@dataclass(slots=True)
class Execution:
    handle: str
    kernel_id: str
    code: str
    kind: Literal["cell", "scratch", "browser"]
    cell_id: str | None = None  # nbformat id for notebook cells
    request_id: str | None = None
    msg_id: str | None = None
    subshell: bool = False
    state: ExecutionState = "queued"
    execution_count: int | None = None
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    outputs: list[Output] = field(default_factory=list)
    events: list[OutputEvent] = field(default_factory=list)
    error: dict[str, Any] | None = None
    recorded_bytes: int = 0
    dropped_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    interrupt_requested: bool = False
    #: where a debugger holds it (``cell abc line 3``), set by the debugger service; None when
    #: it is not paused (the state stays ``running`` while paused)
    paused: str | None = None
    #: the kernel published a busy status for this request (it started work on it)
    acknowledged: bool = False
    #: sent while the kernel still had a helper request of ipykeep's to answer ahead of it
    #: (``KernelProcess.send_silent``): the run time counts from the busy status instead
    queued_behind: bool = False
    #: the shell reply never came (the state was taken from iopub; see KernelProcess.run)
    reply_lost: bool = False
    #: user_expressions sent with the request (probes), and their results from the reply
    expressions: dict[str, str] = field(default_factory=dict)
    expression_results: dict[str, Any] = field(default_factory=dict)
    #: the outputs left the daemon's memory; the kernel's archive has them (engine/retention.py)
    spilled: bool = False
    _clear_pending: bool = False
    #: readers waiting for the end (``wait``): each woken with True at the end, False at its
    #: deadline
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list)

    # -- state -----------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def start(self) -> None:
        if self.state == "queued":
            self.state = "running"
            self.started_at = time.time()

    def finish(self, state: ExecutionState, note: str | None = None) -> None:
        if self.finished:
            return
        if note:
            self.add_note(note)
        self.state = state
        self.finished_at = time.time()
        for waiter in self._waiters:
            _settle(waiter, True)
        self._waiters.clear()

    async def wait(self, timeout: float | None) -> bool:
        """Wait until finished or ``timeout`` seconds (None = forever); True when finished.

        One future per reader, settled by ``finish`` or by its deadline: the reader resumes on
        the next turn of the loop (an ``Event`` under ``wait_for`` and ``shield`` took three,
        on the path of every reply). Cancelling the reader cancels only its own future.
        """
        if self.finished:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        deadline = loop.call_later(timeout, _settle, waiter, False) if timeout is not None else None
        try:
            return await waiter
        finally:
            if deadline is not None:
                deadline.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    # -- output handling (called per iopub message) --------------------------------------
    def _admit(self, size: int) -> bool:
        """Apply the per-execution recording cap; the kernel keeps running past it."""
        # Once past the cap, everything after is dropped, small messages included, so the
        # record stays a prefix of the output with the note at its end.
        if self.dropped_bytes or self.recorded_bytes + size > self.cap:
            if self.dropped_bytes == 0:
                self._log("note", f"[output past {self.cap:,} bytes is not recorded]")
            self.dropped_bytes += size
            return False
        self.recorded_bytes += size
        return True

    cap: int = 2_000_000

    def _log(self, kind: Any, text: str, data: dict[str, Any] | None = None) -> None:
        self.events.append(OutputEvent(len(self.events), kind, text, data))

    def _apply_pending_clear(self) -> None:
        if self._clear_pending:
            self._clear_pending = False
            self.outputs = []

    def spill(self) -> None:
        """Let go of the recorded outputs (a finished execution, archived) and of its probes'
        requests and results (read by the observers when it finished)."""
        self.outputs, self.events, self.spilled = [], [], True
        self.expressions, self.expression_results = {}, {}

    def add_note(self, note: str) -> None:
        self.notes.append(note)
        self._log("note", f"[{note}]")

    def on_iopub(self, msg: dict[str, Any]) -> None:
        mtype = msg["header"]["msg_type"]
        content = msg.get("content", {})
        if mtype == "stream":
            text = content.get("text", "")
            if not self.dropped_bytes and self.recorded_bytes + len(text) > self.cap:
                # One message larger than what is left: keep its head, then the marker (as for
                # many small messages) rather than losing the whole message.
                room = max(0, self.cap - self.recorded_bytes)
                head, text = text[:room], text[room:]
                if head:
                    self.on_iopub({**msg, "content": {**content, "text": head}})
            if not self._admit(len(text)):
                return
            self._apply_pending_clear()
            name = content.get("name", "stdout")
            last = self.outputs[-1] if self.outputs else None
            if isinstance(last, StreamOutput) and last.name == name:
                last.chunks.append(text)
            else:
                self.outputs.append(StreamOutput(name, [text]))
            self._log("stream", strip_ansi(text), {"name": name})
        elif mtype in ("execute_result", "display_data"):
            data = content.get("data", {})
            size = sum(len(v) if isinstance(v, str) else 64 for v in data.values())
            plain = data.get("text/plain")
            room = self.cap - self.recorded_bytes
            if not self.dropped_bytes and size > room and isinstance(plain, str) and room > 0:
                # Too large as a whole: keep the head of its text form, then the marker.
                self.on_iopub({**msg, "content": {**content, "data": {"text/plain": plain[:room]}}})
            if not self._admit(size):
                return
            self._apply_pending_clear()
            out: dict[str, Any] = {
                "output_type": mtype,
                "data": data,
                "metadata": content.get("metadata", {}),
            }
            if mtype == "execute_result":
                out["execution_count"] = content.get("execution_count")
            self.outputs.append(RichOutput(out))
            text = data.get("text/plain", "")
            kind = "result" if mtype == "execute_result" else "display"
            self._log(
                kind, strip_ansi(text if isinstance(text, str) else "".join(text)), {"data": data}
            )
        elif mtype == "error":
            self._apply_pending_clear()
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": [strip_ansi(t) for t in content.get("traceback", [])],
            }
            self.outputs.append(
                RichOutput(
                    {
                        "output_type": "error",
                        "ename": self.error["ename"],
                        "evalue": self.error["evalue"],
                        "traceback": content.get("traceback", []),
                    }
                )
            )
            self._log("error", "\n".join(self.error["traceback"]))
        elif mtype == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self.outputs = []
            self._log("clear", "")
        elif mtype == "status":
            if content.get("execution_state") == "busy":
                if self.queued_behind and not self.acknowledged and self.started_at is not None:
                    self.started_at = time.time()  # the request ahead was answered first
                self.acknowledged = True
        elif mtype == "execute_input":
            self.execution_count = content.get("execution_count", self.execution_count)

    def on_reply(
        self,
        content: dict[str, Any],
        split: Callable[[dict[str, str], dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """``split`` maps the reply's user expressions back to ``expressions`` (probe_bundle)."""
        status = content.get("status")
        results = content.get("user_expressions") or {}
        self.expression_results = split(self.expressions, results) if split is not None else results
        if content.get("execution_count") is not None:
            self.execution_count = content["execution_count"]
        if status == "error" and self.error is None:
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": [strip_ansi(t) for t in content.get("traceback", [])],
            }
        if status == "aborted":
            self.add_note("aborted by the kernel")

    def outcome_after_idle(self) -> ExecutionState:
        if self.error is not None:
            ename = self.error.get("ename")
            if ename == "KeyboardInterrupt" or (
                ename == "CancelledError" and self.interrupt_requested
            ):
                return "interrupted"
            return "failed"
        if self.reply_lost and all(ev.kind == "note" for ev in self.events):
            # Nothing says the code ran: the kernel may have failed before running it (an
            # exception in its message handler ends a request with idle and no reply).
            self.add_note(
                "the kernel ended this request without a reply or any output: it may not have run; "
                "run it again"
            )
            return "lost"
        return "ok"

    # -- reading -----------------------------------------------------------------------------
    def nbformat_outputs(self) -> list[dict[str, Any]]:
        return [o.to_nbformat() for o in self.outputs]

    def notebook_outputs(self) -> list[dict[str, Any]]:
        """The outputs as the notebook saves them: past the cap, a last stderr stream says how
        much was not kept, where a person reading the notebook looks (as Jupyter's own output
        rate limit tells them in the output)."""
        outputs = self.nbformat_outputs()
        if self.dropped_bytes:
            note = (
                f"[output past {self.cap:,} bytes is not recorded: "
                f"{self.dropped_bytes:,} more were not kept]\n"
            )
            outputs.append({"output_type": "stream", "name": "stderr", "text": note})
        return outputs

    def text_since(self, cursor: int) -> tuple[str, int]:
        """Text of the events after ``cursor`` (streams verbatim, results as text/plain)."""
        parts: list[str] = []
        events = self.events[cursor:]
        for ev in events:
            if ev.kind == "stream":
                parts.append(ev.text)
            elif ev.kind in ("result", "display", "note", "error"):
                if parts and not parts[-1].endswith("\n"):
                    parts.append("\n")
                if ev.kind == "display" and not ev.text:
                    mimes = ", ".join(sorted((ev.data or {}).get("data", {})))
                    parts.append(f"[display: {mimes}]\n")
                elif ev.kind != "error":  # errors are rendered from self.error
                    parts.append(ev.text + "\n")
        return "".join(parts), len(self.events)

    def images_since(self, cursor: int) -> list[dict[str, Any]]:
        out = []
        for ev in self.events[cursor:]:
            if ev.kind in ("display", "result") and ev.data:
                for mime in ("image/png", "image/jpeg"):
                    payload = ev.data["data"].get(mime)
                    if payload:
                        out.append({"mime": mime, "data": payload, "seq": ev.seq})
        return out

    @property
    def duration(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or time.time()
        return end - self.started_at


def _settle(waiter: asyncio.Future[bool], finished: bool) -> None:
    if not waiter.done():
        waiter.set_result(finished)
