"""Commands contributed by the other layers, attached to the CLI app at start-up."""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    from ipykeep.cli.checkpoints import register as register_checkpoints
    from ipykeep.cli.mcp import register as register_mcp
    from ipykeep.cli.scaffold import register as register_scaffold
    from ipykeep.cli.serve import register as register_serve

    register_mcp(app)
    register_serve(app)
    register_scaffold(app)
    register_checkpoints(app)
