"""The MCP server: the tool catalog served with the SDK's low-level server.

The low-level server is used (rather than ``MCPServer``) for control over the wire format:
hand-trimmed input schemas, no output schemas (a result with images carries no structured
content, see ``results.py``), results built in ``results.py``, and argument
errors returned as the error envelope instead of the SDK's plain-text message.

Start-up is on the hosts' clock (see ``launch.py``): this module imports the SDK and the
catalog's declarations only; the tools' descriptions and schemas (every API model) are built on
the first ``tools/list``, and the daemon client (``backend``), the result builders and the
artifact helpers load on the first call that needs them.
"""

from __future__ import annotations

import logging
import time
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourceTemplate,
    SetLevelRequestParams,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from pydantic import ValidationError

from ipykeep import __version__
from ipykeep.api import names
from ipykeep.api.errors import IpykeepError, UsageError
from ipykeep.mcp_server import notebook_app
from ipykeep.mcp_server.catalog import BY_NAME, TOOLS, ToolSpec, compact_schema, engine_params
from ipykeep.project.config import Config

if TYPE_CHECKING:
    from ipykeep.api.spec import Params

log = logging.getLogger("ipykeep.mcp")

INSTRUCTIONS = (
    "Persistent Jupyter kernels bound to notebooks. Edit .ipynb files with your own tools; "
    "run_stale shows (execute=true runs) what must re-run. Long outputs are cut: read the "
    "ipykeep://artifacts/... URI in the marker for all of it."
)

#: Seconds create_kernel waits for a notebook's warm-up before returning its progress.
WARM_WAIT_S = 30.0

#: ``project.stored.ARTIFACT_URI_PREFIX`` + the template's fields (that module loads nbformat,
#: which the handshake does without; a test checks the two agree).
ARTIFACT_TEMPLATE = "ipykeep://artifacts/{kernel_id}/{name}"

#: MCP log levels, lowest first (the client's logging/setLevel picks the threshold).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _tools(config: Config) -> list[Tool]:
    return [
        Tool(
            name=spec.name,
            description=spec.description,
            input_schema=compact_schema(spec.args),
            annotations=ToolAnnotations.model_validate(hints)
            if (hints := spec.hints.published())
            else None,
            _meta=spec.meta(config.max_output_chars),
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
        self.config = config
        self._backend: Any = None
        self._results: Any = None
        self._notices: Any = None
        #: Cursor owner for clients without a transport session (stdio: one client per process).
        self.default_reader = f"mcp-{uuid.uuid4().hex[:12]}"
        self._tools: list[Tool] | None = None
        #: Lowest MCP log level sent to the client (logging/setLevel changes it).
        self.log_level = "info"

    @property
    def tools(self) -> list[Tool]:
        """The catalog, built on the first ``tools/list``: building it loads every API model
        and derives each tool's schema, which the opening of a session does without."""
        if self._tools is None:
            self._tools = notebook_app.link(_tools(self.config))
        return self._tools

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from ipykeep.mcp_server.backend import Backend

            self._backend = Backend(self.project)
        return self._backend

    @property
    def results(self) -> Any:
        if self._results is None:
            from ipykeep.mcp_server.images import ImageLimits
            from ipykeep.mcp_server.results import ResultBuilder

            limits = ImageLimits(self.config.image_max_pixels, self.config.image_max_bytes)
            self._results = ResultBuilder(limits, self.config.max_output_chars)
        return self._results

    @property
    def notices(self) -> Any:
        if self._notices is None:
            from ipykeep.mcp_server.results import NoticeLedger

            self._notices = NoticeLedger()
        return self._notices

    def server(self) -> Server[Any]:
        # The SDK warns that the logging capability is deprecated for 2026-07-28 sessions; the
        # hosts in use speak earlier versions, where log messages are how notices reach them.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Server(
                "ipykeep",
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self.list_tools,
                on_call_tool=self.call_tool,
                on_list_resources=self.list_resources,
                on_list_resource_templates=self.list_resource_templates,
                on_read_resource=self.read_resource,
                on_set_logging_level=self.set_logging_level,
            )

    # -- logging -------------------------------------------------------------------------------
    async def set_logging_level(
        self, ctx: ServerRequestContext[Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        self.log_level = params.level
        return EmptyResult()

    async def notify(self, ctx: ServerRequestContext[Any], level: str, message: str) -> None:
        """Send ``message`` to the client as an MCP log entry (never fails the call)."""
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks logging deprecated for 2026-07-28+
                await ctx.session.send_log_message(
                    level,  # type: ignore[arg-type]
                    message,
                    "ipykeep",
                    related_request_id=ctx.request_id,
                )
        except Exception:  # a client that went away must not turn a result into an error
            log.debug("log message not delivered", exc_info=True)

    async def progress(
        self, ctx: ServerRequestContext[Any], done: float, total: float | None, message: str
    ) -> None:
        """Report progress on this request (a no-op unless the client sent a progress token)."""
        try:
            await ctx.session.report_progress(done, total, message)
        except Exception:
            log.debug("progress not delivered", exc_info=True)

    # -- tools ---------------------------------------------------------------------------------
    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        if notebook_app.supports_apps(ctx):
            return ListToolsResult(tools=[*self.tools, notebook_app.STATE_TOOL_SPEC])
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

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        spec = BY_NAME.get(params.name)
        try:
            if params.name == notebook_app.STATE_TOOL:
                return await notebook_app.state_result(self.backend, params.arguments)
            if spec is None:
                raise UsageError(
                    f"unknown tool {params.name!r}", hint=f"tools: {', '.join(BY_NAME)}"
                )
            try:
                args = spec.args.model_validate(params.arguments or {})
            except ValidationError as exc:
                raise UsageError(
                    _validation_message(spec.name, exc),
                    hint=f"see the input schema of {spec.name} in tools/list",
                ) from None
            return await self._run(spec, self._params(spec, args, ctx), ctx)
        except IpykeepError as exc:
            from ipykeep.mcp_server.results import error_result

            return error_result(exc)
        except Exception as exc:  # the server must answer whatever happens
            from ipykeep.mcp_server.results import error_result

            log.exception("tool %s failed", params.name)
            return error_result(
                IpykeepError(
                    f"internal error in {params.name}: {type(exc).__name__}: {exc}",
                    hint="see the server's stderr",
                )
            )

    def _params(self, spec: ToolSpec, args: Any, ctx: ServerRequestContext[Any]) -> Params:
        """The tool's arguments as its method's params, with the server's own context."""
        extra: dict[str, Any] = {}
        # watch_file paths stay as given: the engine reads them relative to the kernel's cwd,
        # like the code in the notebook does.
        for key in ("notebook", "cwd"):
            value = getattr(args, key, None)
            if value is not None:
                extra[key] = self._local_path(value)
        if "reader" in spec.method.params.model_fields:
            extra["reader"] = self._reader(ctx)
        if "wait_for_write" in spec.method.params.model_fields:
            # agents read the outputs from the result: the notebook file gets them right after
            # the reply (within write_delay_ms), not on the reply's path
            extra["wait_for_write"] = False
        return engine_params(spec, args, **extra)

    async def _run(
        self, spec: ToolSpec, params: Params, ctx: ServerRequestContext[Any]
    ) -> CallToolResult:
        if spec.method_name == names.CREATE_KERNEL:
            raw = await self._create_kernel(params, ctx)
        elif spec.progress and progress_token_from_params(ctx.params) is not None:
            # Without a token the reports are dropped: the side task and its polling of the
            # daemon would only add to a quick call's round trip.
            raw = await self._with_progress(spec, params, ctx)
        else:
            raw = await self.backend.call(spec.method, params, start=spec.starts_daemon)
        notices = self.notices.fresh(spec.kind, raw)
        result: CallToolResult = await self.results.build(spec.kind, raw)
        for notice in notices:
            await self.notify(ctx, "warning", notice)
        return result

    async def _create_kernel(self, params: Params, ctx: ServerRequestContext[Any]) -> Any:
        # Warm-up can take long: wait a bounded time and report progress rather than block
        # the client past its request timeout.
        from ipykeep.api import methods as api
        from ipykeep.api.kernels import WaitWarmParams

        await self.progress(ctx, 0, None, "starting the kernel")
        raw = await self.backend.call(
            api.CREATE_KERNEL, params.model_copy(update={"wait": False}), start=True
        )
        deadline = time.monotonic() + WARM_WAIT_S
        while (warm := raw.get("warm") or {}).get("finished") is False:
            current = f": {warm['current']}" if warm.get("current") else ""
            await self.progress(
                ctx, warm.get("done", 0), warm.get("total"), f"warming {raw['kernel_id']}{current}"
            )
            left = deadline - time.monotonic()
            if left <= 0:
                break
            raw = await self.backend.call(
                api.WAIT_WARM, WaitWarmParams(kernel_id=raw["kernel_id"], timeout=min(left, 1.0))
            )
        warm = raw.get("warm") or {}
        await self.progress(
            ctx,
            warm.get("done", 1),
            warm.get("total", 1),
            f"{raw['kernel_id']} {raw.get('state', 'ready')}",
        )
        return raw

    async def _with_progress(
        self, spec: ToolSpec, params: Params, ctx: ServerRequestContext[Any]
    ) -> Any:
        """Run a long call (a batch, or a wait for a cell) while reporting, about once a
        second, which execution is running.

        The batch itself is one daemon call; progress comes from polling ``list_kernels`` on
        the side (cheap, and the daemon serves requests concurrently).
        """
        if spec.method_name == names.RUN_STALE and not getattr(params, "execute", False):
            return await self.backend.call(spec.method, params)
        kid = str(getattr(params, "kernel_id", ""))
        cells = getattr(params, "cells", None)
        total = len(cells) if cells is not None else None
        result: dict[str, Any] = {}

        async def call() -> None:
            try:
                result["raw"] = await self.backend.call(spec.method, params)
            except Exception as exc:  # re-raised below, outside the task group's exception group
                result["error"] = exc
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            seen: set[str] = set()
            ticks = 0
            await self.progress(ctx, 0, total, f"{spec.name} started on {kid}")
            while True:
                await anyio.sleep(1.0)
                ticks += 1
                running = await self._running(kid)
                seen.update(running)
                what = f"running {', '.join(running)}" if running else "working"
                await self.progress(
                    ctx, min(len(seen), total) if total else ticks, total, f"{spec.name}: {what}"
                )
        if "error" in result:
            raise result["error"]
        return result["raw"]

    async def _running(self, kid: str) -> list[str]:
        from ipykeep.api import methods as api
        from ipykeep.api.kernels import NoParams

        try:
            kernels = await self.backend.call(api.LIST_KERNELS, NoParams())
        except IpykeepError:
            return []
        return next(
            (list(k.get("running") or []) for k in kernels if k.get("kernel_id") == kid), []
        )

    # -- resources -----------------------------------------------------------------------------
    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        if notebook_app.supports_apps(ctx):
            return ListResourcesResult(resources=[notebook_app.RESOURCE])
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

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        from ipykeep.api import methods as api

        uri = str(params.uri)
        if uri == notebook_app.VIEW_URI:
            return notebook_app.read_view()
        try:
            raw = await self.backend.call(api.READ_ARTIFACT, api.READ_ARTIFACT.build(uri=uri))
        except IpykeepError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, exc.envelope()) from None
        if "text" in raw:
            return ReadResourceResult(
                contents=[
                    TextResourceContents(
                        uri=uri, text=raw["text"], mime_type=raw.get("mime") or "text/plain"
                    )
                ]
            )
        return ReadResourceResult(
            contents=[BlobResourceContents(uri=uri, blob=raw["blob"], mime_type=raw.get("mime"))]
        )


async def run_stdio(app: IpykeepMcp) -> None:
    """Serve one session on stdin/stdout until the client closes it. The SDK answers every
    protocol message: either era's opening (``initialize`` or ``server/discover``), the
    envelopes, cancellations and errors; ``stdio.py`` only carries its lines on the event loop
    (the SDK's own transport when stdin or stdout is not a pipe)."""
    from ipykeep.mcp_server.stdio import serve_pipes, stdio_pipes

    server = app.server()
    with stdio_pipes() as fds:
        if fds is not None:
            await serve_pipes(server, *fds)
            return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(app: IpykeepMcp) -> None:
    anyio.run(run_stdio, app)
