"""A three-way merge of notebook cells keyed by cell id: a file write into the live document.

``base`` is the notebook as the file last held it (what the shared document last loaded or
saved), ``theirs`` the file as a file tool has just written it, ``ours`` the live document with
the person's unsaved typing. Per cell and per part (source, outputs with the execution count,
metadata, type, attachments) a side's change is taken when the other side left that part as it
was in ``base``; cells inserted, deleted or moved on one side are inserted, deleted or moved.
A file tool reads, changes and writes back the whole notebook, and the server may have saved in
between: a source (or an order of cells) as the file held it moments before ``base``
(``earlier``) is a copy the tool wrote back, not a change of its own.

A source changed on both sides to different texts is a conflict: changed in the live document
since ``base``, or changed by a save of the document moments ago in a way the file's source does
not keep (the tool read the cell before that save). The live source stays, and a
markdown note cell above it carries the file's source (in its text and in its metadata, under
``ipykeep.conflict``). The same note records a cell the file deleted while the person edited it
(kept) and a cell the person deleted while the file changed it (left deleted). Nothing either
side wrote is dropped without a note.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: The cell parts merged one by one; outputs and the execution count change together (a run).
_PARTS: tuple[tuple[str, ...], ...] = (
    ("source",),
    ("outputs", "execution_count"),
    ("metadata",),
    ("cell_type",),
    ("attachments",),
)

#: Marks a version of the file's history the document wrote (a save), not a file tool.
SAVED = "saved"

#: Where a note cell keeps what it records (``Conflict`` fields), in its cell metadata.
NOTE_KEY = "ipykeep"

ConflictKind = Literal["both_changed", "deleted_in_file", "deleted_in_document"]


@dataclass(frozen=True)
class Conflict:
    cell_id: str
    kind: ConflictKind
    #: the file's source of the cell ("" when the file deleted it)
    file_source: str
    #: the id of the note cell that shows it in the document
    note_id: str


@dataclass
class Merged:
    #: the merged notebook's cells, in order (note cells included)
    cells: list[dict[str, Any]]
    #: the merged notebook metadata
    metadata: dict[str, Any]
    conflicts: list[Conflict] = field(default_factory=list)


def mergeable(*notebooks: dict[str, Any]) -> bool:
    """Cells can be matched only by id (nbformat 4.5): without ids there is nothing to key on."""
    return all(all(c.get("id") for c in nb.get("cells", [])) for nb in notebooks)


def merge_notebooks(
    base: dict[str, Any],
    theirs: dict[str, Any],
    ours: dict[str, Any],
    earlier: Sequence[dict[str, Any]] = (),
) -> Merged:
    """``earlier``: what the file held before ``base`` (oldest first; ids, types and sources
    are enough), each marked ``saved`` when the document wrote it (``base`` too). A file tool
    that read one of those and wrote it back changed nothing of what it copied: a cell's source
    (or the cells' order) as one of them had it is not a change."""
    versions = (*earlier, base)
    history = [_by_id(nb) for nb in versions]
    b, t, o = history[-1], _by_id(theirs), _by_id(ours)
    kept: dict[str, dict[str, Any]] = {}
    conflicts: list[Conflict] = []
    for cid in [*o, *(c for c in t if c not in o)]:
        seen = [
            {**h[cid], SAVED: nb.get(SAVED, False)} for h, nb in zip(history, versions) if cid in h
        ]
        always = len(seen) == len(history)
        merged, conflict = _merge_cell(cid, b.get(cid), seen, always, t.get(cid), o.get(cid))
        if merged is not None:
            kept[cid] = merged
        if conflict is not None:
            conflicts.append(conflict)
    placed = set(kept) | {c.cell_id for c in conflicts if c.kind == "deleted_in_document"}
    order = _order([list(h) for h in history], list(t), list(o), placed)
    notes = {c.cell_id: c for c in conflicts}
    cells: list[dict[str, Any]] = []
    for cid in order:
        if cid in notes:
            cells.append(_note_cell(notes[cid]))
        if cid in kept:
            cells.append(kept[cid])
    return Merged(
        cells=cells,
        metadata=_notebook_metadata(base, theirs, ours),
        conflicts=conflicts,
    )


def canonical(value: Any) -> Any:
    """A cell part as compared: multi-line strings stored as lists (nbformat) joined, so the
    file's form and the shared document's form of one value compare equal."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "".join(value)
        return [canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the shared document keeps numbers as floats
    return value


#: What the shared document fills in when a notebook's metadata lacks it (jupyter_ydoc).
_DOCUMENT_DEFAULTS = {
    "language_info": {"name": ""},
    "kernelspec": {"name": "", "display_name": ""},
}


def _notebook_metadata(
    base: dict[str, Any], theirs: dict[str, Any], ours: dict[str, Any]
) -> dict[str, Any]:
    """The file's notebook metadata when only the file changed it, else the live one; the
    placeholders the document added itself are no change of the person's."""
    live: dict[str, Any] = ours.get("metadata", {})
    b, t = canonical(base.get("metadata", {})), canonical(theirs.get("metadata", {}))
    person = canonical({k: v for k, v in live.items() if _DOCUMENT_DEFAULTS.get(k) != v})
    if t != b and person == b:
        return dict(theirs.get("metadata", {}))
    return live


def _by_id(nb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c["id"]): dict(c) for c in nb.get("cells", [])}


def _part(cell: dict[str, Any], keys: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(canonical(cell.get(k)) for k in keys)


def _changed(base: dict[str, Any], other: dict[str, Any]) -> bool:
    return any(_part(base, keys) != _part(other, keys) for keys in _PARTS)


def _source_of(cell: dict[str, Any]) -> str:
    return str(canonical(cell.get("source")) or "")


def _merge_cell(
    cid: str,
    base: dict[str, Any] | None,
    seen: list[dict[str, Any]],
    always: bool,
    theirs: dict[str, Any] | None,
    ours: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, Conflict | None]:
    """One cell; ``seen``: its versions in the file's recent history (``base``'s last),
    ``always``: whether every one of those held it."""
    note_id = f"ipykeep-note-{uuid.uuid4().hex[:12]}"
    if ours is None:
        assert theirs is not None
        if not seen:  # inserted in the file
            return theirs, None
        if all(_source_of(theirs) != _source_of(v) for v in seen):
            # The person deleted a cell the file changed: it stays deleted, the file's text noted.
            return None, Conflict(cid, "deleted_in_document", _source_of(theirs), note_id)
        return None, None  # deleted in the document, not changed in the file
    if theirs is None:
        if base is None or not always:  # inserted in the document after the file tool read it
            return ours, None
        if _changed(base, ours):
            # The file deleted a cell the person edited: it is kept, the deletion noted.
            return ours, Conflict(cid, "deleted_in_file", "", note_id)
        return None, None  # deleted in the file, unchanged in the document
    if canonical(theirs) == canonical(ours):  # most cells: the same on both sides
        return dict(ours), None
    if base is None:  # one id inserted on both sides: the live cell stands for the base
        base, seen = ours, [ours]
    t_src, o_src = _source_of(theirs), _source_of(ours)
    file_wrote_source = all(t_src != _source_of(v) for v in seen)
    if file_wrote_source and (
        o_src not in (_source_of(base), t_src) or not _keeps_last_saved_change(seen, t_src)
    ):
        # Both rewrote the source: the live cell stays whole (the file's outputs are of the
        # file's source), and the file's source goes into the note.
        return dict(ours), Conflict(cid, "both_changed", t_src, note_id)
    merged = dict(ours)
    for keys in _PARTS:
        # Sources are compared with every recent version, the other parts with the base.
        changed = (
            file_wrote_source if keys == ("source",) else _part(theirs, keys) != _part(base, keys)
        )
        if changed and _part(ours, keys) == _part(base, keys):
            for k in keys:
                if k in theirs:
                    merged[k] = theirs[k]
                else:
                    merged.pop(k, None)
    return merged, None


def _keeps_last_saved_change(seen: list[dict[str, Any]], theirs: str) -> bool:
    """Whether the file's source still holds the document's last saved change of the cell in
    the recent history (its added lines there, none of its removed ones): a file tool that read
    the cell before that save and rewrote it would drop it. Lines, not characters: a doubt is a
    conflict, which loses nothing."""
    for before, after in zip(reversed(seen[:-1]), reversed(seen[1:])):
        old, new = _source_of(before).splitlines(), _source_of(after).splitlines()
        if old == new:
            continue
        if not after[SAVED]:
            return True  # the cell's last change was a file write
        lines = set(theirs.splitlines())
        return set(new) - set(old) <= lines and not (set(old) - set(new)) & lines
    return True


def _order(
    history: list[list[str]], theirs: list[str], ours: list[str], keep: set[str]
) -> list[str]:
    """The live order, unless only the file reordered the cells both sides have (into an order
    none of the recent versions had); the cells only the other side has go after the cell they
    follow there."""

    def reordered(side: list[str], version: list[str]) -> bool:
        common = [c for c in version if c in side and c in ours and c in theirs]
        return [c for c in side if c in set(common)] != common

    theirs_moved = all(reordered(theirs, h) for h in history)
    ours_moved = reordered(ours, history[-1])
    primary, secondary = (theirs, ours) if theirs_moved and not ours_moved else (ours, theirs)
    out = [c for c in primary if c in keep]
    for i, cid in enumerate(secondary):
        if cid not in keep or cid in out:
            continue
        before = next((secondary[j] for j in range(i - 1, -1, -1) if secondary[j] in out), None)
        out.insert(out.index(before) + 1 if before is not None else 0, cid)
    return out


_NOTE_TEXT: dict[ConflictKind, str] = {
    "both_changed": (
        "**The file's version of the cell below was not applied.** The file was rewritten while "
        "this cell had changes of its own here; they are kept. The file's version:"
    ),
    "deleted_in_file": (
        "**The file deleted the cell below; it is kept**, since it had changes of its own here."
    ),
    "deleted_in_document": (
        "**A cell deleted here was changed in the file; it stays deleted.** The file's version:"
    ),
}


def _note_cell(conflict: Conflict) -> dict[str, Any]:
    text = _NOTE_TEXT[conflict.kind]
    if conflict.file_source:
        fence = "`" * max(3, _longest_backtick_run(conflict.file_source) + 1)
        text += f"\n\n{fence}\n{conflict.file_source}\n{fence}"
    text += "\n\nDelete this note once resolved."
    return {
        "id": conflict.note_id,
        "cell_type": "markdown",
        "source": text,
        "metadata": {
            NOTE_KEY: {
                "conflict": {
                    "cell_id": conflict.cell_id,
                    "kind": conflict.kind,
                    "file_source": conflict.file_source,
                }
            }
        },
    }


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest
