"""Versioned edits of one notebook cell (replace, insert, delete, move); stale ones refused.

A cell's *version* is a hash of its exact source (``cell_version``). An edit names the cell it
changes and the version it was based on; when the cell's source is no longer that version, the
edit is refused with ``StaleCellVersionError``, whose message carries the cell's current source
and whose details carry its current version, so the caller can retry against it. Exact source,
not the normalized one staleness uses: a comment another editor added is still their edit.

``apply_edit`` changes an nbformat node in memory (the one rule, whoever holds the document);
``edit_notebook_file`` applies it to the ``.ipynb`` on disk through
``notebook.rewrite_notebook``: re-read, version checked against that very read, validated,
replaced atomically only if nobody saved in between (else checked and applied again).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ipykeep.api.bounding import bound_text
from ipykeep.api.errors import StaleCellVersionError, UnknownCellError, UsageError
from ipykeep.project.notebook import new_code_cell, new_markdown_cell, rewrite_notebook

EditAction = Literal["replace", "insert", "delete", "move"]
CellType = Literal["code", "markdown"]

#: Hex digits of a version: enough that two sources of one cell never share one by chance.
VERSION_DIGITS = 12
#: How much of the current source a refusal carries (head and tail beyond it).
REFUSAL_SOURCE_CHARS = 4000

_LIST_HINT = "list the cells with their ids and versions: list_cells / `ipykeep status`"


def cell_version(source: str) -> str:
    """The version of a cell whose source is ``source`` (SHA-256 of the exact text, cut)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:VERSION_DIGITS]


@dataclass(frozen=True)
class CellEdit:
    """One edit. ``cell_id`` and ``version`` name the cell changed (replace, delete, move);
    ``source`` is the new text (replace, insert); ``after``/``before`` place the cell (insert:
    default at the end; move: one of them is needed)."""

    action: EditAction
    cell_id: str | None = None
    version: str | None = None
    source: str | None = None
    cell_type: CellType = "code"
    after: str | None = None
    before: str | None = None

    def __post_init__(self) -> None:
        # Every shape rule here, so each front end's bad call gets the same message.
        if self.after is not None and self.before is not None:
            raise UsageError(
                "give after or before, not both", hint="name one neighbour of the cell"
            )
        if self.action == "insert":
            if self.source is None:
                raise UsageError("insert needs source", hint="pass the new cell's source")
            return
        if self.cell_id is None:
            raise UsageError(f"{self.action} needs cell_id", hint=_LIST_HINT)
        if self.action == "replace" and self.source is None:
            raise UsageError("replace needs source", hint="pass the cell's new source")
        if self.action == "move" and self.after is None and self.before is None:
            raise UsageError(
                "move needs after or before", hint="name the cell it goes after (or before)"
            )
        if self.action in ("delete", "move") and self.source is not None:
            raise UsageError(f"{self.action} takes no source", hint="leave source out")


@dataclass(frozen=True)
class EditOutcome:
    """What an edit did: the cell it made or changed, its version and place now (a deleted
    cell has neither), and the file's new content hash when it was written."""

    cell_id: str
    version: str | None
    index: int | None
    content_hash: str | None = None
    repairs: tuple[str, ...] = ()


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _find(cells: list[Any], ref: str, name: str) -> int:
    """A cell's position by id, or by 0-based index (ids win over digits, as everywhere)."""
    for i, cell in enumerate(cells):
        if cell.get("id") == ref:
            return i
    if ref.isdigit() and int(ref) < len(cells):
        return int(ref)
    raise UnknownCellError(f"no cell {ref!r} in {name}", hint=_LIST_HINT)


def check_version(cell: Any, given: str | None, name: str) -> None:
    """Refuse an edit of ``cell`` based on ``given`` when its source is another version now."""
    current = _source(cell)
    now = cell_version(current)
    if given == now:
        return
    shown = bound_text(current, REFUSAL_SOURCE_CHARS).text
    said = f"was based on version {given}" if given else "gave no version"
    raise StaleCellVersionError(
        f"edit of cell {cell.get('id')} in {name} refused: it {said}, the cell is at version "
        f"{now}; its source now:\n{shown}",
        hint=f"apply your change to this source and retry with version={now}",
        details={"cell_id": cell.get("id"), "version": now},
    )


def apply_edit(nb: Any, edit: CellEdit, name: str) -> EditOutcome:
    """Apply ``edit`` to the notebook node ``nb`` in place (after checking its version)."""
    cells: list[Any] = nb.cells
    if edit.action == "insert":
        assert edit.source is not None
        made = (
            new_markdown_cell(edit.source)
            if edit.cell_type == "markdown"
            else new_code_cell(edit.source)
        )
        cells.insert(_place(cells, edit, name, default=len(cells)), made)
        return _outcome(cells, str(made["id"]))
    pos = _find(cells, str(edit.cell_id), name)
    cell = cells[pos]
    check_version(cell, edit.version, name)
    cell_id = str(cell.get("id"))
    if edit.action == "replace":
        cell["source"] = edit.source
        return _outcome(cells, cell_id)
    if edit.action == "delete":
        del cells[pos]
        return EditOutcome(cell_id, None, None)
    del cells[pos]
    try:
        cells.insert(_place(cells, edit, name, default=pos), cell)
    except UnknownCellError:
        cells.insert(pos, cell)  # the node stays as it was when the anchor is unknown
        raise
    return _outcome(cells, cell_id)


def _place(cells: list[Any], edit: CellEdit, name: str, *, default: int) -> int:
    if edit.after is not None:
        return _find(cells, edit.after, name) + 1
    if edit.before is not None:
        return _find(cells, edit.before, name)
    return default


def _outcome(cells: list[Any], cell_id: str) -> EditOutcome:
    for i, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return EditOutcome(cell_id, cell_version(_source(cell)), i)
    raise AssertionError(f"edited cell {cell_id} is gone")


def edit_notebook_file(path: Path | str, edit: CellEdit) -> EditOutcome:
    """Apply ``edit`` to the notebook file: checked against the bytes it replaces, atomically."""
    path = Path(path).resolve()
    done: list[EditOutcome] = []

    def change(nb: Any) -> bool:
        done[:] = [apply_edit(nb, edit, path.name)]
        return True

    rewrite = rewrite_notebook(
        path, change, what="cell edits", kept="the notebook was left as it was"
    )
    outcome = done[0]
    return EditOutcome(
        outcome.cell_id,
        outcome.version,
        outcome.index,
        content_hash=rewrite.content_hash,
        repairs=tuple(rewrite.repairs),
    )
