"""The notebook as plans and edits read it: the shared document when served as one, else the file.

A served notebook that is a shared document (``HostingState.document``) holds what the person
typed and has not saved; that is the notebook's current source, so plans and version checks
read it. Otherwise the file on disk is the document.
"""

from __future__ import annotations

from typing import Literal

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
    return snapshot_of_cells(session.notebook, await document.read_cells())


def reads(session: KernelSession) -> Reads:
    if session.hosting.document is not None:
        return "live_document"
    return "saved_file" if session.hosting.served_url else None
