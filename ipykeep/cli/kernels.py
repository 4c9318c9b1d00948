"""The kernel commands beside the hot ones: ``start``, ``stop``, ``restart``, ``watch``,
``inspect``, ``namespace`` and ``debug``, through the declared API's typed params and results."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ipykeep.api import methods as api
from ipykeep.api.environments import AddPackagesParams
from ipykeep.api.errors import UnknownKernelError, UsageError
from ipykeep.api.inspection import InspectParams
from ipykeep.api.kernels import NoParams, StatusParams, WaitWarmParams
from ipykeep.api.records import KernelRecord
from ipykeep.api.spec import KernelParams
from ipykeep.api.staleness import WatchFileParams
from ipykeep.cli.output import CLI_READER, abs_path, echo, emit, kernel_target
from ipykeep.client.connection import DaemonClient, connect, ensure_daemon, find_daemon, pid_alive
from ipykeep.client.progress import ProgressLine, follow
from ipykeep.client.render import render_kernel
from ipykeep.platform.processes import kill_now


def _client() -> DaemonClient:
    return connect(Path.cwd())


def start(
    notebook: str | None,
    no_warm: bool,
    no_write_outputs: bool,
    python: str | None,
    dataflow: str | None,
    serve: bool,
    gateway: str | None,
    as_json: bool,
) -> int:
    if notebook is None:
        from ipykeep.project.config import load_config
        from ipykeep.project.layout import find_project_root

        root = find_project_root()
        cfg = load_config(root)
        if not cfg.notebook:
            raise UsageError(
                "no notebook given", hint="pass NOTEBOOK, or set `notebook` in ipykeep.toml"
            )
        notebook = str(root / cfg.notebook)
    from ipykeep.project.notebook import read_notebook

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
    if not rec.reused:
        rec = _follow_warm(client, rec, quiet=as_json)
    if serve:
        rec = client.invoke(api.SERVE, KernelParams(kernel_id=rec.kernel_id))
    if as_json:
        emit(True, rec, "")
        return 0
    failed = rec.warm.failed if rec.warm and not rec.reused else []
    if rec.reused:
        echo(f"{rec.kernel_id} was already running for this notebook: reused it, not warmed again")
    echo(render_kernel(rec))
    if failed:
        echo(f"{len(failed)} cell(s) failed during warm-up: {', '.join(failed)} (the kernel is up)")
    return 0


def warm_line(rec: KernelRecord) -> str | None:
    """What a warm-up in progress says; None once it has finished (or there is none)."""
    w = rec.warm
    if w is None or w.finished:
        return None
    line = f"warming {rec.kernel_id}: {w.done}/{w.total} cells" + (
        f" (running {w.current})" if w.current else ""
    )
    if w.failed:
        line += f", {len(w.failed)} failed"
    return line


def _follow_warm(client: DaemonClient, rec: KernelRecord, *, quiet: bool) -> KernelRecord:
    line = ProgressLine(quiet=quiet)
    states = iter([rec])

    def poll() -> KernelRecord:
        # the record create_kernel returned first, then wait_warm's long-polls
        current = next(states, None)
        if current is not None:
            return current
        params = WaitWarmParams(kernel_id=rec.kernel_id, timeout=0.5, reader=CLI_READER)
        return client.invoke(api.WAIT_WARM, params)

    rec = follow(poll, warm_line, lambda r: r.warm is None or r.warm.finished, line)
    if rec.warm is not None:
        line.close(f"warmed {rec.kernel_id}: {rec.warm.done}/{rec.warm.total} cells")
    return rec


def stop(notebook: str | None, all_: bool, as_json: bool) -> int:
    desc = find_daemon(Path.cwd())
    if desc is None and all_:
        return _stop_unreachable(as_json)
    client = DaemonClient(desc) if desc is not None else _client()  # _client says what to run
    daemon_pid = client.descriptor.pid
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
        return 0
    if notebook:
        named = kernel_target(notebook)
        target = next(
            (
                k
                for k in status.kernels
                if k.kernel_id == named.get("kernel_id") or k.notebook == named.get("notebook")
            ),
            None,
        )
        if target is None:
            raise UnknownKernelError(
                f"no kernel {notebook!r}: none is bound to {abs_path(notebook)}",
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
    return 0


def _stop_unreachable(as_json: bool) -> int:
    """``stop --all`` without a usable descriptor: the daemon holding the project's lock (if
    any) gets SIGTERM, which closes its kernels as ``shutdown`` would."""
    import signal

    from ipykeep.project import daemon_lock
    from ipykeep.project.layout import project_paths

    owner = daemon_lock.holder(project_paths().daemon_lock)
    if owner is None:
        emit(as_json, {"stopped": []}, "no daemon running")
        return 0
    with contextlib.suppress(OSError):
        os.kill(owner, signal.SIGTERM)
    _wait_gone([owner])
    emit(
        as_json,
        {"stopped": [], "daemon": owner},
        f"stopped the daemon (pid {owner}) and its kernels; it published no usable descriptor",
    )
    return 0


def _wait_gone(pids: list[int], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return
        time.sleep(0.05)
    for p in pids:
        if pid_alive(p):
            try:
                kill_now(p)
            except OSError:
                pass


def restart(notebook: str | None, as_json: bool) -> int:
    rec = _client().invoke(api.RESTART, KernelParams(**kernel_target(notebook)))
    emit(as_json, rec, render_kernel(rec))
    return 0


def watch(path: str, notebook: str | None, as_json: bool) -> int:
    params = WatchFileParams(path=str(Path(path).expanduser().resolve()), **kernel_target(notebook))
    res = _client().invoke(api.WATCH_FILE, params)
    emit(as_json, res, f"watching {res.path}" + ("" if res.exists else " (does not exist yet)"))
    return 0


def add(
    packages: list[str], record: bool, index_url: str | None, notebook: str | None, as_json: bool
) -> int:
    params = AddPackagesParams(
        packages=packages, record=record, index_url=index_url, **kernel_target(notebook)
    )
    res = _client().invoke(api.ADD_PACKAGES, params)
    log = f"\n  installer log: {res.log}" if res.log else ""
    emit(as_json, res, f"{res.kernel_id} ({res.installer}, {res.python}): {res.message}{log}")
    return 0


def inspect(name: str, notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.summaries import render_summary

    summary = _client().invoke(api.INSPECT, InspectParams(name=name, **kernel_target(notebook)))
    echo(summary.compact_json() if as_json else render_summary(summary))
    return 0


def debug(words: list[str], notebook: str | None, handle: str | None, as_json: bool) -> int:
    from ipykeep.api.debugger import DebugParams
    from ipykeep.client.debug_view import render_debug

    first = words[0] if words else ""
    if notebook is None and len(words) > 1 and _names_kernel(first):
        notebook, words = first, words[1:]
    params = DebugParams(command=" ".join(words), handle=handle, **kernel_target(notebook))
    result = _client().invoke(api.DEBUG, params)
    emit(as_json, result, render_debug(result))
    return 0


def _names_kernel(word: str) -> bool:
    """``analysis.ipynb`` or ``k1``: the kernel to debug, written before the command."""
    return word.endswith(".ipynb") or (word[:1] == "k" and word[1:].isdigit())


def namespace(notebook: str | None, as_json: bool) -> int:
    from ipykeep.client.summaries import render_namespace

    listing = _client().invoke(api.NAMESPACE, KernelParams(**kernel_target(notebook)))
    echo(listing.compact_json() if as_json else render_namespace(listing))
    return 0
