"""Editing the notebook: versioned cell edits (replace, insert, delete, move) and what they changed.

Each edit names the cell it changes and the version (hash of the source, from ``list_cells``)
it was based on; an edit of a cell whose source has another version now is refused
(``stale_version``) with its current source and version. The result is small: the cell's id,
version and place, and the change in the re-run plan the edit caused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import Record
from ipykeep.api.spec import CellRef, KernelParams, Method


class EditCellParams(KernelParams):
    action: Literal["replace", "insert", "delete", "move"] = Field(
        default="replace", description="default replace"
    )
    cell: CellRef | None = Field(
        default=None, description="cell id or index (replace, delete, move)"
    )
    version: str | None = Field(default=None, description="from list_cells")
    source: str | None = Field(default=None, description="replace, insert")
    cell_type: Literal["code", "markdown"] = Field(
        default="code", description="insert; default code"
    )
    after: CellRef | None = Field(
        default=None, description="insert/move: after this cell (insert default: end)"
    )
    before: CellRef | None = Field(default=None, description="insert/move: before this cell")


class StaleEntry(Record):
    """A cell the edit made stale, with its reasons (short)."""

    cell_id: str
    reasons: list[str]


class EditCellResult(Record):
    kernel_id: str
    action: str
    cell_id: str
    #: the cell's version and index now (None after a delete)
    version: str | None = None
    index: int | None = None
    #: ``file``: the .ipynb was rewritten atomically (no shared document is open); ``shared``:
    #: the edit went into the served notebook's shared document, which the server saves
    document: Literal["file", "shared"] = "file"
    #: cells the edit made stale (the plan's delta), and those it took out of the plan
    now_stale: list[StaleEntry] = Field(default_factory=list)
    no_longer_stale: list[str] = Field(default_factory=list)
    #: cells in the plan after the edit
    stale_count: int = 0
    notices: list[str] | None = None


EDIT_CELL: Method[EditCellParams, EditCellResult] = Method(
    names.EDIT_CELL,
    EditCellParams,
    EditCellResult,
    KERNEL_LOOKUP
    + (e.STALE_VERSION, e.UNKNOWN_CELL, e.NOTEBOOK_INVALID, e.NOTEBOOK_WRITE_FAILED)
    + (e.NOTEBOOK_CONFLICT,),
    "Change a notebook cell given its version; a stale version is refused with the current source.",
)
