"""The MCP tool catalog: names, terse descriptions, argument models, and the daemon method each maps to.

Each tool names its daemon method by its ``ipykeep.api.names`` constant; ``ToolSpec.method`` is
that method's declaration (``api.methods``, loaded on the first call: its models cost the
handshake time). The tool's arguments become the method's params model (``engine_params``),
which the daemon's ``Binding`` of the same declaration serves (``core.daemon.method_table``). An execution is
named by its ``handle`` (``c12``) here as everywhere; ``cell_id`` always means a notebook cell.

Arguments are validated with pydantic (so a bad call gets the usual error envelope, not a
protocol error) and the published input schemas are derived from the same models, stripped of
titles and ``null`` branches: every byte of ``tools/list`` is paid for by the agent on every
turn. No output schemas are published; results are described in ``results.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ipykeep.api import names

if TYPE_CHECKING:
    from ipykeep.api.spec import Method, Params

#: How a tool's result is turned into MCP content (see ``results.py``).
ResultKind = Literal[
    "kernel", "kernels", "execution", "batch", "cells", "interrupt", "stale", "json"
]

KernelId = Field(description="e.g. k1")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateKernelArgs(Args):
    notebook: str | None = Field(None, description=".ipynb to bind (relative to the project)")
    cwd: str | None = Field(
        None,
        description="working dir for a scratch kernel, or ssh://[user@]host/path for a kernel over SSH",
    )
    gateway: str | None = Field(
        None, description="run the kernel on this Jupyter server / gateway URL (http(s)://…)"
    )
    python: str | None = Field(None, description="interpreter (default: configured)")
    warm: bool = Field(True, description="run the notebook's cells now (default true)")


class NoArgs(Args):
    pass


class KernelArgs(Args):
    kernel_id: str = KernelId


class IpythonArgs(Args):
    kernel_id: str = KernelId
    code: str
    yield_time_ms: int = Field(
        5000,
        ge=0,
        le=30000,
        description="ms to wait, 0-30000, default 5000; 0 returns the handle at once",
    )
    request_id: str | None = Field(None, description="idempotency key")


#: ``cell_id`` is still accepted for the handle (it was the argument's old name); only
#: ``handle`` is published in the schema.
_HANDLE_ALIASES = AliasChoices("handle", "cell_id")


class ReadCellArgs(Args):
    kernel_id: str = KernelId
    handle: str = Field(description="execution handle, e.g. c12", validation_alias=_HANDLE_ALIASES)
    yield_time_ms: int = Field(
        0, ge=0, le=30000, description="ms to wait for it to finish, 0-30000, default 0"
    )
    cursor: int | None = Field(
        None, ge=0, description="output offset >= 0; default: where you last read"
    )


class InterruptArgs(Args):
    kernel_id: str = KernelId
    handle: str | None = Field(
        None,
        description="execution handle to stop; default: what runs",
        validation_alias=_HANDLE_ALIASES,
    )


class MarkdownArgs(Args):
    kernel_id: str = KernelId
    source: str


class RunStaleArgs(Args):
    kernel_id: str = KernelId
    execute: bool = Field(False, description="run the plan (default false: only show it)")
    fresh: bool = Field(
        False,
        description="with execute: restart the kernel and run every cell instead (default false; the plan's cost says when that is cheaper)",
    )


class RunCellsArgs(Args):
    kernel_id: str = KernelId
    cells: list[str | int] = Field(
        min_length=1, description="cell ids or 0-based indexes (at least one), run in this order"
    )


class InspectArgs(Args):
    kernel_id: str = KernelId
    name: str = Field(description="variable or expression, e.g. df or df['a']")


class WatchFileArgs(Args):
    kernel_id: str = KernelId
    path: str = Field(
        description="file (relative to the kernel's cwd) whose changes make its readers stale"
    )


class PublishArgs(Args):
    kernel_id: str = KernelId
    cells: dict[str, str] | None = Field(
        None, description="cell id or index -> caption to highlight"
    )
    tunnel: bool = Field(
        False, description="public cloudflared quick tunnel instead of a local URL (default false)"
    )


class CheckpointArgs(Args):
    kernel_id: str = KernelId
    name: str | None = Field(None, description="name (default: a timestamp)")


class RestoreArgs(Args):
    kernel_id: str = KernelId
    name: str = Field(description="a name given to checkpoint")


@dataclass(frozen=True)
class Hints:
    """MCP tool annotations, each set on purpose: hosts decide approval from them (Codex
    refuses an un-annotated tool under a never-approve policy)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    #: Whether the tool reaches beyond the project (code that may do anything, a public tunnel).
    open_world: bool


#: Only reads ipykeep's state.
READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
#: Runs user code: may change anything the code touches.
RUNS_CODE = Hints(read_only=False, destructive=True, idempotent=False, open_world=True)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[Args]
    #: The daemon method it calls (an ``api.names`` constant).
    method_name: str
    kind: ResultKind
    hints: Hints
    #: Whether this call may start the daemon (only one that creates a kernel should).
    starts_daemon: bool = False
    #: Whether the call reports progress while it works (long runs, warm-up).
    progress: bool = False

    @property
    def read_only(self) -> bool:
        return self.hints.read_only

    @property
    def method(self) -> Method[Any, Any]:
        """The declaration of the daemon method this tool calls."""
        from ipykeep.api.methods import BY_NAME as METHODS

        return METHODS[self.method_name]


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "create_kernel",
        "Create kernel",
        "Start a persistent kernel, bound to a notebook if given (returns the bound one if it exists).",
        CreateKernelArgs,
        names.CREATE_KERNEL,
        "kernel",
        # Warming runs the notebook's code; a scratch kernel is new on every call.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        starts_daemon=True,
        progress=True,
    ),
    ToolSpec(
        "list_kernels",
        "List kernels",
        "Running kernels: state, notebook, cwd, stale cells, running executions.",
        NoArgs,
        names.LIST_KERNELS,
        "kernels",
        READ,
    ),
    ToolSpec(
        "close_kernel",
        "Close kernel",
        "Shut a kernel down (its variables are lost).",
        KernelArgs,
        names.CLOSE_KERNEL,
        "kernel",
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "restart_kernel",
        "Restart kernel",
        "Restart a kernel (dead or alive) with the same id and notebook; variables are lost, then run_stale lists what must re-run.",
        KernelArgs,
        names.RESTART,
        "kernel",
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "ipython",
        "Run Python",
        "Run code in the kernel, keeping state. Returns output (bounded) or, if still running after"
        " yield_time_ms, a handle for read_cell.",
        IpythonArgs,
        names.EXECUTE,
        "execution",
        RUNS_CODE,
    ),
    ToolSpec(
        "read_cell",
        "Read execution",
        "Output of an execution since you last read it; its state.",
        ReadCellArgs,
        names.READ_EXECUTION,
        "execution",
        READ,
    ),
    ToolSpec(
        "interrupt",
        "Interrupt",
        "Interrupt running code (kills and restarts the kernel if it ignores SIGINT).",
        InterruptArgs,
        names.INTERRUPT,
        "interrupt",
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "list_cells",
        "List cells",
        "Notebook cells with state (ok/stale/failed/never_run) and recent scratch runs.",
        KernelArgs,
        names.LIST_CELLS,
        "cells",
        READ,
    ),
    ToolSpec(
        "markdown",
        "Add note",
        "Append a Markdown note to the kernel's archival record.",
        MarkdownArgs,
        names.MARKDOWN,
        "json",
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "run_stale",
        "Run stale cells",
        "Cells that must re-run after edits (with reasons), in order; execute=true runs them.",
        RunStaleArgs,
        names.RUN_STALE,
        "stale",
        # A second call finds nothing stale and does nothing more.
        Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
        progress=True,
    ),
    ToolSpec(
        "run_cells",
        "Run cells",
        "Run notebook cells, in order, with their source on disk now.",
        RunCellsArgs,
        names.RUN_CELLS,
        "batch",
        RUNS_CODE,
        progress=True,
    ),
    ToolSpec(
        "inspect",
        "Inspect variable",
        "Typed summary of a variable (shape, dtypes, stats, preview), never the whole object.",
        InspectArgs,
        names.INSPECT,
        "json",
        READ,
    ),
    ToolSpec(
        "namespace",
        "List variables",
        "Variables in the kernel, with type, size and the cell that defined them.",
        KernelArgs,
        names.NAMESPACE,
        "json",
        READ,
    ),
    ToolSpec(
        "watch_file",
        "Watch file",
        "Track a file as an input: cells reading it go stale when it changes.",
        WatchFileArgs,
        names.WATCH_FILE,
        "json",
        Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "checkpoint",
        "Checkpoint variables",
        "Save every variable under a name (default: a timestamp) to roll back to with restore, e.g. before a risky cell.",
        CheckpointArgs,
        "checkpoint",
        "json",
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "restore",
        "Roll back variables",
        "Roll the variables back to a named checkpoint; variables made since are deleted.",
        RestoreArgs,
        "restore",
        "json",
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "publish",
        "Publish notebook",
        "Live, token-protected JupyterLab view of the kernel's notebook for a person, named cells highlighted; returns the URL.",
        PublishArgs,
        names.PUBLISH,
        "json",
        # tunnel=true exposes the view on a public URL.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
    ),
)

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def engine_params(spec: ToolSpec, args: Args, **extra: Any) -> Params:
    """The tool's validated arguments (plus ``extra``, e.g. the reader) as its method's params.

    Tool arguments are a subset of the method's params under the same names; what a tool
    leaves out takes the method's declared default.
    """
    values = {**args.model_dump(exclude_none=True), **extra}
    params: Params = spec.method.validate(values)
    return params


def compact_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without titles, ``null`` branches or empty ``properties``."""
    schema = model.model_json_schema()

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: clean(v) for k, v in node.items() if k != "title"}
            branches = node.get("anyOf")
            if isinstance(branches, list):
                kept = [b for b in branches if b != {"type": "null"}]
                if len(kept) == 1:
                    node.pop("anyOf")
                    node = {**kept[0], **node}
                else:
                    node["anyOf"] = kept
            if node.get("default", ...) is None:
                node.pop("default")
            return node
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    out = clean(schema)
    out.pop("additionalProperties", None)
    if not out.get("properties"):
        out = {"type": "object"}
    return out
