"""``ipykeep edit-cell``, ``insert-cell``, ``delete-cell``, ``move-cell``: versioned cell edits
through the daemon's ``edit_cell``."""

from __future__ import annotations

import sys
from pathlib import Path

from ipykeep.api.editing import EDIT_CELL, EditCellResult
from ipykeep.cli.output import emit, kernel_target
from ipykeep.client.connection import connect


def _source(arg: str) -> str:
    return sys.stdin.read() if arg == "-" else arg


def _edit(notebook: str | None, as_json: bool, **edit: object) -> int:
    given = {k: v for k, v in edit.items() if v is not None}
    res = connect(Path.cwd()).invoke(EDIT_CELL, EDIT_CELL.build(**kernel_target(notebook), **given))
    emit(as_json, res, render_edit(res))
    return 0


def render_edit(res: EditCellResult) -> str:
    """What an edit did, as a person reads it: the cell, its new version, the plan's change."""
    where = f"cell {res.index} ({res.cell_id})" if res.index is not None else f"cell {res.cell_id}"
    done = {"replace": "edited", "insert": "inserted", "delete": "deleted", "move": "moved"}
    head = f"{done.get(res.action, res.action)} {where}"
    lines = [head + (f", version {res.version}" if res.version else "")]
    for entry in res.now_stale:
        lines.append(f"  now stale: {entry.cell_id}  ← {'; '.join(entry.reasons)}")
    if res.no_longer_stale:
        lines.append(f"  no longer stale: {', '.join(res.no_longer_stale)}")
    lines.append(f"{res.stale_count} cell(s) stale (ipykeep run-stale)")
    lines.extend(f"notice: {n}" for n in res.notices or [])
    return "\n".join(lines)


def edit_cell(cell: str, source: str, version: str, notebook: str | None, as_json: bool) -> int:
    return _edit(
        notebook, as_json, action="replace", cell=cell, version=version, source=_source(source)
    )


def insert_cell(
    source: str,
    after: str | None,
    before: str | None,
    markdown: bool,
    notebook: str | None,
    as_json: bool,
) -> int:
    return _edit(
        notebook,
        as_json,
        action="insert",
        source=_source(source),
        after=after,
        before=before,
        cell_type="markdown" if markdown else "code",
    )


def delete_cell(cell: str, version: str, notebook: str | None, as_json: bool) -> int:
    return _edit(notebook, as_json, action="delete", cell=cell, version=version)


def move_cell(
    cell: str,
    version: str,
    after: str | None,
    before: str | None,
    notebook: str | None,
    as_json: bool,
) -> int:
    return _edit(
        notebook, as_json, action="move", cell=cell, version=version, after=after, before=before
    )
