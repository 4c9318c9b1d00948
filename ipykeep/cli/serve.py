"""``ipykeep serve`` and ``ipykeep publish``: thin clients of the daemon's serve methods."""

from __future__ import annotations

import json
from pathlib import Path

from ipykeep.api import names
from ipykeep.api.errors import UsageError
from ipykeep.api.records import KernelRecord
from ipykeep.cli.output import echo, emit_json, kernel_target
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


def serve(notebook: str | None, stop: bool, as_json: bool) -> int:
    client = connect(Path.cwd())
    rec = KernelRecord.model_validate(
        client.call(names.UNSERVE if stop else names.SERVE, **kernel_target(notebook))
    )
    if as_json:
        emit_json(rec)
    elif stop:
        echo(f"{rec.kernel_id} is no longer served")
    else:
        echo(f"{rec.kernel_id} ({rec.notebook or 'scratch'}) is served at:")
        echo(rec.served_url or "")
    return 0


def publish(notebook: str | None, cell: list[str], tunnel: bool, as_json: bool) -> int:
    captions = parse_captions(cell)
    client = connect(Path.cwd())
    res = client.call(
        names.PUBLISH, **kernel_target(notebook), cells=captions or None, tunnel=tunnel
    )
    if as_json:
        echo(json.dumps(res, separators=(",", ":")))
    else:
        echo(f"{res['kernel_id']} published:")
        echo(res["url"])
    return 0
