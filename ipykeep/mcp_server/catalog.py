"""The MCP tool catalog: each tool derived from the daemon method it calls, and how it differs.

A tool names its daemon method by its ``ipykeep.api.names`` constant; ``ToolSpec.method`` is
that method's declaration (``api.methods``, loaded on first use: its models cost the handshake
time). The tool's description, arguments and result kind come from that declaration: the
description is the method's ``doc``, the arguments are the method's params (same names, types,
constraints and descriptions), the result kind follows the declared result type. Where a tool
deliberately differs (terser wording for the agent, fewer arguments, a stricter range), the
difference is declared once, on the tool. Rules that hold for every tool are declared once here:
a tool names its kernel by id, always (no ``notebook`` lookup), and the server supplies the
arguments that are its own (``SERVER_SUPPLIED``).

An execution is named by its ``handle`` (``c12``) here as everywhere; ``cell_id`` always means a
notebook cell. Arguments are validated once, with the tool's model (so a bad call gets the usual
error envelope, not a protocol error); the params built from them are not validated again. The
published input schemas are derived from the same models, stripped of titles and ``null``
branches: every byte of ``tools/list`` is paid for by the agent on every turn. No output
schemas are published; results are described in ``results.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from ipykeep.api import names

if TYPE_CHECKING:
    from ipykeep.api.spec import Method, Params

#: How a tool's result is turned into MCP content (see ``results.py``).
ResultKind = Literal[
    "kernel", "kernels", "execution", "batch", "cells", "interrupt", "stale", "debug", "json"
]

#: Bytes ``tools/list`` may take on the wire (``tests/mcp_server/test_catalog.py`` holds it):
#: Gemini CLI and opencode send the whole catalog with every model request, and each tool's
#: name, description and schema are read by the model on every turn.
TOOLS_LIST_BUDGET = 9_000

#: Params the server fills in itself: whose output cursor advances (each MCP session has its
#: own), and whether to wait for the notebook write (agents read outputs from the result).
SERVER_SUPPLIED = frozenset({"reader", "wait_for_write"})

#: Every tool names its kernel by id (agents hold ids; ``notebook`` lookup is for people). The
#: name says what it is: no description (every tool has one, and each byte of ``tools/list`` is
#: paid for on every turn by the hosts that send the whole catalog).
KERNEL_ID: Override = (str, Field())

#: An argument replacing the method's param of the same name: (annotation, ``Field(...)``).
Override = tuple[Any, Any]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: ``cell_id`` is still accepted for the handle (it was the argument's old name); only
#: ``handle`` is published in the schema.
_HANDLE_ALIASES = AliasChoices("handle", "cell_id")

#: A run_cells entry: a cell id, or a 0-based index as a JSON number (sent on as a string,
#: as the method's ``CellRef`` takes it).
_CellArg = Annotated[str | int, AfterValidator(str)]


@dataclass(frozen=True)
class Hints:
    """MCP tool annotations, each decided on purpose: hosts decide approval from them (Codex asks
    before a tool that is not read-only, and never runs one under a never-approve policy)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    #: Whether the tool reaches beyond the project (code that may do anything, a public tunnel).
    open_world: bool

    def published(self) -> dict[str, bool]:
        """The annotations as ``tools/list`` carries them: only the hints that differ from the
        protocol's defaults (not read-only, destructive, not idempotent, open-world), which
        hosts apply to a hint left out (Codex does). A read-only tool leaves
        ``destructiveHint`` and ``idempotentHint`` out too: the protocol gives them meaning
        only for a tool that writes."""
        out: dict[str, bool] = {}
        if self.read_only:
            out["readOnlyHint"] = True
        if not self.destructive and not self.read_only:
            out["destructiveHint"] = False
        if self.idempotent and not self.read_only:
            out["idempotentHint"] = True
        if not self.open_world:
            out["openWorldHint"] = False
        return out


#: Claude Code's ``_meta`` keys on a tool in ``tools/list``: load the tool's schema at session
#: start instead of behind its tool search, and the result size (characters) above which it
#: keeps only a short preview of the result, the rest in a file (its own cap is 500,000).
ALWAYS_LOAD_KEY = "anthropic/alwaysLoad"
MAX_RESULT_CHARS_KEY = "anthropic/maxResultSizeChars"
#: What the tools that return outputs or listings declare when their results can outgrow
#: Claude Code's default: ipykeep bounds those results itself (head + tail, a marker naming the
#: full text), so a host's own cut would only hide the tail and the marker.
BOUNDED_RESULT_CHARS = 500_000
#: Claude Code's default: a longer result becomes a preview and a file.
CLAUDE_CODE_RESULT_CHARS = 50_000
#: The longest bounded result in units of ``max_output_chars``: a listing is cut at four times
#: it, and a client receives its text twice (the text block and ``structuredContent``).
LONGEST_RESULT_FACTOR = 8


#: Only reads ipykeep's state.
READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
#: Runs user code: may change anything the code touches.
RUNS_CODE = Hints(read_only=False, destructive=True, idempotent=False, open_world=True)


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name and hints, and only where it differs from its method (no title:
    the name says what the tool is, and no host passes a title to its model)."""

    name: str
    #: The daemon method it calls (an ``api.names`` constant).
    method_name: str
    hints: Hints
    #: The description clients see, when it is not the method's ``doc``.
    about: str | None = None
    #: Params of the method the tool does not take (they keep their declared defaults).
    omit: tuple[str, ...] = ()
    #: Arguments that differ from the method's param of the same name.
    overrides: Mapping[str, Override] = field(default_factory=dict)
    #: Other names an argument is still accepted under (not published).
    aliases: Mapping[str, AliasChoices] = field(default_factory=dict)
    #: Whether this call may start the daemon (only one that creates a kernel should).
    starts_daemon: bool = False
    #: Whether the call reports progress while it works (long runs, warm-up, a wait for a cell:
    #: the one sign of life a host gets before the handle or the result).
    progress: bool = False
    #: Part of every edit-run-read turn: Claude Code loads it at start rather than after a
    #: tool search (the others are found when needed; their schemas stay out of the context).
    always_load: bool = False
    #: ``BOUNDED_RESULT_CHARS`` for a tool whose result ipykeep bounds (outputs, listings); None
    #: for a small record, which no host cap reaches.
    max_result_chars: int | None = None

    def meta(self, max_output_chars: int) -> dict[str, Any] | None:
        """The tool's ``_meta`` in ``tools/list`` (hints for Claude Code; others ignore them).
        The result cap is declared only when ``max_output_chars`` lets a bounded result outgrow
        Claude Code's default: below that, the key would cost every host bytes for nothing."""
        meta: dict[str, Any] = {}
        if self.always_load:
            meta[ALWAYS_LOAD_KEY] = True
        longest = max_output_chars * LONGEST_RESULT_FACTOR
        if self.max_result_chars is not None and longest > CLAUDE_CODE_RESULT_CHARS:
            meta[MAX_RESULT_CHARS_KEY] = self.max_result_chars
        return meta or None

    @property
    def read_only(self) -> bool:
        return self.hints.read_only

    @cached_property
    def method(self) -> Method[Any, Any]:
        """The declaration of the daemon method this tool calls."""
        from ipykeep.api.methods import BY_NAME as METHODS

        return METHODS[self.method_name]

    @property
    def description(self) -> str:
        return self.about if self.about is not None else self.method.doc

    @cached_property
    def kind(self) -> ResultKind:
        # cached: looked up on every call's result
        return result_kind(self.method.result)

    @cached_property
    def args(self) -> type[Args]:
        """The tool's arguments: the method's params, less what the tool and the server leave
        out, with the tool's overrides and aliases."""
        params = self.method.params.model_fields
        fields: dict[str, Any] = {}
        for name, info in params.items():
            if name in SERVER_SUPPLIED or name in self.omit:
                continue
            if name == "notebook" and "kernel_id" in params:
                continue
            if name in self.overrides:
                fields[name] = self.overrides[name]
            elif name == "kernel_id":
                fields[name] = KERNEL_ID
            elif name in self.aliases:
                aliased = FieldInfo.merge_field_infos(info, validation_alias=self.aliases[name])
                fields[name] = (info.annotation, aliased)
            else:
                fields[name] = (info.annotation, info)
        unknown = (set(self.omit) | set(self.overrides) | set(self.aliases)) - set(params)
        if unknown:
            raise ValueError(f"tool {self.name}: {sorted(unknown)} are not params of its method")
        model_name = "".join(part.title() for part in self.name.split("_")) + "Args"
        model: type[Args] = create_model(model_name, __base__=Args, **fields)
        return model


def result_kind(result: Any) -> ResultKind:
    """How a method's declared result type is rendered (``json``: its compact JSON as is)."""
    from ipykeep.api.debugger import DebugResult
    from ipykeep.api.records import (
        BatchResult,
        CellsRecord,
        ExecutionRecord,
        InterruptResult,
        KernelRecord,
        RunStaleResult,
    )

    kinds: dict[Any, ResultKind] = {
        KernelRecord: "kernel",
        list[KernelRecord]: "kernels",
        ExecutionRecord: "execution",
        BatchResult: "batch",
        CellsRecord: "cells",
        InterruptResult: "interrupt",
        RunStaleResult: "stale",
        DebugResult: "debug",
    }
    return kinds.get(result, "json")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "create_kernel",
        names.CREATE_KERNEL,
        # Warming runs the notebook's code; a scratch kernel is new on every call.
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        omit=("write_outputs", "dataflow", "wait"),
        overrides={
            # the server resolves it against its project (not a shell's working directory)
            "notebook": (
                str | None,
                Field(None, description=".ipynb to bind, relative to the project"),
            ),
        },
        starts_daemon=True,
        progress=True,
        always_load=True,
    ),
    ToolSpec(
        "list_kernels",
        names.LIST_KERNELS,
        READ,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "close_kernel",
        names.CLOSE_KERNEL,
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "restart_kernel",
        names.RESTART,
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "ipython",
        names.EXECUTE,
        RUNS_CODE,
        # The agent polls with read_cell; an RPC caller waits as long as it likes.
        about="Run code in the kernel (state persists). Returns the output, or a handle for"
        " read_cell if it runs past yield_time_ms.",
        overrides={
            "yield_time_ms": (
                int,
                Field(
                    5000,
                    ge=0,
                    le=30000,  # hosts time a tool call out: the agent waits in steps
                    description="ms to wait, 0-30000, default 5000; 0 returns the handle at once",
                ),
            ),
        },
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
        progress=True,
    ),
    ToolSpec(
        "read_cell",
        names.READ_EXECUTION,
        READ,
        about="Output of an execution since you last read it; its state.",
        overrides={
            "yield_time_ms": (
                int,
                Field(0, ge=0, le=30000, description="ms to wait, 0-30000, default 0"),
            ),
        },
        aliases={"handle": _HANDLE_ALIASES},
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
        progress=True,
    ),
    ToolSpec(
        "interrupt",
        names.INTERRUPT,
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
        aliases={"handle": _HANDLE_ALIASES},
        always_load=True,
    ),
    ToolSpec(
        "list_cells",
        names.LIST_CELLS,
        READ,
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "markdown",
        names.MARKDOWN,
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "run_stale",
        names.RUN_STALE,
        # A second call finds nothing stale and does nothing more.
        Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
        progress=True,
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "run_cells",
        names.RUN_CELLS,
        RUNS_CODE,
        overrides={
            # an empty run is refused here, where the agent reads why
            "cells": (
                list[_CellArg],
                Field(
                    min_length=1,
                    description="cell ids or 0-based indexes (at least one)",
                ),
            ),
        },
        progress=True,
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "edit_cell",
        names.EDIT_CELL,
        # Changes the user's notebook (delete removes a cell); a replay is refused as stale.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "inspect",
        names.INSPECT,
        READ,
        overrides={"name": (str, Field(description="variable or expression, e.g. df or df['a']"))},
        always_load=True,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "namespace",
        names.NAMESPACE,
        READ,
        max_result_chars=BOUNDED_RESULT_CHARS,
    ),
    ToolSpec(
        "watch_file",
        names.WATCH_FILE,
        Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "add_packages",
        names.ADD_PACKAGES,
        # installs from a package index into the kernel's environment (and may edit
        # pyproject.toml); adding what is installed already changes nothing
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
    ),
    ToolSpec(
        "checkpoint",
        names.CHECKPOINT,
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "restore",
        names.RESTORE,
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "fork_kernel",
        names.FORK_KERNEL,
        # a new kernel and notebook copy; the parent is left as it was
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "debug",
        names.DEBUG,
        # `p EXPR` evaluates code and `step`/`continue` move a paused run: not read-only.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
    ),
    ToolSpec(
        "publish",
        names.PUBLISH,
        # tunnel=true exposes the view on a public URL.
        Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
    ),
)

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def engine_params(spec: ToolSpec, args: Args, **extra: Any) -> Params:
    """The tool's validated arguments (plus ``extra``, e.g. the reader) as its method's params.

    Not validated again: each argument is its method's param or stricter (its overrides), and
    ``extra`` is the server's own. What a tool leaves out takes the method's declared default.
    """
    values = {**args.model_dump(exclude_none=True), **extra}
    params: Params = spec.method.params.model_construct(**values)
    return params


#: What a published schema keeps of each node: the shape a model fills in. Defaults and bounds
#: are said in the argument's description (Codex strips them from schemas, and a model reads the
#: description anyway), and the tool's own model checks them on every call.
SCHEMA_KEYS = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "anyOf",
        "enum",
        "description",
        "additionalProperties",
    }
)


def compact_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as ``tools/list`` publishes it: types, enums, required
    arguments and descriptions; no titles, defaults, bounds or ``null`` branches."""
    schema = model.model_json_schema()

    def clean(node: Any, *, keys: bool = False) -> Any:
        if isinstance(node, dict):
            if keys:  # a ``properties`` mapping: every key is an argument's name
                return {k: clean(v) for k, v in node.items()}
            node = {
                k: clean(v, keys=k in ("properties", "$defs"))
                for k, v in node.items()
                if k in SCHEMA_KEYS
            }
            branches = node.get("anyOf")
            if isinstance(branches, list):
                kept = [b for b in branches if b != {"type": "null"}]
                if len(kept) == 1:
                    node.pop("anyOf")
                    node = {**kept[0], **node}
                elif all(set(b) == {"type"} for b in kept):  # [string, integer]: one type list
                    node.pop("anyOf")
                    node = {"type": [b["type"] for b in kept], **node}
                else:
                    node["anyOf"] = kept
            return node
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    out: dict[str, Any] = clean(schema)
    out.pop("additionalProperties", None)
    if not out.get("properties"):
        out = {"type": "object"}
    return out
