"""Each kernel's archival record: everything it executed, scratch included, kept on disk.

Layout under ``<project>/.ipykeep/kernels/<kernel_id>/``:

- ``record.jsonl``: one JSON line per finished execution, authored Markdown note or event (input,
  state, timing, outputs with large payloads replaced by artifact references);
- ``artifacts/<sha256-prefix>.<ext>``: content-addressed large outputs and images. The same
  bytes are stored once. Artifacts are addressed to agents as ``ipykeep://artifacts/<kid>/<name>``.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import json
import os
import re
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipykeep.kernel.execution import Execution
from ipykeep.platform.files import NO_INHERIT, write_all
from ipykeep.project.atomic import atomic_write_bytes, atomic_write_text
from ipykeep.project.layout import private_dir
from ipykeep.project.notebook import from_dict, new_code_cell, new_markdown_cell, new_notebook
from ipykeep.project.stored import ARTIFACT_URI_PREFIX, MIME_SUFFIX

LARGE_TEXT = 20_000  # characters of one output kept inline in the record

_NUMBERED = re.compile(r"c([1-9][0-9]{0,17})")


class HandleOffsets:
    """Handle -> offset of its line in the record, for every execution a daemon archived.

    Kept for the kernel's life (a read by handle finds the entry), so it is compact: handles are
    ``c<N>``, so their numbers and offsets sit in two arrays of 8-byte integers, sorted by
    number and searched by bisection (16 bytes an execution, where a dict of strings to ints
    took about 120). Executions are archived nearly in order (a subshell's call may finish
    before the cell it overtook), so an insertion lands at or near the end. A handle of another
    form goes to a small dict.
    """

    def __init__(self) -> None:
        self._numbers = array("q")
        self._offsets = array("q")
        self._others: dict[str, int] = {}

    def __setitem__(self, handle: str, offset: int) -> None:
        m = _NUMBERED.fullmatch(handle)
        if m is None:
            self._others[handle] = offset
            return
        number = int(m.group(1))
        i = bisect.bisect_left(self._numbers, number)
        if i < len(self._numbers) and self._numbers[i] == number:
            self._offsets[i] = offset  # archived again: its latest line
        else:
            self._numbers.insert(i, number)
            self._offsets.insert(i, offset)

    def get(self, handle: str) -> int | None:
        m = _NUMBERED.fullmatch(handle)
        if m is None:
            return self._others.get(handle)
        number = int(m.group(1))
        i = bisect.bisect_left(self._numbers, number)
        if i < len(self._numbers) and self._numbers[i] == number:
            return self._offsets[i]
        return None

    def __contains__(self, handle: object) -> bool:
        return isinstance(handle, str) and self.get(handle) is not None


@dataclass(frozen=True)
class Artifact:
    path: Path
    uri: str


class KernelArchive:
    def __init__(self, kernel_dir: Path, kernel_id: str) -> None:
        self.dir = private_dir(kernel_dir)
        self.kernel_id = kernel_id
        self.artifacts = self.dir / "artifacts"
        self.record = self.dir / "record.jsonl"
        #: handle -> offset of its line in the record (this daemon's executions)
        self.offsets = HandleOffsets()

    def mark_closed(self, reason: str, notebook: Path | None) -> None:
        """Leave ``closed.json``, from which a later daemon tells why this kernel id is gone."""
        info = {
            "kernel_id": self.kernel_id,
            "reason": reason,
            "closed_at": time.time(),
            "notebook": str(notebook) if notebook else None,
        }
        with contextlib.suppress(OSError):
            atomic_write_text(self.dir / "closed.json", json.dumps(info), mode=0o600)

    def store(self, payload: bytes, mime: str) -> Artifact:
        digest = hashlib.sha256(payload).hexdigest()[:24]
        name = digest + MIME_SUFFIX.get(mime, ".bin")
        private_dir(self.artifacts)
        path = self.artifacts / name
        if not path.exists():
            atomic_write_bytes(path, payload, mode=0o600)
        return Artifact(path, f"{ARTIFACT_URI_PREFIX}{self.kernel_id}/{name}")

    def store_text(self, text: str) -> Artifact:
        return self.store(text.encode("utf-8"), "text/plain")

    def _compact(self, output: dict[str, Any]) -> dict[str, Any]:
        out = dict(output)
        if out.get("output_type") == "stream" and len(out.get("text", "")) > LARGE_TEXT:
            art = self.store_text(out["text"])
            out["text"] = out["text"][:2000]
            out["artifact"] = art.uri
        data = out.get("data")
        if isinstance(data, dict):
            new = {}
            for mime, value in data.items():
                text = (
                    value
                    if isinstance(value, str)
                    else "".join(value)
                    if isinstance(value, list)
                    else None
                )
                if mime.startswith("image/") and mime != "image/svg+xml" and isinstance(text, str):
                    art = self.store(base64.b64decode(text), mime)
                    new[mime] = {"artifact": art.uri}
                elif isinstance(text, str) and len(text) > LARGE_TEXT:
                    art = self.store(text.encode(), mime)
                    new[mime] = {"artifact": art.uri}
                else:
                    new[mime] = value
            out["data"] = new
        return out

    def append_execution(self, ex: Execution) -> None:
        entry = {
            "type": "execution",
            "handle": ex.handle,
            "kind": ex.kind,
            "cell_id": ex.cell_id,
            "code": ex.code,
            "state": ex.state,
            "execution_count": ex.execution_count,
            "started_at": ex.started_at,
            "finished_at": ex.finished_at,
            "outputs": [self._compact(o) for o in ex.nbformat_outputs()],
            "notes": ex.notes,
        }
        self.offsets[ex.handle] = self._append(entry)

    def execution_entry(self, handle: str) -> dict[str, Any] | None:
        """The record's entry of an execution this daemon archived (None: not there)."""
        offset = self.offsets.get(handle)
        if offset is None:
            return None
        with open(self.record, "rb") as fh:
            fh.seek(offset)
            entry: dict[str, Any] = json.loads(fh.readline())
        return entry if entry.get("handle") == handle else None

    def resolve(self, uri: str, mime: str) -> str:
        """An artifact's content, as the record's output it replaced held it."""
        return self._inline(uri, mime)

    def append_markdown(self, source: str) -> dict[str, Any]:
        entry = {"type": "markdown", "source": source, "at": time.time()}
        self._append(entry)
        return entry

    def append_event(self, event: str, **details: Any) -> None:
        """An event of the kernel's life that is not an execution (a package installed)."""
        self._append({"type": "event", "event": event, "at": time.time(), **details})

    def _append(self, entry: dict[str, Any]) -> int:
        """Append one line (the file owner-only); returns its offset."""
        line = (json.dumps(entry, default=str) + "\n").encode("utf-8")
        # Plain descriptor calls: a file object costs more than the write on a quick call's path.
        fd = os.open(self.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NO_INHERIT, 0o600)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, line)
        finally:
            os.close(fd)
        return offset

    def entries(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [
            json.loads(line)
            for line in self.record.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]

    def to_notebook(self) -> Any:
        """The record as an nbformat 4.5 notebook (for viewing a scratch kernel's work)."""
        nb = new_notebook()
        for entry in self.entries():
            if entry["type"] == "event":  # not a cell: it is in record.jsonl
                continue
            if entry["type"] == "markdown":
                nb.cells.append(new_markdown_cell(entry["source"]))
                continue
            cell = new_code_cell(entry["code"], execution_count=entry.get("execution_count"))
            for out in entry.get("outputs", []):
                out = dict(out)
                out.pop("artifact", None)
                if isinstance(out.get("data"), dict):
                    out["data"] = {
                        m: (
                            self._inline(v["artifact"], m)
                            if isinstance(v, dict) and "artifact" in v
                            else v
                        )
                        for m, v in out["data"].items()
                    }
                cell.outputs.append(from_dict(out))
            nb.cells.append(cell)
        return nb

    def _inline(self, uri: str, mime: str) -> str:
        path = self.artifacts / uri.rsplit("/", 1)[-1]
        payload = path.read_bytes()
        if mime.startswith("image/") and mime != "image/svg+xml":
            return base64.b64encode(payload).decode()
        return payload.decode("utf-8", "replace")
