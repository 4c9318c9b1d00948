"""Reading the user's notebook, and writing outputs back without losing anybody's edits.

The ``.ipynb`` belongs to the user. It is re-read from disk for every command. Outputs go back
once per batch by an atomic replace that merges by cell id: the file is read again just before
the replace, only code cells whose source is still exactly what ran get outputs, and if the file
changed between that read and the replace the merge is redone. Cells added, deleted, moved or
edited by someone else stay as they are.

Notebooks below nbformat 4.5, or with missing or duplicate cell ids, are repaired (ids added,
minor version 5) by ipykeep's first write and the user is told; until then they are read with
ids derived from the cell position, so commands stay consistent between reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import nbformat
from nbformat import NotebookNode

from ipykeep.api.errors import (
    NotebookConflictError,
    NotebookInvalidError,
    NotebookWriteError,
    UnknownCellError,
)
from ipykeep.platform import locks
from ipykeep.platform.processes import pid_alive
from ipykeep.project.atomic import TEMP_SUFFIX, temp_writer_pid, write_temp_beside

CELL_ID_RE = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


# nbformat ships type information but leaves these functions unannotated; the names below say
# what they take and give. A NotebookNode is a dict with attribute access: its fields are Any.
class _Writes(Protocol):
    def __call__(
        self, nb: NotebookNode, *, capture_validation_error: dict[str, Any] | None = None
    ) -> str: ...


class _NewCodeCell(Protocol):
    def __call__(self, source: str = "", *, execution_count: int | None = None) -> NotebookNode: ...


from_dict: Callable[[Mapping[str, Any]], NotebookNode] = nbformat.from_dict
convert: Callable[[NotebookNode, int], NotebookNode] = nbformat.convert
writes: _Writes = nbformat.writes
new_markdown_cell: Callable[[str], NotebookNode] = nbformat.v4.new_markdown_cell
new_code_cell: _NewCodeCell = nbformat.v4.new_code_cell
new_notebook: Callable[[], NotebookNode] = nbformat.v4.new_notebook


@dataclass(frozen=True)
class Cell:
    cell_id: str
    index: int
    cell_type: str
    source: str
    #: the cell's ``metadata.tags`` (e.g. ``raises-exception``, the nbval/nbsphinx convention)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotebookSnapshot:
    path: Path
    cells: tuple[Cell, ...]
    content_hash: str
    needs_repair: tuple[str, ...] = ()

    @property
    def code_cells(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.cell_type == "code")

    def by_id(self) -> dict[str, Cell]:
        return {c.cell_id: c for c in self.cells}

    def resolve(self, ref: str | int) -> Cell:
        """A cell by nbformat id, or by 0-based index among all cells (ids win over digits)."""
        key = str(ref)
        ids = self.by_id()
        if key in ids:
            return ids[key]
        if key.lstrip("-").isdigit():
            idx = int(key)
            if 0 <= idx < len(self.cells):
                return self.cells[idx]
            raise UnknownCellError(
                f"cell index {idx} is out of range: {self.path.name} has {len(self.cells)} cells "
                f"(0–{len(self.cells) - 1})",
                hint="use `ipykeep status` to list cells with their ids and indexes",
            )
        raise UnknownCellError(
            f"no cell with id {key!r} in {self.path.name}",
            hint="use `ipykeep status` to list cells with their ids and indexes",
        )


@contextlib.contextmanager
def directory_lock(path: Path | str) -> Iterator[None]:
    """Exclusive advisory lock on the directory holding ``path`` (no lock file is created on
    POSIX; Windows locks a file in it, ``ipykeep/platform/locks.py``).

    ipykeep's write-back and the Jupyter server's saves (``--serve``) both take it around
    their final check-and-replace, so neither can replace the file between the other's check
    and its rename.
    """
    with locks.directory_lock(os.path.dirname(os.path.abspath(path)) or "."):
        yield


#: What tells one version of a file from the next: an atomic replace gives a new inode, an
#: in-place write a new size or modification time (mtimes alone can tie: the clock that
#: stamps them ticks every few milliseconds).
FileIdentity = tuple[int, int, int, int]


def file_identity(path: Path | str) -> FileIdentity | None:
    """(device, inode, size, mtime in ns) of ``path``; None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def replace_file(
    path: Path | str,
    data: bytes,
    *,
    unchanged_since: bytes | None = None,
    still: FileIdentity | None = None,
    replaced: Callable[[FileIdentity], None] | None = None,
) -> bool:
    """Atomically give ``path`` the content ``data``; never a half-written file on disk.

    Writes a temporary file beside it (fsynced, with the target's mode), then renames it over
    the target under ``directory_lock``. With ``unchanged_since``, the target is replaced only
    if it still holds exactly those bytes; with ``still``, only if it is still that version
    (``file_identity``); both checked under the lock; returns whether it was replaced.
    ``replaced`` gets the identity of the version written (before anyone else can replace it).
    """
    path = os.fspath(path)
    tmp = write_temp_beside(path, data, fsync=True)
    try:
        with directory_lock(path):
            if unchanged_since is not None:
                with open(path, "rb") as current:
                    if current.read() != unchanged_since:
                        return False
            if still is not None and file_identity(path) != still:
                return False
            written = file_identity(tmp)
            os.replace(tmp, path)
            if replaced is not None and written is not None:
                replaced(written)
        tmp = ""
        return True
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


#: A temporary file this old was left by a write that was killed (a write takes well under it).
STALE_TEMP_SECONDS = 120.0


#: Notebooks whose directory held no temporary file of theirs at the last look. Such files are
#: left only by a writer that was killed, nearly always an earlier daemon, so the directory is
#: listed again only while some were there (a listing per write cost ~1–3 ms of every batch);
#: a newer daemon's first write looks again.
_NO_TEMPS: set[Path] = set()


def clean_stale_temps(path: Path) -> None:
    """Remove the temporary files of writes of ``path`` that were cut short: those whose
    writer (named in the file's name) is gone, at once, and any older than
    ``STALE_TEMP_SECONDS`` (a pid reused since, or a name without one)."""
    if path in _NO_TEMPS:
        return
    cutoff = time.time() - STALE_TEMP_SECONDS
    seen = False
    for tmp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        seen = True
        writer = temp_writer_pid(path.name, tmp.name)
        with contextlib.suppress(OSError):
            if (writer is not None and not pid_alive(writer)) or tmp.stat().st_mtime < cutoff:
                tmp.unlink()
    if not seen:
        _NO_TEMPS.add(path)


def _check_writable(path: Path, what: str, kept: str) -> None:
    """Refuse a notebook its owner made read-only, even where the rename would succeed."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return
    if not mode & 0o222:
        raise NotebookWriteError(
            f"{path} is read-only (mode {mode:o}); {what} were not written",
            hint="make it writable (chmod u+w)"
            + (" or start with --no-write-outputs" if what == "outputs" else "")
            + f"; {kept}",
        )


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_json(path: Path) -> tuple[dict[str, Any], bytes]:
    raw = _read_bytes(path)
    return _parse_json(raw, path), raw


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise NotebookInvalidError(
            f"notebook not found: {path}",
            hint="check the path; ipykeep binds to an existing .ipynb file",
        )
    if path.is_dir():
        raise NotebookInvalidError(
            f"{path} is a directory, not a notebook", hint="pass the path of an .ipynb file"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise NotebookInvalidError(
            f"cannot read {path}: {exc.strerror}", hint="check the file's permissions"
        ) from exc


def _parse_json(raw: bytes, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise NotebookInvalidError(
            f"{path} is nested too deeply to be a notebook",
            hint="pass a Jupyter .ipynb file; ipykeep did not change it",
        ) from None
    except UnicodeDecodeError as exc:
        raise NotebookInvalidError(
            f"{path} is not UTF-8 text", hint="is this really a .ipynb file?"
        ) from exc
    except json.JSONDecodeError as exc:
        raise NotebookInvalidError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint="fix the JSON (an editor's merge conflict or a partial write?); "
            "ipykeep did not change it",
        ) from exc
    if (
        not isinstance(data, dict)
        or "nbformat" not in data
        or ("cells" not in data and "worksheets" not in data)
    ):
        raise NotebookInvalidError(
            f"{path} is JSON but not a notebook (no 'nbformat' and 'cells')",
            hint="pass a Jupyter .ipynb file",
        )
    _check_shape(data, path)
    return data


def _check_shape(data: dict[str, Any], path: Path) -> None:
    """Refuse shapes nbformat's reader would crash on (before its schema can say why)."""
    if "cells" in data:
        cells = data["cells"]
        if not isinstance(cells, list):
            raise NotebookInvalidError(
                f"{path}: 'cells' is a {type(cells).__name__}, not a list",
                hint="fix the file; ipykeep did not change it",
            )
        for i, cell in enumerate(cells):
            if not isinstance(cell, dict):
                raise NotebookInvalidError(
                    f"{path}: cell {i} is a {type(cell).__name__}, not an object",
                    hint="fix the file; ipykeep did not change it",
                )


def _to_v4(data: dict[str, Any], path: Path) -> Any:
    try:
        nb = from_dict(data)
        if nb.get("nbformat") != 4:
            # nbformat's own converter (3 -> 4 upgrades worksheets, prompts, languages).
            nb = convert(nb, 4)
            if not isinstance(nb.get("cells"), list):
                raise ValueError("no cells after conversion")
            # The converter draws random ids; drop them so ids derive from positions as for any
            # notebook without ids (the same on every read, kept by the first write).
            for cell in nb.cells:
                cell.pop("id", None)
            nb["nbformat_minor"] = 4
    except RecursionError:
        raise NotebookInvalidError(
            f"{path} is nested too deeply to be a notebook", hint="pass a Jupyter .ipynb file"
        ) from None
    except Exception as exc:
        raise NotebookInvalidError(
            f"{path} cannot be read as nbformat 4: {exc}", hint="open and re-save it in Jupyter"
        ) from exc
    return nb


def _repair_ids(nb: Any) -> list[str]:
    """Give every cell a unique valid id; return what was repaired.

    New ids are derived from the cell's position (``cell-3``), so reading the same file twice
    gives the same ids, and the first write keeps them.
    """
    notes: list[str] = []
    if nb.get("nbformat_minor", 0) < 5:
        notes.append(
            f"upgraded from nbformat 4.{nb.get('nbformat_minor', 0)} to 4.5 (cell ids added)"
        )
        nb["nbformat_minor"] = 5
    seen: set[str] = set()
    # Every valid id some cell already has (later cells included): a repaired id must differ
    # from all of them, or the repair would create the duplicate it fixes.
    taken = {
        c.get("id")
        for c in nb.cells
        if isinstance(c.get("id"), str) and CELL_ID_RE.match(c.get("id"))
    }
    for index, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if isinstance(cid, str) and CELL_ID_RE.match(cid) and cid not in seen:
            seen.add(cid)
            continue
        new = f"cell-{index}"
        suffix = 0
        while new in seen or new in taken:
            suffix += 1
            new = f"cell-{index}-{suffix}"
        if cid is None:
            if not notes or "cell ids added" not in notes[0]:
                notes.append(f"cell {index} had no id; gave it {new!r}")
        else:
            notes.append(
                f"cell {index} had a {'duplicate' if cid in seen else 'malformed'} id {cid!r}; "
                f"gave it {new!r}"
            )
        cell["id"] = new
        seen.add(new)
    return notes


def _validate(nb: Any, path: Path) -> None:
    try:
        nbformat.validate(nb)
    except RecursionError:
        raise NotebookInvalidError(
            f"{path} is nested too deeply to be a notebook", hint="pass a Jupyter .ipynb file"
        ) from None
    except nbformat.ValidationError as exc:
        where = "/".join(str(p) for p in getattr(exc, "absolute_path", []) or [])
        raise NotebookInvalidError(
            f"{path} is not a valid notebook: {exc.message}" + (f" (at {where})" if where else ""),
            hint="open it in Jupyter to see the problem; ipykeep did not change it",
        ) from exc


def _tags(cell: Any) -> tuple[str, ...]:
    tags = (cell.get("metadata") or {}).get("tags") or ()
    return tuple(str(t) for t in tags) if isinstance(tags, (list, tuple)) else ()


def snapshot_of_cells(path: Path | str, cells: list[dict[str, Any]]) -> NotebookSnapshot:
    """A snapshot of cells held elsewhere (a shared document's live cells: ``id``,
    ``cell_type``, ``source``, ``tags``); its hash is of those cells, not of a file."""
    digest = content_hash(json.dumps(cells, sort_keys=True).encode("utf-8"))
    return NotebookSnapshot(
        path=Path(path).resolve(),
        cells=tuple(
            Cell(
                cell_id=str(c["id"]),
                index=i,
                cell_type=str(c.get("cell_type", "code")),
                source=str(c.get("source", "")),
                tags=tuple(str(t) for t in c.get("tags", ())),
            )
            for i, c in enumerate(cells)
        ),
        content_hash=digest,
    )


def read_notebook_node(path: Path | str) -> Any:
    """The notebook as an nbformat v4 node, ids repaired in memory (no validation, no snapshot)."""
    path = Path(path)
    data, _raw = _load_json(path)
    nb = _to_v4(data, path)
    _repair_ids(nb)
    return nb


#: The last snapshot read of each notebook, by its path, with the hash of the bytes it was read
#: from. Every command re-reads the file; when its bytes are the same, parsing and validating
#: them again (most of a 60-cell notebook's read, ~40% of a plan) would give the same snapshot.
_SNAPSHOTS: dict[Path, NotebookSnapshot] = {}


def read_notebook(path: Path | str) -> NotebookSnapshot:
    """Read and validate ``path``; ids are repaired in memory (deterministically) if needed."""
    path = Path(path).resolve()
    raw = _read_bytes(path)
    digest = content_hash(raw)
    cached = _SNAPSHOTS.get(path)
    if cached is not None and cached.content_hash == digest:
        return cached
    snap = _SNAPSHOTS[path] = _read_snapshot(path, raw, digest)
    return snap


def _read_snapshot(
    path: Path, raw: bytes | None = None, digest: str | None = None
) -> NotebookSnapshot:
    """Parse and validate the notebook afresh (from ``raw`` when the caller read it already)."""
    if raw is None:
        raw = _read_bytes(path)
    nb = _to_v4(_parse_json(raw, path), path)
    repairs = _repair_ids(nb)
    _validate(nb, path)
    return _snapshot(path, nb, digest or content_hash(raw), repairs)


def _snapshot(path: Path, nb: Any, digest: str, repairs: list[str]) -> NotebookSnapshot:
    cells = tuple(
        Cell(
            cell_id=c["id"],
            index=i,
            cell_type=c.get("cell_type", "code"),
            source=_source(c),
            tags=_tags(c),
        )
        for i, c in enumerate(nb.cells)
    )
    return NotebookSnapshot(
        path=path, cells=cells, content_hash=digest, needs_repair=tuple(repairs)
    )


@dataclass(frozen=True)
class CellOutputs:
    """What to write into one code cell: only if its source on disk is still ``source``."""

    source: str
    outputs: list[dict[str, Any]]
    execution_count: int | None


@dataclass
class WriteReport:
    written: bool = False
    updated: list[str] = field(default_factory=list)
    skipped_edited: list[str] = field(default_factory=list)
    skipped_missing: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    content_hash: str | None = None
    attempts: int = 0


def write_outputs(
    path: Path | str, updates: dict[str, CellOutputs], *, retries: int = 5
) -> WriteReport:
    """Merge ``updates`` into the notebook on disk by cell id, atomically.

    The file is parsed afresh for every attempt and compared byte for byte with what is on disk
    right before ``os.replace``; a change in between restarts the merge, so a concurrent save
    by an editor is never overwritten with stale content.
    """
    report = WriteReport()

    def merge(nb: Any) -> bool:
        by_id = {c.get("id"): c for c in nb.cells}
        report.updated, report.skipped_edited, report.skipped_missing = [], [], []
        for cell_id, upd in updates.items():
            cell = by_id.get(cell_id)
            if cell is None or cell.get("cell_type") != "code":
                report.skipped_missing.append(cell_id)
                continue
            if _source(cell) != upd.source:
                report.skipped_edited.append(cell_id)
                continue
            cell["outputs"] = [from_dict(o) for o in upd.outputs]
            cell["execution_count"] = upd.execution_count
            report.updated.append(cell_id)
        return bool(report.updated)

    done = rewrite_notebook(path, merge, what="outputs", retries=retries)
    report.attempts, report.repairs = done.attempts, done.repairs
    report.written, report.content_hash = done.written, done.content_hash
    return report


@dataclass(frozen=True)
class Rewrite:
    """What ``rewrite_notebook`` did."""

    written: bool
    content_hash: str | None
    repairs: list[str]
    attempts: int


#: What a failed rewrite tells the user stays safe.
_KEPT = "the results stay in ipykeep's record"


def rewrite_notebook(
    path: Path | str,
    change: Callable[[Any], bool],
    *,
    what: str,
    kept: str = _KEPT,
    retries: int = 5,
) -> Rewrite:
    """Apply ``change`` to the notebook on disk and replace it atomically, never over a save.

    Each attempt parses the file afresh, repairs ids (the same position-derived ids as
    ``read_notebook`` gives, so records made before the first write keep pointing at the same
    cells), and calls ``change(node)``; it returns whether there is anything to write (repairs
    alone are written too). The new bytes replace the file only if it still holds the bytes
    that attempt read (checked under the directory lock); otherwise the change is applied
    again to the newer file, so ``change`` must decide from the node it is given. ``what``
    names the change in errors (``outputs``); ``kept`` says where its content stays.
    """
    path = Path(path).resolve()
    clean_stale_temps(path)
    for attempt in range(1, retries + 1):
        data, raw = _load_json(path)
        nb = _to_v4(data, path)
        repairs = _repair_ids(nb)
        if not change(nb) and not repairs:
            return Rewrite(False, None, repairs, attempt)
        captured: dict[str, Any] = {}
        text = writes(nb, capture_validation_error=captured)  # validates once
        if "ValidationError" in captured:
            exc = captured["ValidationError"]
            raise NotebookInvalidError(
                f"{path}: merging {what} would make an invalid notebook ({exc.message}); "
                "nothing was written",
                hint=f"please report this; {kept}",
            )
        if not text.endswith("\n"):
            text += "\n"
        encoded = text.encode("utf-8")
        _check_writable(path, what, kept)
        try:
            replaced = replace_file(path, encoded, unchanged_since=raw)
        except OSError as exc:
            raise NotebookWriteError(
                f"{what} not written to {path}: {exc.strerror or exc}",
                hint=f"free disk space or make the notebook's directory writable; {kept}",
            ) from exc
        if not replaced:
            continue  # someone saved meanwhile: apply the change again to their version
        digest = content_hash(encoded)
        # what the next read_notebook would parse from these bytes (validated above)
        _SNAPSHOTS[path] = _snapshot(path, nb, digest, [])
        return Rewrite(True, digest, repairs, attempt)
    raise NotebookConflictError(
        f"{path} kept changing while {what} were written ({retries} attempts); "
        f"{what} were not written",
        hint=f"the notebook is being saved continuously by another program; {kept}",
    )
