"""The requests a session has taken and not yet answered, and where a dead daemon left them.

Every round of serving keeps a ``Ledger``: a session passes on to another process only when
it is empty (``stdio.py``). A daemon serving a session handed to it by ``ipykeep mcp-serve``
also writes each open request into an ``InflightTable``, a page of memory shared with that
``mcp-serve`` (an unlinked file whose descriptor came with the session): writing it costs no
system call on the request's path, and if the daemon dies ``mcp-serve`` reads there which
requests will never be answered and answers them itself, so the client is not left waiting.

Standard library and the SDK's id rule only.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
from collections.abc import Callable
from typing import Any

from mcp.shared.dispatcher import coerce_request_id

#: Requests the table holds at once (more are served, only not recorded) and bytes per slot.
SLOTS = 64
SLOT_BYTES = 256
_USED = b"\x01"


class InflightTable:
    """Fixed slots in a shared page: ``[id, method]`` of each open request, as JSON."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, SLOTS * SLOT_BYTES)

    @classmethod
    def create(cls) -> InflightTable:
        """A new, empty table in an unlinked file of this process (private to its owner)."""
        with tempfile.TemporaryFile(prefix="ipykeep-inflight-") as handle:
            fd = os.dup(handle.fileno())
        os.ftruncate(fd, SLOTS * SLOT_BYTES)
        return cls(fd)

    def put(self, rid: Any, method: str) -> int | None:
        record = json.dumps([rid, method], separators=(",", ":")).encode()
        if len(record) >= SLOT_BYTES:
            return None
        for slot in range(SLOTS):
            start = slot * SLOT_BYTES
            if self._map[start : start + 1] != _USED:
                self._map[start + 1 : start + SLOT_BYTES] = record.ljust(SLOT_BYTES - 1)
                self._map[start : start + 1] = _USED  # last: the record is whole once marked
                return slot
        return None

    def clear(self, slot: int) -> None:
        self._map[slot * SLOT_BYTES : slot * SLOT_BYTES + 1] = b"\x00"

    def held(self) -> list[tuple[Any, str]]:
        """The requests recorded as open, in slot order."""
        found = []
        for slot in range(SLOTS):
            start = slot * SLOT_BYTES
            if self._map[start : start + 1] == _USED:
                try:
                    rid, method = json.loads(bytes(self._map[start + 1 : start + SLOT_BYTES]))
                except ValueError:
                    continue
                found.append((rid, str(method)))
        return found

    def reset(self) -> None:
        self._map[:] = bytes(SLOTS * SLOT_BYTES)

    def close(self) -> None:
        self._map.close()
        os.close(self.fd)


class Ledger:
    """Requests taken and not yet answered in one round of serving."""

    def __init__(self, table: InflightTable | None = None) -> None:
        self._open: dict[Any, int | None] = {}
        self._table = table
        #: called when the last open request is answered (wakes a reader waiting for input)
        self.on_quiet: Callable[[], None] | None = None

    def opened(self, rid: Any, method: str) -> None:
        slot = self._table.put(rid, method) if self._table is not None else None
        self._open[coerce_request_id(rid)] = slot

    def closed(self, rid: Any) -> None:
        if rid is None:
            return
        key = coerce_request_id(rid)
        if key not in self._open:
            return
        slot = self._open.pop(key)
        if slot is not None and self._table is not None:
            self._table.clear(slot)
        if not self._open and self.on_quiet is not None:
            self.on_quiet()

    def quiet(self) -> bool:
        return not self._open
