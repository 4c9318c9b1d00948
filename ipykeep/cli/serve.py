"""``ipykeep serve`` and ``ipykeep publish``: thin clients of the daemon's serve methods."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ipykeep.api import names
from ipykeep.api.errors import IpykeepError, UsageError
from ipykeep.api.records import KernelRecord
from ipykeep.cli.fast import abs_path
from ipykeep.cli.options import fail, json_option, notebook_argument, notebook_option, pick_notebook
from ipykeep.client.connection import connect


def parse_captions(items: list[str]) -> dict[str, str]:
    """``ID=CAPTION`` pairs (the caption may contain ``=``); a bare ID gets an empty caption."""
    out: dict[str, str] = {}
    for item in items:
        ref, sep, caption = item.partition("=")
        if not ref.strip():
            raise UsageError(
                f"--cell {item!r} names no cell", hint="use --cell ID=CAPTION (id or 0-based index)"
            )
        out[ref.strip()] = caption.strip() if sep else ""
    return out


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        notebook: str | None = notebook_argument(),
        notebook_opt: str | None = notebook_option(),
        stop: bool = typer.Option(
            False, "--stop", help="Detach the kernel from the Jupyter server instead."
        ),
        as_json: bool = json_option(),
    ) -> None:
        """Open the running kernel in JupyterLab / VS Code: prints the server URL with its token."""
        try:
            notebook = pick_notebook(notebook, notebook_opt)
            client = connect(Path.cwd())
            rec = KernelRecord.model_validate(
                client.call(names.UNSERVE if stop else names.SERVE, notebook=abs_path(notebook))
            )
        except IpykeepError as exc:
            raise fail(exc) from None
        if as_json:
            typer.echo(
                json.dumps(rec.model_dump(mode="json", exclude_none=True), separators=(",", ":"))
            )
        elif stop:
            typer.echo(f"{rec.kernel_id} is no longer served")
        else:
            typer.echo(f"{rec.kernel_id} ({rec.notebook or 'scratch'}) is served at:")
            typer.echo(rec.served_url or "")

    @app.command()
    def publish(
        notebook: str | None = notebook_argument(),
        notebook_opt: str | None = notebook_option(),
        cell: list[str] = typer.Option(
            [], "--cell", help="Highlight a cell: ID=CAPTION (repeatable)."
        ),
        tunnel: bool = typer.Option(
            False, "--tunnel", help="Also expose it through a cloudflared quick tunnel."
        ),
        as_json: bool = json_option(),
    ) -> None:
        """A live, token-protected view of the kernel's notebook with captioned cells."""
        try:
            notebook = pick_notebook(notebook, notebook_opt)
            captions = parse_captions(cell)
            client = connect(Path.cwd())
            res = client.call(
                names.PUBLISH, notebook=abs_path(notebook), cells=captions or None, tunnel=tunnel
            )
        except IpykeepError as exc:
            raise fail(exc) from None
        if as_json:
            typer.echo(json.dumps(res, separators=(",", ":")))
        else:
            typer.echo(f"{res['kernel_id']} published:")
            typer.echo(res["url"])
