"""The debugger: one method taking pdb-style commands, and the bounded answer it gives."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import Record
from ipykeep.api.spec import KernelParams, Method


class DebugParams(KernelParams):
    command: str = Field(
        min_length=1,
        max_length=2000,
        description=(
            "where, up, down, frame N, p EXPR, locals, list, break CELL:LINE|FUNCTION|/TEXT/"
            "|FILE:LINE, clear, catch on|off, step, next, return, continue, quit, status,"
            " replay [CELL]"
        ),
    )
    handle: str | None = Field(
        default=None,
        description="execution to debug; default: the latest",
    )


class DebugFrame(Record):
    index: int
    function: str
    file: str
    line: int
    text: str | None = None
    #: the notebook cell this frame runs (its outermost frame)
    cell_id: str | None = None


DebugState = Literal["idle", "running", "paused", "post_mortem"]


class DebugResult(Record):
    """What one command did and where the debugger stands, readable on its own."""

    command: str
    #: what the debugger is looking at after the command
    state: DebugState
    #: the execution paused or post-mortem (when known)
    handle: str | None = None
    #: why it paused (breakpoint, step, return, raised …) or the failure examined
    reason: str | None = None
    where: DebugFrame | None = None
    frames: list[DebugFrame] | None = None
    #: the selected frame's index in ``frames`` (0 = outermost)
    frame: int | None = None
    #: a summary of the value ``p`` evaluated, from the typed summarizers
    value: dict[str, Any] | None = None
    #: the selected frame's locals, as a namespace listing
    locals: dict[str, Any] | None = None
    source: str | None = None
    #: every breakpoint set, numbered as ``clear N`` takes them (``"1 cell loop:3"``)
    breakpoints: list[str] = Field(default_factory=list)
    stop_on_raise: bool = False
    notes: list[str] = Field(default_factory=list)


DEBUG: Method[DebugParams, DebugResult] = Method(
    names.DEBUG,
    DebugParams,
    DebugResult,
    KERNEL_LOOKUP
    + (e.KERNEL_BUSY, e.KERNEL_DIED, e.TIMEOUT, e.DEBUG_STATE, e.UNKNOWN_CELL, e.PROBE_FAILED),
    "pdb on the kernel: post-mortem of the last failure, breakpoints, stepping, replay.",
)
