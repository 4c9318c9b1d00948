"""Commands contributed by the other layers, attached to the CLI app at start-up."""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    from .serve.commands import register as register_serve

    register_serve(app)

    from .mcp_server.commands import register as register_mcp

    register_mcp(app)
