"""The standard-library command-line parser for the table's hot commands and ``--version``.

It reads the same declarations the typer app is built from (``cli.commands``), and gives up on
anything it does not fully understand (``--help``, a missing argument, an unknown option, a
value of the wrong type, ``--``) by returning None: the typer app then owns help and error
messages. Both paths run the table's rules and handler, so output and exit codes are the same
whichever path ran.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ipykeep.api.errors import IpykeepError
from ipykeep.cli.commands import BY_NAME, GLOBAL_FLAGS, VERSION_FLAGS
from ipykeep.cli.declare import Command, Param, run_handler
from ipykeep.cli.output import echo, report_error, version_line


def normalize_argv(args: list[str]) -> list[str]:
    """``ipykeep --json status`` as ``ipykeep status --json``: global flags before the command
    move to just after its name (not to the end, where they could follow a ``--``)."""
    i = 0
    while i < len(args) and args[i] in GLOBAL_FLAGS:
        i += 1
    if i == 0 or i == len(args) or args[i].startswith("-"):
        return list(args)
    return [args[i], *dict.fromkeys(args[:i]), *args[i + 1 :]]


def _converted(param: Param, text: str) -> Any:
    """``text`` as the parameter's type; ValueError for a type this parser leaves to typer."""
    if param.type == "str":
        return text
    if param.type == "int":
        return int(text)
    if param.type == "path":
        return Path(text)
    raise ValueError(param.type)


def parse(command: Command, args: list[str]) -> dict[str, Any] | None:
    """The command's parameters by ``dest``, or None when the typer app must handle the line."""
    by_flag = {name: p for p in command.params if not p.positional for name in p.flags}
    values: dict[str, Any] = {
        p.dest: list(p.default) if p.multiple and p.default is not None else p.default
        for p in command.params
    }
    loose: list[str] = []
    try:
        i = 0
        while i < len(args):
            tok = args[i]
            if not tok.startswith("-") or tok == "-":
                loose.append(tok)
                i += 1
                continue
            name, eq, attached = tok.partition("=")
            param = by_flag.get(name)
            if param is None:  # --help, --, -nVALUE, an unknown option: typer says it
                return None
            if param.type == "bool":
                if eq:
                    return None
                values[param.dest] = True
                i += 1
                continue
            if eq and name.startswith("--"):
                text, i = attached, i + 1
            elif not eq and i + 1 < len(args):
                text, i = args[i + 1], i + 2
            else:  # a missing value, or -n=VALUE (click reads that as "=VALUE")
                return None
            value = _converted(param, text)
            if param.multiple:
                values[param.dest] = [*(values[param.dest] or []), value]
            else:
                values[param.dest] = value
    except ValueError:
        return None
    for param in command.params:
        if not param.positional:
            continue
        if param.multiple:
            if param.required and not loose:
                return None
            values[param.dest], loose = loose, []
        elif loose:
            values[param.dest] = loose.pop(0)
        elif param.required:
            return None
    return None if loose else values


def run(args: list[str]) -> int | None:
    """Run ``args`` (normalized) when this parser understands them: the exit code, else None."""
    if os.environ.get("IPYKEEP_CLI_FULL") == "1":  # everything through typer (tests compare)
        return None
    if len(args) == 1 and args[0] in VERSION_FLAGS:
        echo(version_line())
        return 0
    command = BY_NAME.get(args[0]) if args else None
    if command is None or not command.hot:
        return None
    values = parse(command, args[1:])
    if values is None:
        return None
    try:
        return run_handler(command, values)
    except IpykeepError as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        echo("\nAborted!", err=True)  # as click says it
        return 1
