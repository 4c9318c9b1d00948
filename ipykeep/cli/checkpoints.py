"""``ipykeep checkpoint [NAME]``, ``ipykeep restore NAME`` and ``ipykeep checkpoints``."""

from __future__ import annotations

import json

import typer

from ipykeep.api import names
from ipykeep.api.errors import IpykeepError
from ipykeep.checkpoints import store as _store  # noqa: F401  (registers the checkpoint error codes for RPC replies)
from ipykeep.cli.fast import abs_path
from ipykeep.cli.options import fail, json_option, notebook_option
from ipykeep.client.connection import connect


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.1f} KB"


def _call(method: str, **params: object) -> dict:
    from pathlib import Path

    try:
        return connect(Path.cwd()).call(method, **params)
    except IpykeepError as exc:
        raise fail(exc) from None


NotebookOpt = notebook_option()
JsonOpt = json_option()


def render_listing(res: dict) -> str:
    if not res.get("enabled"):
        return f"checkpoints are off in {res['kernel_id']}: {res.get('reason') or 'not set up'}"
    lines = [f"kernel {res['kernel_id']}: checkpoint store {_mb(res.get('store_bytes', 0))}"]
    for c in res.get("cells", []):
        state = "restorable" if c["restorable"] else "NOT restorable"
        why = "; ".join(f"{n}: {w}" for n, w in sorted(c.get("failed", {}).items()))
        lines.append(
            f"  cell {c['index']} ({c['cell_id']}): {state}, {_mb(c.get('bytes', 0))} {', '.join(c.get('values', []))}"
            + (f" — {why}" if why else "")
        )
    for n in res.get("named", []):
        lines.append(f"  named {n['name']}: {n['values']} value(s), {_mb(n['bytes'])}")
    last = res.get("last_restore")
    if last:
        lines.append(
            f"  last restore: {len(last.get('restored', []))} cell(s) restored in {last.get('restore_s', 0):.2f} s, "
            f"{len(last.get('rerun', []))} re-run, {last.get('saved_s', 0):.2f} s saved"
        )
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command()
    def checkpoint(
        name: str | None = typer.Argument(None, help="Checkpoint name (default: a timestamp)."),
        notebook: str | None = NotebookOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Save every variable of the kernel under NAME, to roll back to with `ipykeep restore NAME`."""
        res = _call(names.CHECKPOINT, name=name, notebook=abs_path(notebook))
        if as_json:
            typer.echo(json.dumps(res, separators=(",", ":")))
            return
        typer.echo(
            f"checkpoint {res['name']}: {len(res.get('values', []))} value(s), {_mb(res.get('bytes', 0))} in {res.get('seconds', 0):.2f} s"
        )
        for n, why in sorted((res.get("failed") or {}).items()):
            typer.echo(f"  not saved: {n}: {why}")

    @app.command()
    def restore(
        name: str = typer.Argument(..., help="A checkpoint made with `ipykeep checkpoint NAME`."),
        notebook: str | None = NotebookOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Roll the kernel's variables back to checkpoint NAME (variables made since are deleted)."""
        res = _call(names.RESTORE, name=name, notebook=abs_path(notebook))
        if as_json:
            typer.echo(json.dumps(res, separators=(",", ":")))
            return
        typer.echo(
            f"restored {len(res.get('restored', []))} value(s) from {res['name']} in {res.get('seconds', 0):.2f} s"
            + (f"; deleted {', '.join(res['deleted'])}" if res.get("deleted") else "")
        )
        for n, why in sorted((res.get("not_rolled_back") or {}).items()):
            typer.echo(f"  not rolled back: {n}: {why}")

    @app.command()
    def checkpoints(notebook: str | None = NotebookOpt, as_json: bool = JsonOpt) -> None:
        """What is checkpointed for the kernel's notebook (per cell and named), and its size."""
        res = _call(names.CHECKPOINTS, notebook=abs_path(notebook))
        typer.echo(json.dumps(res, separators=(",", ":")) if as_json else render_listing(res))
