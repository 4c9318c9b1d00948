"""The MCP server: the tool catalog served with the SDK's low-level server.

The low-level server is used (rather than ``MCPServer``) for control over the wire format:
hand-trimmed input schemas, no output schemas, results built in ``results.py``, and argument
errors returned as the error envelope instead of the SDK's plain-text message.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourceTemplate,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from pydantic import ValidationError

from .. import __version__
from ..core.archive import ARTIFACT_URI_PREFIX
from ..core.config import Config
from ..core.errors import IpykeepError, UsageError
from .backend import Backend
from .catalog import BY_NAME, TOOLS, ToolSpec, compact_schema, engine_params
from .images import ImageLimits
from .results import ResultBuilder, error_result

log = logging.getLogger("ipykeep.mcp")

INSTRUCTIONS = (
    "Persistent Jupyter kernels bound to notebooks. Edit .ipynb files with your own tools; "
    "run_stale shows (execute=true runs) what must re-run. Long outputs are cut: read the "
    "ipykeep://artifacts/... URI in the marker for all of it."
)

#: Seconds create_kernel waits for a notebook's warm-up before returning its progress.
WARM_WAIT_S = 30.0

ARTIFACT_TEMPLATE = ARTIFACT_URI_PREFIX + "{kernel_id}/{name}"


def _tools() -> list[Tool]:
    read_only = ToolAnnotations(read_only_hint=True)
    return [
        Tool(
            name=spec.name,
            description=spec.description,
            input_schema=compact_schema(spec.args),
            annotations=read_only if spec.read_only else None,
        )
        for spec in TOOLS
    ]


def _validation_message(name: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"{name}: bad arguments ({'; '.join(problems)})"


class IpykeepMcp:
    """Tool and resource handlers, bound to one project's daemon."""

    def __init__(self, project: Path, config: Config) -> None:
        self.project = project.resolve()
        self.backend = Backend(self.project)
        self.results = ResultBuilder(ImageLimits(config.image_max_pixels, config.image_max_bytes), config.max_output_chars)
        #: Cursor owner for clients without a transport session (stdio: one client per process).
        self.default_reader = f"mcp-{uuid.uuid4().hex[:12]}"
        self.tools = _tools()

    def server(self) -> Server[Any]:
        return Server(
            "ipykeep",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )

    # -- tools ---------------------------------------------------------------------------------
    async def list_tools(self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=self.tools)

    def _reader(self, ctx: ServerRequestContext[Any]) -> str:
        request = ctx.request
        headers = getattr(request, "headers", None)
        session = headers.get("mcp-session-id") if headers is not None else None
        return f"mcp-{session}" if session else self.default_reader

    def _local_path(self, value: str) -> str:
        """Relative paths name files in the project directory the server was started for."""
        if "://" in value:
            return value  # the engine refuses remote locations with its own message
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else self.project / path)

    async def call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        spec = BY_NAME.get(params.name)
        try:
            if spec is None:
                raise UsageError(f"unknown tool {params.name!r}", hint=f"tools: {', '.join(BY_NAME)}")
            try:
                args = spec.args.model_validate(params.arguments or {})
            except ValidationError as exc:
                raise UsageError(
                    _validation_message(spec.name, exc), hint=f"see the input schema of {spec.name} in tools/list"
                ) from None
            return await self._run(spec, engine_params(spec, args), ctx)
        except IpykeepError as exc:
            return error_result(exc)
        except Exception as exc:  # the server must answer whatever happens
            log.exception("tool %s failed", params.name)
            return error_result(
                IpykeepError(f"internal error in {params.name}: {type(exc).__name__}: {exc}", hint="see the server's stderr")
            )

    async def _run(self, spec: ToolSpec, kwargs: dict[str, Any], ctx: ServerRequestContext[Any]) -> CallToolResult:
        # watch_file paths stay as given: the engine reads them relative to the kernel's cwd,
        # like the code in the notebook does.
        for key in ("notebook", "cwd"):
            if key in kwargs:
                kwargs[key] = self._local_path(kwargs[key])
        if spec.method in ("execute", "read_execution"):
            kwargs["reader"] = self._reader(ctx)
        if spec.method == "create_kernel":
            raw = await self._create_kernel(kwargs)
        else:
            raw = await self.backend.call(spec.method, kwargs, start=spec.starts_daemon)
        return await self.results.build(spec.kind, raw)

    async def _create_kernel(self, kwargs: dict[str, Any]) -> Any:
        # Warm-up can take long: wait a bounded time and report progress rather than block
        # the client past its request timeout.
        raw = await self.backend.call("create_kernel", {**kwargs, "wait": False}, start=True)
        deadline = time.monotonic() + WARM_WAIT_S
        while (raw.get("warm") or {}).get("finished") is False:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            raw = await self.backend.call("wait_warm", {"kernel_id": raw["kernel_id"], "timeout": min(left, 5.0)})
        return raw

    # -- resources -----------------------------------------------------------------------------
    async def list_resources(self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListResourcesResult:
        return ListResourcesResult(resources=[])

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
                ResourceTemplate(
                    name="artifact",
                    uri_template=ARTIFACT_TEMPLATE,
                    description="Full text of a truncated output, or an image a cell displayed.",
                )
            ]
        )

    async def read_resource(self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        try:
            raw = await self.backend.call("read_artifact", {"uri": uri})
        except IpykeepError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, exc.envelope()) from None
        if "text" in raw:
            return ReadResourceResult(contents=[TextResourceContents(uri=uri, text=raw["text"], mime_type="text/plain")])
        return ReadResourceResult(contents=[BlobResourceContents(uri=uri, blob=raw["blob"], mime_type=raw.get("mime"))])


async def run_stdio(app: IpykeepMcp) -> None:
    from mcp.server.stdio import stdio_server

    from .stdio import pipe_stdio

    server = app.server()
    async with pipe_stdio() as streams:
        stdin, stdout = streams if streams is not None else (None, None)
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(app: IpykeepMcp) -> None:
    anyio.run(run_stdio, app)
