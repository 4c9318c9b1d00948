"""Running code and reading what it did: scratch executions, notebook cells, notes, artifacts.

An execution is named by its *handle* (``c12``), never by a cell id: ``cell_id`` is always an
nbformat cell id.
"""

from __future__ import annotations

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import BatchResult, CellsRecord, ExecutionRecord, InterruptResult, Record
from ipykeep.api.spec import CellRef, KernelParams, Method, Params, PathArg

#: The execution handle's description, shared by every method that takes one.
HANDLE = "execution handle, e.g. c12"


class ExecuteParams(KernelParams):
    code: str
    #: Milliseconds to wait before returning a running execution (None: until it finishes).
    yield_time_ms: int | None = Field(default=None, ge=0)
    #: Idempotency key: the same key with the same code returns the first execution.
    request_id: str | None = Field(default=None, description="idempotency key")
    #: Whose output cursor advances (each MCP session has its own).
    reader: str = "default"


class ReadExecutionParams(KernelParams):
    handle: str = Field(description=HANDLE)
    yield_time_ms: int = Field(default=0, ge=0)
    cursor: int | None = Field(
        default=None, ge=0, description="output offset; default: where you last read"
    )
    reader: str = "default"


class InterruptParams(KernelParams):
    handle: str | None = Field(default=None, description="default: what runs")


class RunCellsParams(KernelParams):
    cells: list[CellRef]
    #: Reply once the outputs are in the notebook file (False: they are written within
    #: ``write_delay_ms`` after the reply; the MCP tools pass False).
    wait_for_write: bool = True


class MarkdownParams(KernelParams):
    source: str


class ReadArtifactParams(Params):
    uri: PathArg  # a NUL byte in it is a bad argument, as in a path


class MarkdownResult(Record):
    kernel_id: str
    appended: bool
    record: str


class Artifact(Record):
    """A stored output: ``text`` for text, base64 ``blob`` otherwise; ``mime`` its type."""

    uri: str
    path: str
    text: str | None = None
    blob: str | None = None
    mime: str | None = None


RUNS = KERNEL_LOOKUP + (e.KERNEL_DIED, e.KERNEL_BUSY, e.EXECUTION_LOST, e.TIMEOUT)

EXECUTE: Method[ExecuteParams, ExecutionRecord] = Method(
    names.EXECUTE,
    ExecuteParams,
    ExecutionRecord,
    RUNS,
    "Run scratch code; return when it ends or after yield_time_ms.",
)
READ_EXECUTION: Method[ReadExecutionParams, ExecutionRecord] = Method(
    names.READ_EXECUTION,
    ReadExecutionParams,
    ExecutionRecord,
    KERNEL_LOOKUP + (e.UNKNOWN_CELL,),
    "Output of an execution since the reader's cursor; waits up to yield_time_ms for its end.",
)
INTERRUPT: Method[InterruptParams, InterruptResult] = Method(
    names.INTERRUPT,
    InterruptParams,
    InterruptResult,
    KERNEL_LOOKUP + (e.UNKNOWN_CELL, e.KERNEL_START_FAILED),
    "Interrupt running code (restarts the kernel if it ignores SIGINT).",
)
RUN_CELLS: Method[RunCellsParams, BatchResult] = Method(
    names.RUN_CELLS,
    RunCellsParams,
    BatchResult,
    RUNS + (e.UNKNOWN_CELL, e.NOTEBOOK_INVALID, e.NOTEBOOK_WRITE_FAILED),
    "Run notebook cells in order, as they are on disk.",
)
LIST_CELLS: Method[KernelParams, CellsRecord] = Method(
    names.LIST_CELLS,
    KernelParams,
    CellsRecord,
    KERNEL_LOOKUP + (e.NOTEBOOK_INVALID,),
    "Notebook cells with state (ok/stale/failed/never_run) and recent scratch runs.",
)
MARKDOWN: Method[MarkdownParams, MarkdownResult] = Method(
    names.MARKDOWN,
    MarkdownParams,
    MarkdownResult,
    KERNEL_LOOKUP,
    "Append a Markdown note to the kernel's record.",
)
READ_ARTIFACT: Method[ReadArtifactParams, Artifact] = Method(
    names.READ_ARTIFACT,
    ReadArtifactParams,
    Artifact,
    (),
    "A stored output, by its ipykeep://artifacts/… URI.",
)
