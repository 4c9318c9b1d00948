"""Typed records the engine returns: the API boundary shared by the RPC, CLI and MCP layers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class ImageRef(Record):
    mime: str
    path: str
    uri: str


class OutputView(Record):
    """Text output since the reader's cursor, bounded (head + tail) with where the rest is."""

    text: str = ""
    truncated: bool = False
    total_chars: int = 0
    total_lines: int = 0
    full_path: str | None = None
    uri: str | None = None
    images: list[ImageRef] = Field(default_factory=list)
    dropped_bytes: int = 0


class ErrorInfo(Record):
    ename: str
    evalue: str
    traceback: str = ""


class ExecutionRecord(Record):
    handle: str
    kernel_id: str
    kind: Literal["cell", "scratch", "browser"]
    state: Literal["queued", "running", "ok", "failed", "interrupted", "lost"]
    cell_id: str | None = None  # nbformat id, for notebook cells
    index: int | None = None
    execution_count: int | None = None
    duration_s: float | None = None
    subshell: bool | None = None
    #: where a debugger holds this running execution (its state stays ``running``)
    paused: str | None = None
    output: OutputView = Field(default_factory=OutputView)
    error: ErrorInfo | None = None
    cursor: int = 0
    notices: list[str] | None = None


class CellState(Record):
    cell_id: str
    index: int
    cell_type: str
    state: Literal["ok", "failed", "stale", "running", "never_run", "markdown"]
    handle: str | None = None
    #: where a debugger holds the cell's running execution
    paused: str | None = None
    execution_count: int | None = None
    reasons: list[dict[str, Any]] | None = None
    first_line: str | None = None
    #: hash of the cell's exact source: what a cell edit (``edit_cell``) names as its base
    version: str | None = None


class WarmProgress(Record):
    done: int
    total: int
    current: str | None = None
    failed: list[str] = Field(default_factory=list)
    finished: bool = False


class EnvironmentInfo(Record):
    """The Python environment a kernel runs in, and which rule chose it (docs/environments.md)."""

    #: setting (python / IPYKEEP_PYTHON / --python), project_venv (.venv/ or venv/ at the root),
    #: virtual_env ($VIRTUAL_ENV), uv_project (its .venv), conda ($CONDA_PREFIX), ipykeep (the
    #: interpreter running ipykeep), remote (chosen on the kernel's host or gateway)
    kind: Literal[
        "setting", "project_venv", "virtual_env", "uv_project", "conda", "ipykeep", "remote"
    ]
    python: str
    #: the environment's directory (``sys.prefix`` of its interpreter), when known
    prefix: str | None = None
    #: why this one, in words ("project .venv at /p/.venv")
    why: str
    #: the project is a uv project (``uv.lock``, or ``[tool.uv]`` in pyproject.toml)
    uv_project: bool = False


class KernelRecord(Record):
    kernel_id: str
    pid: int | None = None
    state: Literal["starting", "warming", "idle", "busy", "unresponsive", "dead", "closed"]
    notebook: str | None = None
    cwd: str
    python: str
    dataflow: str
    running: list[str] = Field(default_factory=list)
    stale_count: int | None = None
    warm: WarmProgress | None = None
    cells: list[CellState] | None = None
    served_url: str | None = None
    notices: list[str] | None = None
    #: what is checkpointed for this kernel's cells, and its size (see ``ipykeep checkpoints``)
    checkpoints: str | None = None
    #: ``create_kernel`` found this kernel already running for the notebook and returned it
    reused: bool | None = None
    #: the environment the kernel runs in and why (``docs/environments.md``)
    environment: EnvironmentInfo | None = None


class WriteResult(Record):
    written: bool
    updated: list[str] = Field(default_factory=list)
    skipped_edited: list[str] = Field(default_factory=list)
    repairs: list[str] = Field(default_factory=list)
    error: str | None = None
    #: queued, written within ``write_delay_ms`` after the reply (``updated``: the cells queued);
    #: a failure of that write is a notice on the next result
    pending: bool = False


class SkippedCell(Record):
    cell_id: str
    index: int
    reason: str


class BatchResult(Record):
    kernel_id: str
    ok: bool
    results: list[ExecutionRecord] = Field(default_factory=list)
    skipped: list[SkippedCell] = Field(default_factory=list)
    write: WriteResult | None = None
    #: why the batch stopped before its end: kernel_died, kernel_unresponsive, kernel_closed,
    #: kernel_restarted or interrupted
    stopped: str | None = None
    notices: list[str] | None = None


class InterruptResult(Record):
    kernel_id: str
    handle: str | None = None
    action: Literal["interrupted", "killed_and_restarted", "already_finished", "nothing_running"]
    message: str


class DaemonInfo(Record):
    pid: int
    version: str
    project: str
    started_at: float


class StatusRecord(Record):
    daemon: DaemonInfo
    kernels: list[KernelRecord]


class CellsRecord(Record):
    kernel_id: str
    notebook: str | None = None
    cells: list[CellState]
    scratch: list[ExecutionRecord] = Field(default_factory=list)


class RunStaleResult(Record):
    kernel_id: str
    executed: bool
    #: the cells that will run, in order, each with its reasons
    stale: list[dict[str, Any]]
    fresh: list[dict[str, Any]]
    blocked: list[dict[str, Any]]
    #: cells that run only if a value they read changes when the cells above re-run (each
    #: with its ``condition``); executing re-plans before each and runs it only then
    conditional: list[dict[str, Any]] = Field(default_factory=list)
    batch: BatchResult | None = None
    ok: bool = True
    notices: list[str] | None = None
    #: the plan's estimated seconds against a fresh restart-and-run-all (see core.plan_cost)
    cost: dict[str, Any] | None = None
    #: True when ``fresh`` restarted the kernel and ran every code cell instead of the plan
    fresh_run: bool | None = None
    #: while the notebook is served, which copy the plan is of: ``live_document`` (the
    #: server's shared document, unsaved typing included) or ``saved_file`` (the file as last
    #: saved: edits a person has not saved in the browser are not in it)
    reads: Literal["live_document", "saved_file"] | None = None
