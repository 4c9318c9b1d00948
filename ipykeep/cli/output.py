"""How every CLI command prints: plain text, compact JSON and ipykeep errors, without typer."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from ipykeep.api.errors import IpykeepError

#: The CLI's reader name on the daemon: its own output cursor (``read`` goes on where
#: ``exec --no-wait`` or the last read left off) and its own view of pending notices (each is
#: shown once by ``start`` / ``status``, not on every poll).
CLI_READER = "cli"

# What click.echo strips when not writing to a terminal.
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` without typer: ANSI styles stripped unless the stream is a terminal."""
    stream = sys.stderr if err else sys.stdout
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


def emit_json(payload: Any) -> None:
    """A record as compact JSON; a pydantic model as the daemon would have sent it."""
    if hasattr(payload, "model_dump"):
        payload = payload.model_dump(mode="json", exclude_none=True)
    echo(json.dumps(payload, separators=(",", ":")))


def emit(as_json: bool, payload: Any, text: str) -> None:
    """``payload`` as JSON with ``--json``, else ``text``."""
    if as_json:
        emit_json(payload)
    else:
        echo(text)


def report_error(exc: IpykeepError) -> int:
    """The one way the CLI reports an ipykeep error (on stderr); the exit code."""
    from ipykeep.client.render import render_error

    echo(render_error(exc), err=True)
    return exc.exit_code


def abs_path(path: str | None) -> str | None:
    """A notebook argument as the daemon expects it: absolute, resolved (None stays None)."""
    return str(Path(path).expanduser().resolve()) if path else None


def kernel_target(arg: str | None) -> dict[str, str | None]:
    """What a ``NOTEBOOK`` / ``-n`` / ``-k`` argument names, as the daemon's params: a kernel id
    (``k1``, when no file of that name exists here) or a notebook path (absolute)."""
    if arg and KERNEL_ID.fullmatch(arg) and not Path(arg).exists():
        return {"kernel_id": arg}
    return {"notebook": abs_path(arg)}


#: What kernel ids look like (``k1``, ``k12``), as the engine hands them out.
KERNEL_ID = re.compile(r"k[0-9]+")


def version_line() -> str:
    from ipykeep import __version__

    return f"ipykeep {__version__}"
