"""``ipykeep view``: the notebook view of a kernel written as a standalone HTML snapshot."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ipykeep.cli.output import echo, kernel_target
from ipykeep.client.connection import connect
from ipykeep.client.notebook_view import collect
from ipykeep.mcp_server.notebook_app import standalone
from ipykeep.project.atomic import atomic_write_text


def view(notebook: str | None, output: Path | None) -> int:
    client = connect(Path.cwd())

    async def call(name: str, params: dict[str, Any]) -> Any:
        return await client.acall(name, **params)

    target = {k: v for k, v in kernel_target(notebook).items() if v is not None}
    snapshot = asyncio.run(collect(call, target))
    kernel_id = snapshot["kernel"]["kernel_id"]
    path = (output or Path(f"ipykeep-view-{kernel_id}.html")).expanduser()
    atomic_write_text(path, standalone(snapshot), mode=0o600)  # it holds the outputs
    echo(f"wrote the view of {kernel_id} to {path}")
    return 0
