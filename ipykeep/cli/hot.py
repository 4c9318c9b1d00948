"""The commands agents call in a loop: ``exec``, ``read``, ``status``, ``run``, ``run-stale``,
``interrupt``.

Loading typer, pydantic and nbformat took ~15x a bare interpreter's start-up, paid on every call
by agents that drive ipykeep from a shell, so these bodies use the standard library only and
render the daemon's JSON through ``client.render`` (attribute views, no models). Calls go through
``DaemonClient.call`` under the method names of ``api.names``; the daemon validates the params
against the declared models, so a bad value is the same ``bad_argument`` error whichever path
parsed the command line. Each returns its exit code; an ipykeep error propagates to the caller.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ipykeep.api import names
from ipykeep.api.errors import IpykeepError
from ipykeep.cli.output import CLI_READER, echo, emit_json, kernel_target
from ipykeep.client.connection import DaemonClient, connect


def _client() -> DaemonClient:
    return connect(Path.cwd())


def status(notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_status
    from ipykeep.client.views import view

    st = _client().call(names.STATUS, **kernel_target(notebook), reader=CLI_READER)
    if as_json:
        emit_json(st)
    else:
        echo(render_status(view(st)))
    return 0


#: Milliseconds one ``read --wait`` call waits before it prints what came and asks again.
READ_SLICE_MS = 10_000
#: Execution states that are not over yet.
_UNFINISHED = ("queued", "running")


def exec_(code: str, notebook: str | None, no_wait: bool, as_json: bool) -> int:
    if code == "-":
        code = sys.stdin.read()
    params: dict[str, Any] = {"code": code, **kernel_target(notebook), "reader": CLI_READER}
    if no_wait:
        params |= {"yield_time_ms": 0}
    rec = _client().call(names.EXECUTE, **params)
    return _print_execution(rec, as_json)


def read(handle: str, notebook: str | None, wait: bool, as_json: bool) -> int:
    client = _client()
    while True:
        rec = client.call(
            names.READ_EXECUTION,
            handle=handle,
            **kernel_target(notebook),
            yield_time_ms=READ_SLICE_MS if wait else 0,
            reader=CLI_READER,
        )
        code = _print_execution(rec, as_json)
        if not wait or rec.get("state") not in _UNFINISHED:
            return code


def _print_execution(rec: dict[str, Any], as_json: bool) -> int:
    """Print one execution record as ``exec`` does; 0 when it ran (or still runs) cleanly."""
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
        if rec.get("state") in _UNFINISHED:
            handle = rec["handle"]
            echo(f"{handle} is {rec['state']}: `ipykeep read {handle}` shows what it printed since")
    return 0 if rec.get("state") in ("ok", *_UNFINISHED) else 1


def run(cells: list[str], notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_batch
    from ipykeep.client.views import view

    batch = _client().call(names.RUN_CELLS, cells=list(cells), **kernel_target(notebook))
    if as_json:
        emit_json(batch)
    else:
        echo(render_batch(view(batch)))
    return batch_exit(batch.get("ok", True), batch.get("stopped"))


def batch_exit(ok: bool, stopped: str | None) -> int:
    """7 when the kernel died or stopped answering under the batch, 6 when it was closed, 1 when
    a cell failed."""
    if stopped == "kernel_unresponsive":
        echo("error: the kernel stopped responding; the remaining cells did not run", err=True)
        echo("hint: the notice above says why and how to resume or restart it", err=True)
        return 7
    if stopped in ("kernel_died", "kernel_restarted"):
        how = "died" if stopped == "kernel_died" else "was restarted"
        echo(f"error: the kernel {how}; the remaining cells did not run", err=True)
        echo(
            "hint: `ipykeep restart` starts it afresh; then `ipykeep run-stale --execute`", err=True
        )
        return 7
    if stopped == "kernel_closed":
        echo(
            "error: the kernel was closed (idle expiry or another client); "
            "the remaining cells did not run",
            err=True,
        )
        echo(
            "hint: start a new kernel with `ipykeep start NOTEBOOK`; "
            "then `ipykeep run-stale --execute`",
            err=True,
        )
        return 6
    return 0 if ok else 1


def interrupt(notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.render import render_interrupt
    from ipykeep.client.views import view

    res = _client().call(names.INTERRUPT, **kernel_target(notebook))
    if as_json:
        emit_json(res)
    else:
        echo(render_interrupt(view(res)))
    return 0


def run_stale(notebook: str | None, execute: bool, fresh: bool, as_json: bool) -> int:
    from ipykeep.client.render import render_plan

    client = _client()
    target = kernel_target(notebook)
    params: dict[str, Any] = {**target, "execute": execute}
    if fresh:
        params["fresh"] = True
    if execute and not as_json:
        from ipykeep.client.progress import ProgressLine, run_with_progress

        def plan_progress() -> Any:
            try:
                return client.call(names.PLAN_PROGRESS, **target)
            except IpykeepError:
                return None

        res = run_with_progress(
            lambda: client.call(names.RUN_STALE, **params),
            plan_progress,
            plan_progress_line,
            ProgressLine(),
            name="ipykeep-run-stale",
        )
    else:
        res = client.call(names.RUN_STALE, **params)
    if as_json:
        emit_json(res)
    else:
        echo(render_plan(res))
    if not execute:
        return 0
    return batch_exit(res.get("ok", True), (res.get("batch") or {}).get("stopped"))


def plan_progress_line(prog: dict[str, Any] | None) -> str | None:
    """What ``plan_progress`` says while a plan runs; None before it starts and once it ends."""
    if not prog or prog.get("finished"):
        return None
    line = f"running plan on {prog['kernel_id']}: {prog['done']}/{prog['total']} cells"
    if prog.get("current"):
        line += f" (running {prog['current']})"
    if prog.get("failed"):
        line += f", {len(prog['failed'])} failed"
    if prog.get("remaining_s") is not None:
        line += f", ~{prog['remaining_s']:.0f} s left"
    return line
