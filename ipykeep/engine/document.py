"""The notebook as plans and edits read it: the shared document when served as one, else the file.

A served notebook that is a shared document (``HostingState.document``) holds what the person
typed and has not saved; that is the notebook's current source, so plans and version checks
read it. Otherwise the file on disk is the document.
"""

from __future__ import annotations

from typing import Any, Literal

from ipykeep.engine.session import KernelSession
from ipykeep.project.notebook import NotebookSnapshot, read_notebook, snapshot_of_cells

#: What a plan read, as its result says: ``live_document`` (the shared document),
#: ``saved_file`` (served without one: the browser's unsaved edits are not in it), or None
#: (not served: the file is the only copy).
Reads = Literal["live_document", "saved_file"] | None


async def current_notebook(session: KernelSession) -> NotebookSnapshot:
    assert session.notebook is not None
    document = session.hosting.document
    if document is None:
        return read_notebook(session.notebook)
    cells = await document.read_cells()
    _tell_conflicts(session, cells)
    return snapshot_of_cells(session.notebook, cells)


def _tell_conflicts(session: KernelSession, cells: list[dict[str, Any]]) -> None:
    """A file write the server merged into the document but could not apply in full left a
    note cell (``serve/cell_merge.py``); the next result tells the agent, once per note."""
    told = session.hosting.conflicts_told
    for cell in cells:
        conflict = cell.get("conflict")
        if not isinstance(conflict, dict) or cell["id"] in told:
            continue
        told.add(str(cell["id"]))
        session.notice_once(
            _CONFLICT_NOTICES.get(str(conflict.get("kind")), _BOTH).format(
                cell=conflict.get("cell_id"), note=cell["id"]
            )
        )


_BOTH = (
    "file write not applied to cell {cell}: the notebook is open and that cell had unsaved "
    "edits of its own, which are kept; the file's version is in the markdown note {note} above "
    "it (re-read the cell and apply your change with edit_cell, then delete the note)"
)
_CONFLICT_NOTICES = {
    "both_changed": _BOTH,
    "deleted_in_file": (
        "file write's deletion of cell {cell} not applied: the notebook is open and that cell "
        "had unsaved edits of its own; it is kept, with the markdown note {note} above it"
    ),
    "deleted_in_document": (
        "file write's change of cell {cell} not applied: the cell was deleted in the open "
        "notebook; the file's version is in the markdown note {note}"
    ),
}


def reads(session: KernelSession) -> Reads:
    if session.hosting.document is not None:
        return "live_document"
    return "saved_file" if session.hosting.served_url else None
