"""The CLI's entry point and its hot path: the commands an agent calls in a loop.

``exec``, ``status``, ``run``, ``run-stale`` and ``interrupt`` send one JSON line to the daemon
and print its answer. Loading typer, pydantic and nbformat for that took ~15× a bare
interpreter's start-up, paid on every call by agents that drive ipykeep from a shell. This
module parses those commands with the standard library and renders the daemon's JSON through
``core.render`` (attribute views, no models). Anything it does not fully understand (``--help``,
a missing argument, an unknown option, ``--``) goes to the typer app in ``cli``, which owns
help and error messages; its commands for these five call the same functions below, so output
and exit codes are the same whichever path ran.

Calls go through ``core.client.DaemonClient.call`` under the method names of ``api.names``
(the declared API without its pydantic models, which this path never loads); the daemon
validates the params against the declared models, so a bad value is the same
``bad_argument`` error whichever client sent it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipykeep.api import names
from ipykeep.api.errors import IpykeepError

_NOTEBOOK = {"--notebook": "notebook", "-n": "notebook"}
#: command -> (positional arguments as (name, nargs) with nargs "1", "?" or "+"; flags; options with a value)
_SPECS: dict[str, tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]] = {
    "exec": ([("code", "1")], {"--json": "as_json"}, _NOTEBOOK),
    "status": ([("notebook", "?")], {"--json": "as_json"}, _NOTEBOOK),
    "run": ([("cells", "+")], {"--json": "as_json"}, _NOTEBOOK),
    "run-stale": (
        [("notebook", "?")],
        {"--json": "as_json", "--execute": "execute", "--fresh": "fresh"},
        _NOTEBOOK,
    ),
    "interrupt": ([("notebook", "?")], {"--json": "as_json"}, _NOTEBOOK),
}

#: Flags every command that prints takes, accepted before the command's name too.
GLOBAL_FLAGS = ("--json",)
#: What the notebook argument means wherever it names the kernel to use.
NOTEBOOK_HELP = "Notebook whose kernel to use (optional with one kernel)."

_ANSI = re.compile(
    r"\033\[[;?0-9]*[a-zA-Z]"
)  # what click.echo strips when not writing to a terminal


def parse(command: str, args: list[str]) -> dict[str, Any] | None:
    """The command's arguments, or None when the typer app must handle the line."""
    positionals, flags, options = _SPECS[command]
    values: dict[str, Any] = {dest: False for dest in flags.values()}
    values.update({dest: None for dest in options.values()})
    loose: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("-") and tok != "-":
            name, eq, attached = tok.partition("=")
            if name in flags and not eq:
                values[flags[name]] = True
            elif name in options and eq and name.startswith("--"):
                values[options[name]] = attached
            elif name in options and not eq and i + 1 < len(args):
                values[options[name]] = args[i + 1]
                i += 1
            else:  # --help, --, -nVALUE, an unknown option, a missing value: typer says it
                return None
        else:
            loose.append(tok)
        i += 1
    for name, nargs in positionals:
        if nargs == "+":
            if not loose:
                return None
            values[name], loose = loose, []
        elif nargs == "1":
            if not loose:
                return None
            values[name] = loose.pop(0)
        else:
            if (
                loose and values.get(name) is not None
            ):  # NOTEBOOK and --notebook both: typer says it
                return None
            values[name] = loose.pop(0) if loose else values.get(name)
    return None if loose else values


def normalize_argv(args: list[str]) -> list[str]:
    """``ipykeep --json status`` as ``ipykeep status --json``: global flags before the command
    move to just after its name (not to the end, where they could follow a ``--``)."""
    i = 0
    while i < len(args) and args[i] in GLOBAL_FLAGS:
        i += 1
    if i == 0 or i == len(args) or args[i].startswith("-"):
        return list(args)
    return [args[i], *dict.fromkeys(args[:i]), *args[i + 1 :]]


def version_line() -> str:
    from ipykeep import __version__

    return f"ipykeep {__version__}"


# -- output ---------------------------------------------------------------------------------------
def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` without typer: ANSI styles stripped unless the stream is a terminal."""
    stream = sys.stderr if err else sys.stdout
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


def report_error(exc: IpykeepError) -> int:
    """The one way the CLI reports an ipykeep error (on stderr); the exit code."""
    from ipykeep.client.render import render_error

    echo(render_error(exc), err=True)
    return exc.exit_code


def emit_json(payload: Any) -> None:
    # The daemon sends records as model_dump(mode="json", exclude_none=True): print them as sent.
    echo(json.dumps(payload, separators=(",", ":")))


def abs_path(path: str | None) -> str | None:
    """A notebook argument as the daemon expects it: absolute, resolved (None stays None)."""
    return str(Path(path).expanduser().resolve()) if path else None


def _client() -> Any:
    from ipykeep.client.connection import connect

    return connect(Path.cwd())


# -- commands (each returns its exit code; IpykeepError propagates to the caller) ---------------
def cmd_status(notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_status
    from ipykeep.client.views import view

    st = _client().call(names.STATUS, notebook=abs_path(notebook))
    if as_json:
        emit_json(st)
    else:
        echo(render_status(view(st)))
    return 0


def cmd_exec(code: str, notebook: str | None, as_json: bool) -> int:
    if code == "-":
        code = sys.stdin.read()
    rec = _client().call(names.EXECUTE, code=code, notebook=abs_path(notebook))
    if as_json:
        emit_json(rec)
    else:
        for notice in rec.get("notices") or []:
            echo(f"notice: {notice}", err=True)
        output = rec.get("output") or {}
        text = output.get("text") or ""
        if text:
            echo(text, nl=not text.endswith("\n"))
        for img in output.get("images") or []:
            echo(f"[image {img['mime']}: {img['path']}]")
        error = rec.get("error")
        if error:
            echo(error.get("traceback") or f"{error['ename']}: {error['evalue']}", err=True)
    return 0 if rec.get("state") == "ok" else 1


def cmd_run(cells: list[str], notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_batch
    from ipykeep.client.views import view

    batch = _client().call(names.RUN_CELLS, cells=cells, notebook=abs_path(notebook))
    if as_json:
        emit_json(batch)
    else:
        echo(render_batch(view(batch)))
    return batch_exit(batch.get("ok", True), batch.get("stopped"))


def batch_exit(ok: bool, stopped: str | None) -> int:
    """7 when the kernel died under the batch, 6 when it was closed, 1 when a cell failed."""
    if stopped in ("kernel_died", "kernel_restarted"):
        echo(
            f"error: the kernel {'died' if stopped == 'kernel_died' else 'was restarted'}; the remaining cells did not run",
            err=True,
        )
        echo(
            "hint: `ipykeep restart` starts it afresh; then `ipykeep run-stale --execute`", err=True
        )
        return 7
    if stopped == "kernel_closed":
        echo(
            "error: the kernel was closed (idle expiry or another client); the remaining cells did not run",
            err=True,
        )
        echo(
            "hint: start a new kernel with `ipykeep start NOTEBOOK`; then `ipykeep run-stale --execute`",
            err=True,
        )
        return 6
    return 0 if ok else 1


def cmd_interrupt(notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_interrupt
    from ipykeep.client.views import view

    res = _client().call(names.INTERRUPT, notebook=abs_path(notebook))
    if as_json:
        emit_json(res)
    else:
        echo(render_interrupt(view(res)))
    return 0


def cmd_run_stale(notebook: str | None, execute: bool, fresh: bool, as_json: bool) -> int:
    from ipykeep.api.errors import UsageError
    from ipykeep.client.render import render_plan

    if fresh and not execute:
        raise UsageError(
            "--fresh restarts the kernel and runs every cell: it needs --execute",
            hint="ipykeep run-stale --execute --fresh",
        )
    client = _client()
    path = abs_path(notebook)
    params: dict[str, Any] = {"notebook": path, "execute": execute}
    if fresh:
        params["fresh"] = True
    if execute and not as_json:
        res = _with_progress(client, lambda: client.call(names.RUN_STALE, **params), notebook=path)
    else:
        res = client.call(names.RUN_STALE, **params)
    if as_json:
        emit_json(res)
    else:
        echo(render_plan(res))
    if not execute:
        return 0
    return batch_exit(res.get("ok", True), (res.get("batch") or {}).get("stopped"))


def _with_progress(client: Any, call: Callable[[], Any], *, notebook: str | None) -> Any:
    """Run the blocking ``call`` in a thread while stderr shows the plan's progress."""
    import threading

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, daemon=True, name="ipykeep-run-stale")
    worker.start()
    worker.join(0.5)
    tty = sys.stderr.isatty()
    last = shown = None
    while worker.is_alive():
        try:
            prog = client.call(names.PLAN_PROGRESS, notebook=notebook)
        except IpykeepError:
            prog = None
        if prog and not prog.get("finished"):
            line = f"running plan on {prog['kernel_id']}: {prog['done']}/{prog['total']} cells"
            if prog.get("current"):
                line += f" (running {prog['current']})"
            if prog.get("failed"):
                line += f", {len(prog['failed'])} failed"
            if prog.get("remaining_s") is not None:
                line += f", ~{prog['remaining_s']:.0f} s left"
            if line != last:
                sys.stderr.write(("\r" + line.ljust(78)) if tty else line + "\n")
                sys.stderr.flush()
                last = shown = line
        worker.join(0.5)
    if shown and tty:
        sys.stderr.write("\n")
    if "error" in box:
        raise box["error"]
    return box["value"]


_COMMANDS: dict[str, Callable[..., int]] = {
    "exec": cmd_exec,
    "status": cmd_status,
    "run": cmd_run,
    "run-stale": cmd_run_stale,
    "interrupt": cmd_interrupt,
}


def run_fast(command: str, values: dict[str, Any]) -> int:
    """Run a parsed hot-path command: errors print as the typer app prints them."""
    try:
        return _COMMANDS[command](**values)
    except IpykeepError as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        echo("\nAborted!", err=True)  # as click says it
        return 1


def main(argv: list[str] | None = None) -> None:
    args = normalize_argv(sys.argv[1:] if argv is None else argv)
    fast = (
        os.environ.get("IPYKEEP_CLI_FULL") != "1"
    )  # "1": everything through typer (tests compare)
    if fast and args in (["--version"], ["-V"]):
        echo(version_line())
        sys.exit(0)
    if fast and args and args[0] in _SPECS:
        values = parse(args[0], args[1:])
        if values is not None:
            sys.exit(run_fast(args[0], values))
    from ipykeep.cli.app import main as full_main

    full_main(args)


if __name__ == "__main__":
    main()
