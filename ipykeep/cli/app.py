"""The ``ipykeep`` command line: a thin client of the project daemon.

Exit codes (also in the README): 0 success; 1 a cell failed; 2 usage or configuration error;
3 no daemon running (or it refused the request); 4 notebook missing or invalid; 5 unknown cell
or variable; 6 unknown kernel; 7 kernel failed to start or died; 8 timed out; 9 kernel busy.
"""

from __future__ import annotations

from ipykeep._startup import trim_imports

trim_imports()  # before nbformat is imported (see _startup)

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer

from ipykeep.api import methods as api
from ipykeep.api.errors import UnknownKernelError, UsageError
from ipykeep.api.inspection import InspectParams
from ipykeep.api.kernels import NoParams, StatusParams, WaitWarmParams
from ipykeep.api.records import KernelRecord
from ipykeep.api.spec import KernelParams
from ipykeep.api.staleness import WatchFileParams
from ipykeep.cli import fast
from ipykeep.cli.options import (
    BIND_HELP,
    guarded,
    json_option,
    notebook_argument,
    notebook_option,
    pick_notebook,
)
from ipykeep.client.connection import DaemonClient, connect, ensure_daemon, find_daemon, pid_alive
from ipykeep.client.render import render_kernel
from ipykeep.project.config import load_config
from ipykeep.project.layout import find_project_root
from ipykeep.project.notebook import read_notebook

app = typer.Typer(
    name="ipykeep",
    help="A persistent, dataflow-aware Jupyter kernel bound to your notebook.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

JsonOpt = json_option()
NotebookOpt = notebook_option()
NotebookArg = notebook_argument()


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(fast.version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_show_version,
        is_eager=True,
        help="Print ipykeep's version and exit.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Same as --json after the command: print compact JSON."
    ),
) -> None:
    # Global options only: a --json here was moved after the command's name (normalize_argv).
    del version, as_json


def emit(as_json: bool, payload: Any, text: str) -> None:
    if as_json:
        if hasattr(payload, "model_dump"):
            payload = payload.model_dump(mode="json", exclude_none=True)
        typer.echo(json.dumps(payload, separators=(",", ":")))
    else:
        typer.echo(text)


def _client() -> DaemonClient:
    return connect(Path.cwd())


# -- start / stop / status -----------------------------------------------------------------------
@app.command()
@guarded
def start(
    notebook: str | None = notebook_argument(BIND_HELP),
    notebook_opt: str | None = notebook_option(BIND_HELP),
    no_warm: bool = typer.Option(False, "--no-warm", help="Do not run the notebook's cells now."),
    no_write_outputs: bool = typer.Option(
        False, "--no-write-outputs", help="Never write outputs into the notebook."
    ),
    python: str | None = typer.Option(None, "--python", help="Python that runs the kernel."),
    dataflow: str | None = typer.Option(
        None, "--dataflow", help="'static' (default) or 'ipyflow'."
    ),
    serve: bool = typer.Option(
        False, "--serve", help="Also serve the kernel to JupyterLab / VS Code."
    ),
    gateway: str | None = typer.Option(
        None,
        "--gateway",
        help="Run the kernel on this Jupyter server / gateway URL (token: $JUPYTER_GATEWAY_AUTH_TOKEN).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Start (or reuse) the project's daemon and a kernel bound to NOTEBOOK, warmed up."""
    notebook = pick_notebook(notebook, notebook_opt)
    if notebook is None:
        root = find_project_root()
        cfg = load_config(root)
        if not cfg.notebook:
            raise UsageError(
                "no notebook given", hint="pass NOTEBOOK, or set `notebook` in ipykeep.toml"
            )
        notebook = str(root / cfg.notebook)
    nb_path = Path(notebook).expanduser().resolve()
    read_notebook(nb_path)  # a bad notebook fails here, before any process starts
    params = api.CREATE_KERNEL.build(  # a bad --dataflow fails here, before the daemon starts
        notebook=str(nb_path),
        warm=not no_warm,
        write_outputs=False if no_write_outputs else None,
        python=python,
        dataflow=dataflow,
        wait=False,
        gateway=gateway,
    )
    client = ensure_daemon(nb_path.parent)
    rec = client.invoke(api.CREATE_KERNEL, params)
    rec = _follow_warm(client, rec, quiet=as_json)
    if serve:
        rec = client.invoke(api.SERVE, KernelParams(kernel_id=rec.kernel_id))
    if as_json:
        emit(True, rec, "")
        return
    failed = rec.warm.failed if rec.warm else []
    typer.echo(render_kernel(rec))
    if failed:
        typer.echo(
            f"{len(failed)} cell(s) failed during warm-up: {', '.join(failed)} (the kernel is up)"
        )


def _follow_warm(client: DaemonClient, rec: KernelRecord, *, quiet: bool) -> KernelRecord:
    tty = sys.stderr.isatty()
    last = None
    while rec.warm is not None and not rec.warm.finished:
        w = rec.warm
        line = f"warming {rec.kernel_id}: {w.done}/{w.total} cells" + (
            f" (running {w.current})" if w.current else ""
        )
        if w.failed:
            line += f", {len(w.failed)} failed"
        if not quiet and line != last:
            if tty:
                sys.stderr.write("\r" + line.ljust(78))
                sys.stderr.flush()
            else:
                _err(line)
            last = line
        rec = client.invoke(api.WAIT_WARM, WaitWarmParams(kernel_id=rec.kernel_id, timeout=0.5))
    if rec.warm is not None and not quiet:
        done = f"warmed {rec.kernel_id}: {rec.warm.done}/{rec.warm.total} cells"
        if tty:
            sys.stderr.write("\r" + done.ljust(78) + "\n")
        else:
            _err(done)
    return rec


@app.command()
@guarded
def stop(
    notebook: str | None = NotebookArg,
    notebook_opt: str | None = NotebookOpt,
    all_: bool = typer.Option(False, "--all", help="Stop every kernel and the daemon."),
    as_json: bool = JsonOpt,
) -> None:
    """Stop one notebook's kernel, or everything; returns once the processes are gone."""
    notebook = pick_notebook(notebook, notebook_opt)
    desc = find_daemon(Path.cwd())
    if desc is None and all_:
        emit(as_json, {"stopped": []}, "no daemon running")
        return
    client = DaemonClient(desc) if desc is not None else _client()  # _client says what to run
    daemon_pid = (
        client.descriptor.pid
    )  # desc may be None here: _client() looked the daemon up itself
    status = client.invoke(api.STATUS, StatusParams())
    if all_:
        pids = [k.pid for k in status.kernels if k.pid] + [daemon_pid]
        client.invoke(api.SHUTDOWN, NoParams())
        _wait_gone(pids)
        emit(
            as_json,
            {"stopped": [k.kernel_id for k in status.kernels], "daemon": daemon_pid},
            f"stopped {len(status.kernels)} kernel(s) and the daemon",
        )
        return
    if notebook:
        target = next((k for k in status.kernels if k.notebook == fast.abs_path(notebook)), None)
        if target is None:
            raise UnknownKernelError(
                f"no kernel is bound to {fast.abs_path(notebook)}",
                hint="`ipykeep status` lists the kernels",
            )
    else:
        target = status.kernels[0] if len(status.kernels) == 1 else None
    if target is None:
        raise UsageError(
            f"{len(status.kernels)} kernels are running; say which notebook (or --all)",
            hint="ipykeep stop NOTEBOOK",
        )
    last = len(status.kernels) == 1
    client.invoke(api.CLOSE_KERNEL, KernelParams(kernel_id=target.kernel_id))
    _wait_gone([p for p in [target.pid] + ([daemon_pid] if last else []) if p])
    emit(
        as_json,
        {"stopped": [target.kernel_id]},
        f"stopped {target.kernel_id} ({target.notebook or 'scratch'})",
    )


def _wait_gone(pids: list[int], timeout: float = 20.0) -> None:
    import signal

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return
        time.sleep(0.05)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


@app.command()
@guarded
def status(
    notebook: str | None = NotebookArg,
    notebook_opt: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Kernels, their notebooks and per-cell state (one notebook's, when given)."""
    _exit(fast.cmd_status(pick_notebook(notebook, notebook_opt), as_json))


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


# -- running code ---------------------------------------------------------------------------------
# These commands' bodies live in cli_fast, which also runs them without typer on the hot path.
@app.command()
@guarded
def run(
    cells: list[str] = typer.Argument(..., help="Cell ids or 0-based indexes among all cells."),
    notebook: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run notebook cells, in the order given, with their source on disk now."""
    _exit(fast.cmd_run(list(cells), notebook, as_json))


@app.command()
@guarded
def restart(
    notebook: str | None = NotebookArg,
    notebook_opt: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Restart the notebook's kernel (dead or alive): same kernel id, fresh state."""
    notebook = pick_notebook(notebook, notebook_opt)
    rec = _client().invoke(api.RESTART, KernelParams(notebook=fast.abs_path(notebook)))
    emit(as_json, rec, render_kernel(rec))


@app.command("exec")
@guarded
def exec_(
    code: str = typer.Argument(
        ..., help="Python code to run in the notebook's kernel ('-' reads stdin)."
    ),
    notebook: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run scratch code in the kernel; print its output; non-zero exit on error."""
    _exit(fast.cmd_exec(code, notebook, as_json))


@app.command()
@guarded
def interrupt(
    notebook: str | None = NotebookArg,
    notebook_opt: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Interrupt what the kernel is running (kill and restart it if it ignores SIGINT)."""
    _exit(fast.cmd_interrupt(pick_notebook(notebook, notebook_opt), as_json))


@app.command("run-stale")
@guarded
def run_stale(
    notebook: str | None = NotebookArg,
    notebook_opt: str | None = NotebookOpt,
    execute: bool = typer.Option(False, "--execute", help="Run the plan (default: only show it)."),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="With --execute: restart the kernel and run every cell instead (same state, from scratch).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Which cells must re-run after edits, and why; --execute re-runs exactly those.

    Each planned cell shows its last measured duration and the plan its total; when the plan
    would take longer than restarting and running every cell, the output says so and
    --execute --fresh does that instead. Progress goes to stderr while a plan runs.
    Plan mode exits 0 whatever it finds; --execute exits 0 when every cell succeeded, 1 when
    one failed (its dependents are skipped and reported; independent cells still run).
    """
    _exit(fast.cmd_run_stale(pick_notebook(notebook, notebook_opt), execute, fresh, as_json))


@app.command()
@guarded
def watch(
    path: str = typer.Argument(..., help="A file the notebook depends on that detection missed."),
    notebook: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Register PATH as an input of the notebook: its changes make the cells that use it stale."""
    params = WatchFileParams(
        path=str(Path(path).expanduser().resolve()), notebook=fast.abs_path(notebook)
    )
    res = _client().invoke(api.WATCH_FILE, params)
    emit(as_json, res, f"watching {res.path}" + ("" if res.exists else " (does not exist yet)"))


@app.command()
@guarded
def inspect(
    name: str = typer.Argument(
        ..., help='A variable, or a safe path like model.coef_ or df["col"].'
    ),
    notebook: str | None = NotebookOpt,
    as_json: bool = JsonOpt,
) -> None:
    """A typed, bounded summary of a live variable."""
    from ipykeep.client.summaries import render_summary

    summary = _client().invoke(
        api.INSPECT, InspectParams(name=name, notebook=fast.abs_path(notebook))
    )
    if as_json:
        typer.echo(summary.compact_json())
    else:
        typer.echo(render_summary(summary))


@app.command()
@guarded
def namespace(notebook: str | None = NotebookOpt, as_json: bool = JsonOpt) -> None:
    """Every user variable in the kernel with type, shape, memory and defining cell."""
    from ipykeep.client.summaries import render_namespace

    listing = _client().invoke(api.NAMESPACE, KernelParams(notebook=fast.abs_path(notebook)))
    if as_json:
        typer.echo(listing.compact_json())
    else:
        typer.echo(render_namespace(listing))


def main(args: list[str] | None = None) -> None:
    from ipykeep.cli.extensions import register_all

    register_all(app)
    argv = fast.normalize_argv(sys.argv[1:] if args is None else args)
    app(args=argv, prog_name="ipykeep")


if __name__ == "__main__":
    main()
