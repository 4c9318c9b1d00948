"""Which finished executions keep their output in the daemon's memory: per kernel, the latest
ones within a count and a byte budget; the others are read back from the kernel's archive.

Every finished execution is in the archive (``archive.py``: ``record.jsonl`` and its
artifacts) before it is handed here, so letting go of its outputs loses nothing: a read of a
spilled execution rebuilds them from its archived entry, large outputs included.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ipykeep.engine.archive import KernelArchive
from ipykeep.kernel.execution import Execution, strip_ansi

#: Spilled executions whose records (handle, code, state, times: under 1 KB each) stay in the
#: daemon's memory; older ones leave it too, and a read by handle rebuilds them from the
#: archive (``restored``). Kept for the life of the kernel, they were the daemon's steady
#: growth per call in a long session.
KEPT_RECORDS = 1000


@dataclass
class OutputRetention:
    """Per kernel: the finished executions still holding their outputs, oldest first."""

    kept: OrderedDict[str, Execution] = field(default_factory=OrderedDict)
    held_bytes: int = 0
    #: handles of the executions spilled so far, oldest first (``forget``)
    spilled: deque[str] = field(default_factory=deque)

    def keep(self, executions: Iterable[Execution], max_records: int, max_bytes: int) -> None:
        """Count ``executions`` (finished and archived); spill the oldest past the budget."""
        for ex in executions:
            if ex.spilled or ex.handle in self.kept:
                continue
            self.kept[ex.handle] = ex
            self.held_bytes += ex.recorded_bytes
        while self.kept and (len(self.kept) > max_records or self.held_bytes > max_bytes):
            _, oldest = self.kept.popitem(last=False)
            self.held_bytes -= oldest.recorded_bytes
            oldest.spill()
            self.spilled.append(oldest.handle)

    def forget(
        self,
        executions: dict[str, Execution],
        keep: Callable[[], set[str]],
        max_records: int | None = None,
    ) -> None:
        """Drop the records of the oldest spilled executions past ``max_records`` from
        ``executions`` (``KEPT_RECORDS`` unless given), except those ``keep`` names (each cell's
        latest run). Done once twice as many have gathered, so the cost is spread over the calls."""
        limit = KEPT_RECORDS if max_records is None else max_records
        if len(self.spilled) <= 2 * limit:
            return
        kept = keep()
        while len(self.spilled) > limit:
            handle = self.spilled.popleft()
            if handle not in kept:
                executions.pop(handle, None)


def from_archive(archive: KernelArchive, ex: Execution) -> Execution:
    """A spilled execution with its outputs as the archive has them (a copy: the daemon's own
    record stays spilled). Without an archived entry, the copy has no output but a note."""
    copy = Execution(
        handle=ex.handle,
        kernel_id=ex.kernel_id,
        code=ex.code,
        kind=ex.kind,
        cell_id=ex.cell_id,
        state=ex.state,
        execution_count=ex.execution_count,
        started_at=ex.started_at,
        finished_at=ex.finished_at,
    )
    copy.cap = max(ex.cap, ex.recorded_bytes) + 1
    try:
        entry = archive.execution_entry(ex.handle)
    except (OSError, ValueError):
        entry = None
    if entry is None:
        copy.add_note("its output is no longer in memory, and the archive does not have it")
        copy.error = ex.error
        return copy
    for output in entry.get("outputs", []):
        copy.on_iopub(_as_message(archive, output))
    copy.error = ex.error
    if ex.dropped_bytes:
        copy.dropped_bytes = ex.dropped_bytes
        copy.add_note(f"output past {ex.cap:,} bytes is not recorded")
    return copy


def restored(archive: KernelArchive, kernel_id: str, handle: str) -> Execution | None:
    """The record of an execution that left memory (``OutputRetention.forget``), rebuilt from
    its archived entry, spilled (its outputs are read from the archive too); None when the
    archive has no such execution."""
    try:
        entry = archive.execution_entry(handle)
    except (OSError, ValueError):
        return None
    if entry is None:
        return None
    ex = Execution(
        handle=handle,
        kernel_id=kernel_id,
        code=str(entry.get("code") or ""),
        kind=entry.get("kind") or "scratch",
        cell_id=entry.get("cell_id"),
        state=entry.get("state") or "ok",
        execution_count=entry.get("execution_count"),
        started_at=entry.get("started_at"),
        finished_at=entry.get("finished_at"),
        notes=list(entry.get("notes") or []),
    )
    for output in entry.get("outputs", []):
        if output.get("output_type") == "error":
            ex.error = {
                "ename": output.get("ename", ""),
                "evalue": output.get("evalue", ""),
                "traceback": [strip_ansi(t) for t in output.get("traceback", [])],
            }
    ex.spilled = True
    return ex


def _as_message(archive: KernelArchive, output: dict[str, Any]) -> dict[str, Any]:
    """An archived nbformat output as the iopub message it came from."""
    kind = output.get("output_type", "stream")
    content = dict(output)
    if kind == "stream" and "artifact" in output:
        content["text"] = archive.resolve(output["artifact"], "text/plain")
    data = output.get("data")
    if isinstance(data, dict):
        content["data"] = {
            mime: archive.resolve(value["artifact"], mime)
            if isinstance(value, dict) and "artifact" in value
            else value
            for mime, value in data.items()
        }
    return {"header": {"msg_type": kind}, "content": content}
