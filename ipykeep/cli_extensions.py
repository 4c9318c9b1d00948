"""Commands contributed by the other layers, attached to the CLI app at start-up."""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    from .checkpoints.commands import register as register_checkpoints
    from .mcp_server.commands import register as register_mcp
    from .scaffold.commands import register as register_scaffold
    from .serve.commands import register as register_serve

    register_mcp(app)
    register_serve(app)
    register_scaffold(app)
    register_checkpoints(app)
