"""The MCP App view of a notebook (``ui://ipykeep/notebook``): tool links, its state tool, its HTML.

Hosts that render MCP Apps (extension ``io.modelcontextprotocol/ui``) show the view beside a
linked tool's call: they read the ``ui://`` resource (one self-contained HTML file, built from
``app/`` at the repository's top and shipped as package data), push the call's input and result
into it, and relay the tools the view calls back. The model's side does not change: results
are the same bytes for every host, and ``tools/list`` grows only by the ``_meta.ui`` links.
The view's own tool (``notebook_view``, visibility ``app``) and the resource are listed only to
clients that advertise the extension, so a host without it sees exactly the catalog it saw.

The extension's identifiers are spelled here rather than imported from ``mcp.server.apps``:
that module loads the SDK's high-level server (about 0.3 s) on a path hosts time (a test
checks that the two agree).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp_types import (
    CallToolResult,
    ReadResourceResult,
    Resource,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

#: ``mcp.server.apps.EXTENSION_ID`` and ``APP_MIME_TYPE``.
EXTENSION_ID = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"

VIEW_URI = "ui://ipykeep/notebook"

#: The tools whose calls the view is shown beside: the ones a person wants to watch because
#: they change or show the notebook as a whole (the plan and its run, cells run by name, the
#: listing). ``ipython`` is not linked: scratch code is no cell of the notebook, and an agent
#: calls it many times a turn, each call would add a copy of the view. Nor is
#: ``create_kernel``: its warm-up is over when the view could show it, the agent's next
#: ``run_stale`` or ``list_cells`` shows the same, and each link costs every host's
#: ``tools/list`` 45 bytes.
LINKED_TOOLS = frozenset({"run_stale", "run_cells", "list_cells"})

#: The view's own state fetch: never shown to the model (visibility ``app``).
STATE_TOOL = "notebook_view"

#: The resource's ``_meta.ui``: no domain of any kind is allowed (the page fetches nothing, its
#: script and styles are inline, its images ``data:`` URIs), and the view draws its own frame.
RESOURCE_UI: dict[str, Any] = {
    "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
    "prefersBorder": True,
}


def link(tools: list[Tool]) -> list[Tool]:
    """``tools`` with the view's link in the ``_meta`` of the linked ones (nothing else)."""
    linked = []
    for tool in tools:
        if tool.name in LINKED_TOOLS:
            meta = {**(tool.meta or {}), "ui": {"resourceUri": VIEW_URI}}
            tool = tool.model_copy(update={"meta": meta})
        linked.append(tool)
    return linked


def supports_apps(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client advertised the extension with the app MIME type (as
    ``mcp.server.apps.client_supports_apps`` decides)."""
    try:
        capabilities = ctx.session.client_capabilities
    except Exception:  # no session to ask (a call served outside the SDK's dispatcher)
        return False
    extensions = getattr(capabilities, "extensions", None) or {}
    settings = extensions.get(EXTENSION_ID)
    if not isinstance(settings, dict):
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list | tuple) and APP_MIME_TYPE in mime_types


STATE_TOOL_SPEC = Tool(
    name=STATE_TOOL,
    title="Notebook view state",
    description="The notebook view's data: cells with their state and reasons, the plan with "
    "its estimate, the latest outputs, the kernel's state.",
    input_schema={
        "type": "object",
        "properties": {
            "kernel_id": {"type": "string"},
            "cells": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["kernel_id"],
    },
    annotations=ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    _meta={"ui": {"resourceUri": VIEW_URI, "visibility": ["app"]}},
)

RESOURCE = Resource(
    uri=VIEW_URI,
    name="notebook",
    title="Notebook view",
    description="The kernel's notebook: cells, stale marks and reasons, the plan, the outputs.",
    mime_type=APP_MIME_TYPE,
    _meta={"ui": RESOURCE_UI},
)


@cache
def html() -> str:
    """The built view (one self-contained HTML file)."""
    return resources.files("ipykeep.mcp_server").joinpath("app/notebook.html").read_text("utf-8")


def read_view() -> ReadResourceResult:
    return ReadResourceResult(
        contents=[
            TextResourceContents(
                uri=VIEW_URI, text=html(), mime_type=APP_MIME_TYPE, _meta={"ui": RESOURCE_UI}
            )
        ]
    )


def standalone(snapshot: dict[str, Any]) -> str:
    """The view as a page of its own, ``snapshot`` embedded (``ipykeep view``): the page shows
    it without a host and without controls."""
    data = json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False)
    # inside <script>, "</" would end the element early; "\u003c/" is the same JSON string
    data = data.replace("</", "\\u003c/")
    tag = f'<script type="application/json" id="ipykeep-snapshot">{data}</script>'
    page = html()
    end = page.rindex("</body>")  # the view's script runs once the page is parsed
    return page[:end] + tag + page[end:]


async def state_result(backend: Any, arguments: dict[str, Any] | None) -> CallToolResult:
    """The ``notebook_view`` call: the snapshot as structured content, a one-line summary as
    text (no model reads it)."""
    from ipykeep.api.errors import UsageError
    from ipykeep.api.methods import BY_NAME as METHODS
    from ipykeep.client.notebook_view import collect

    args = arguments or {}
    kernel_id = args.get("kernel_id")
    cells = args.get("cells")
    if not isinstance(kernel_id, str) or not kernel_id:
        raise UsageError("notebook_view: kernel_id is required", hint="e.g. kernel_id='k1'")
    if cells is not None and not (
        isinstance(cells, list) and all(isinstance(c, str) for c in cells)
    ):
        raise UsageError("notebook_view: cells must be a list of cell ids", hint="or leave it out")

    async def call(name: str, params: dict[str, Any]) -> Any:
        method = METHODS[name]
        return await backend.call(method, method.build(**params))

    snapshot = await collect(call, {"kernel_id": kernel_id}, cells)
    stale = sum(1 for c in snapshot["cells"] if c.get("state") == "stale")
    summary = f"{kernel_id}: {len(snapshot['cells'])} cells, {stale} stale"
    return CallToolResult(content=[TextContent(text=summary)], structured_content=snapshot)
