"""Commands contributed by the other layers, attached to the CLI app at start-up."""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    pass
