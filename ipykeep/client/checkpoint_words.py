"""How checkpoints are told to a person, in one vocabulary wherever they appear: the kernel's
line in ``start`` / ``status``, ``ipykeep checkpoints`` and the notes of ``namespace``.

A notebook cell's values are in one of three states:

- **checkpointed**: its values are saved; a restore loads them instead of re-running the cell;
- **re-run on restore**: nothing is saved on purpose, as re-running it is quicker than loading;
- **not restorable**: a value could not be saved; the cell re-runs after a restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ipykeep.client.summaries import human_bytes

CHECKPOINTED = "checkpointed"
RERUN = "re-run on restore (quicker than loading)"
NOT_RESTORABLE = "not restorable (re-runs after a restart)"


class CellCheckpoint(Protocol):
    """What these words need of a cell's checkpoint (a record, or its JSON in a view)."""

    index: int
    restorable: bool
    cheap: bool
    bytes: int
    failed: dict[str, str]


class SavedValues(CellCheckpoint, Protocol):
    """A cell's checkpoint with the size of each value it saved."""

    sizes: dict[str, int]


#: how a value the writer could not save is described (the in-kernel writer's words)
UNWRITTEN = "its checkpoint could not be written"


def cell_state(cell: CellCheckpoint) -> str:
    """The one word for a cell's checkpoint."""
    if not cell.restorable:
        return NOT_RESTORABLE
    return RERUN if cell.cheap else CHECKPOINTED


def _cells(indexes: list[int]) -> str:
    shown = ", ".join(map(str, indexes[:8])) + (
        f", … ({len(indexes)} in all)" if indexes[8:] else ""
    )
    return f"cell {shown}" if len(indexes) == 1 else f"cells {shown}"


def summary(cells: Iterable[CellCheckpoint]) -> str:
    """One line: how many cells are in each state, the size of what is saved, which cells."""
    by_state: dict[str, list[CellCheckpoint]] = {CHECKPOINTED: [], RERUN: [], NOT_RESTORABLE: []}
    for c in sorted(cells, key=lambda c: c.index):
        by_state[cell_state(c)].append(c)
    saved = by_state[CHECKPOINTED]
    size = human_bytes(sum(c.bytes for c in saved))
    parts = [
        f"{len(saved)} cell(s) {CHECKPOINTED} ({size})" if saved else f"no cell {CHECKPOINTED}"
    ]
    for state in (RERUN, NOT_RESTORABLE):
        if by_state[state]:
            parts.append(f"{state}: {_cells([c.index for c in by_state[state]])}")
    unwritten = sorted(
        {
            why
            for c in by_state[NOT_RESTORABLE]
            for why in (c.failed or {}).values()
            if why.startswith(UNWRITTEN)
        }
    )
    if unwritten:  # a write that failed is not a value that cannot be pickled: say which
        parts[-1] += f" ({'; '.join(unwritten)})"
    return "; ".join(parts)


def namespace_notes(cells: Iterable[SavedValues]) -> list[str]:
    """For ``namespace``, from the cells' checkpoints in run order: the status line, each
    checkpointed variable's size (the latest checkpoint of a name wins), what was not saved."""
    sizes: dict[str, int] = {}
    failed: list[str] = []
    cells = list(cells)
    for c in cells:
        sizes.update(c.sizes)
        failed += [f"{n} (cell {c.index}: {why})" for n, why in sorted(c.failed.items())]
    notes = [f"checkpoints: {summary(cells)}"]
    shown = ", ".join(
        f"{n} {human_bytes(b)}" for n, b in sorted(sizes.items()) if not n.startswith("<")
    )
    if shown:
        notes.append(f"{CHECKPOINTED} values: {shown}")
    if failed:
        notes.append("not saved: " + "; ".join(failed)[:400])
    return notes
