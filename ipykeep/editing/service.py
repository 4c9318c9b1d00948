"""The daemon's ``edit_cell``: a versioned cell edit of a kernel's notebook, and its plan delta.

Served as a shared document (``session.hosting.document``, jupyter-collaboration), the edit is
checked and applied in that live document inside the Jupyter server, where the person's typing
is, and the server saves it; the plans before and after read it too.

Without a shared document the notebook file is the document: the edit is applied to it by
``project.cell_edits.edit_notebook_file`` (re-read, version checked against that read, atomic
replace only over the bytes it read). Queued outputs are written first, so the edit never races
the write-back of an earlier run, and edits of one notebook are applied one at a time. The
written bytes are recorded as ipykeep's own, so the file watcher does not report the agent's
edit back to it as a change made by someone else.

The plan delta is the re-run plan before and after the edit, compared: which cells the edit
made stale (with their reasons) and which it took out of the plan (a deleted cell, an edit
undone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ipykeep.api import editing as editing_api
from ipykeep.api.editing import EditCellResult, StaleEntry
from ipykeep.api.errors import UsageError
from ipykeep.api.spec import Bindings, bind
from ipykeep.engine import writeback
from ipykeep.engine.document import current_notebook
from ipykeep.engine.session import KernelSession
from ipykeep.project.cell_edits import (
    CellEdit,
    CellType,
    EditAction,
    EditOutcome,
    edit_notebook_file,
)
from ipykeep.project.notebook import NotebookSnapshot

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

#: Each stale cell's reasons, by cell id (what ``StalenessService.stale_reasons`` gives).
StaleReasons = Callable[[KernelSession, NotebookSnapshot], dict[str, list[dict[str, Any]]]]

#: Cells listed in a result's ``now_stale`` (the count says how many there are in all).
MAX_LISTED = 20


@dataclass
class EditState:
    """Per kernel: edits of its notebook are applied one at a time."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EditService:
    def __init__(self, engine: Engine, stale_reasons: StaleReasons) -> None:
        self.engine = engine
        self.stale_reasons = stale_reasons

    async def edit_cell(
        self,
        kernel_id: str | None = None,
        notebook: str | None = None,
        action: EditAction = "replace",
        cell: str | None = None,
        version: str | None = None,
        source: str | None = None,
        cell_type: CellType = "code",
        after: str | None = None,
        before: str | None = None,
    ) -> EditCellResult:
        """Apply one versioned cell edit to the kernel's notebook; a stale version is refused."""
        edit = CellEdit(
            action,
            cell_id=cell,
            version=version,
            source=source,
            cell_type=cell_type,
            after=after,
            before=before,
        )
        session = self.engine.session(kernel_id, notebook)
        path = session.notebook
        if path is None:
            raise UsageError(
                f"kernel {session.kernel_id} has no notebook",
                hint="edit_cell edits the notebook a kernel is bound to",
            )
        shared = session.hosting.document
        async with session.features.of(EditState).lock:
            await writeback.flush(session)
            before_plan = self.stale_reasons(session, await current_notebook(session))
            if shared is not None:
                done = await shared.edit(asdict(edit))
                outcome = EditOutcome(done["cell_id"], done.get("version"), done.get("index"))
            else:
                outcome = await asyncio.to_thread(edit_notebook_file, path, edit)
            if outcome.content_hash:
                session.own_writes.append(outcome.content_hash)
            after_plan = self.stale_reasons(session, await current_notebook(session))
        notices = session.take_notices() or []
        if outcome.repairs:
            notices.append(f"{path.name} repaired on write: " + "; ".join(outcome.repairs))
        added = [c for c in after_plan if c not in before_plan]
        return EditCellResult(
            kernel_id=session.kernel_id,
            action=action,
            cell_id=outcome.cell_id,
            version=outcome.version,
            index=outcome.index,
            document="file" if shared is None else "shared",
            now_stale=[
                StaleEntry(cell_id=c, reasons=[_reason(r) for r in after_plan[c]])
                for c in added[:MAX_LISTED]
            ],
            no_longer_stale=[c for c in before_plan if c not in after_plan],
            stale_count=len(after_plan),
            notices=notices or None,
        )

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (bind(editing_api.EDIT_CELL, self.edit_cell),)


def _reason(reason: dict[str, Any]) -> str:
    return str(reason.get("message") or reason.get("kind"))
