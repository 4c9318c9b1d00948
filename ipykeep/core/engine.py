"""The engine: a registry of kernels and executions, and the one API every transport uses.

Every public coroutine here is reachable over the daemon's RPC under the same name with the
same keyword arguments, and returns a typed record. Kernel ids (``k1``…) and execution handles
(``c1``…) are never reused in a project: counters continue from what earlier daemons left in
``.ipykeep/kernels``.

Scheduling, per kernel: notebook cells and stale plans take the main shell in order (one
batch at a time, under ``main_lock``). Scratch code runs on the main shell when it is free and
on an ipykernel-7 subshell when it is not, so a long cell never blocks the agent; when every
subshell is busy and the queue is full the call is refused with a retryable error.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from .archive import KernelArchive, read_artifact
from .bounding import bound_text
from .config import Config, resolve_python
from .errors import (
    ExecutionLostError,
    IpykeepError,
    KernelBusyError,
    KernelDiedError,
    KernelStartError,
    RemoteNotSupportedError,
    UnknownCellError,
    UnknownKernelError,
    UsageError,
)
from .execution import Execution
from .kernel import WARM_TRACEBACKS, KernelProcess
from .providers import LaunchSpec, is_remote_location, make_provider
from .notebook import CellOutputs, NotebookSnapshot, read_notebook, write_outputs
from .project import ProjectPaths
from .records import (
    BatchResult,
    CellState,
    CellsRecord,
    DaemonInfo,
    ErrorInfo,
    ExecutionRecord,
    ImageRef,
    InterruptResult,
    KernelRecord,
    OutputView,
    SkippedCell,
    StatusRecord,
    WarmProgress,
    WriteResult,
)

log = logging.getLogger("ipykeep.engine")

HANDLE_BLOCK = 1000


@dataclass
class CellRun:
    """What the registry remembers of a notebook cell's latest execution."""

    handle: str
    source: str
    state: str
    execution_count: int | None
    index: int


@dataclass
class KernelEntry:
    kernel_id: str
    process: KernelProcess
    notebook: Path | None
    cwd: Path
    config: Config
    archive: KernelArchive
    created_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    state: str = "starting"
    closed: bool = False
    executions: dict[str, Execution] = field(default_factory=dict)
    cell_runs: dict[str, CellRun] = field(default_factory=dict)
    request_ids: dict[str, tuple[str, str]] = field(default_factory=dict)
    main_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    queued: int = 0
    notices: list[str] = field(default_factory=list)
    warm: WarmProgress | None = None
    warm_task: asyncio.Task[Any] | None = None
    served_url: str | None = None
    published: bool = False
    own_writes: set[str] = field(default_factory=set)
    hooks: dict[str, Any] = field(default_factory=dict)

    def touch(self) -> None:
        self.last_activity = time.time()

    def running(self) -> list[str]:
        return [h for h, ex in self.executions.items() if ex.state in ("running", "queued")]

    def take_notices(self) -> list[str] | None:
        if not self.notices:
            return None
        out, self.notices = self.notices, []
        return out


def unknown_kernel_error(paths: ProjectPaths, kernel_id: str, live: list[str]) -> UnknownKernelError:
    """Say what became of a kernel id, from what earlier daemons left in ``.ipykeep/kernels``."""
    running = ", ".join(live) or "none"
    kdir = paths.kernel_dir(kernel_id)
    closed = kdir / "closed.json"
    hint = f"start a new kernel (create_kernel / `ipykeep start`); its record stays in {kdir / 'record.jsonl'}"
    if closed.is_file():
        with contextlib.suppress(ValueError, OSError):
            info = json.loads(closed.read_text())
            return UnknownKernelError(
                f"kernel {kernel_id} was closed: {info.get('reason', 'closed')} (running now: {running})", hint=hint
            )
    if kdir.is_dir():
        return UnknownKernelError(
            f"kernel {kernel_id} belonged to a daemon that is no longer running; its state is gone (running now: {running})",
            hint=hint,
        )
    return UnknownKernelError(
        f"no kernel {kernel_id!r} (running: {running})",
        hint="list kernels with `ipykeep status` or the list_kernels tool",
    )


class Engine:
    """Owns every kernel of one project."""

    def __init__(self, paths: ProjectPaths, config: Config) -> None:
        self.paths = paths
        self.config = config
        self.started_at = time.time()
        self.kernels: dict[str, KernelEntry] = {}
        self._next_kernel, self._next_handle = self._load_counters()
        self._reserved_handles = self._next_handle
        self._readers: dict[tuple[str, str], int] = {}
        self._expiry_task: asyncio.Task[Any] | None = None
        self.on_empty: Callable[[], None] | None = None
        #: extension points filled by the staleness and inspection layers
        self.plugins: list[Any] = []

    # -- ids ---------------------------------------------------------------------------------
    def _counters_file(self) -> Path:
        return self.paths.kernels / "counters.json"

    def _load_counters(self) -> tuple[int, int]:
        nk, nh = 1, 1
        with contextlib.suppress(Exception):
            data = json.loads(self._counters_file().read_text())
            nk, nh = int(data["kernel"]), int(data["handle"])
        with contextlib.suppress(OSError):
            for child in self.paths.kernels.iterdir():
                m = re.fullmatch(r"k(\d+)", child.name)
                if m:
                    nk = max(nk, int(m.group(1)) + 1)
        return nk, nh

    def _save_counters(self) -> None:
        tmp = self._counters_file().with_suffix(".tmp")
        try:
            self.paths.kernels.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"kernel": self._next_kernel, "handle": max(self._next_handle, self._reserved_handles)}))
            tmp.replace(self._counters_file())
        except OSError as exc:
            # Ids stay unique in this daemon; only a successor could reuse some after a crash.
            log.warning("counters not saved: %s", exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _new_handle(self) -> str:
        # Handles are reserved in blocks so the hot path does not write a file per call; a
        # daemon that dies starts its successor after the whole reserved block.
        if self._next_handle >= self._reserved_handles:
            self._reserved_handles = self._next_handle + HANDLE_BLOCK
            self._save_counters()
        handle = f"c{self._next_handle}"
        self._next_handle += 1
        return handle

    # -- lookup ------------------------------------------------------------------------------
    def entry(self, kernel_id: str | None = None, notebook: str | None = None) -> KernelEntry:
        if kernel_id:
            entry = self.kernels.get(kernel_id)
            if entry is None:
                raise self._unknown_kernel(kernel_id)
            return entry
        live = [e for e in self.kernels.values() if not e.closed]
        if notebook:
            path = self._notebook_path(notebook)
            for e in live:
                if e.notebook == path:
                    return e
            raise UnknownKernelError(
                f"no kernel is bound to {path}", hint=f"start one with `ipykeep start {notebook}`"
            )
        if len(live) == 1:
            return live[0]
        if not live:
            raise UnknownKernelError("no kernel is running", hint="start one with `ipykeep start NOTEBOOK`")
        raise UsageError(
            f"{len(live)} kernels are running ({', '.join(self._describe(e) for e in live)}); say which",
            hint="name the notebook (or pass the kernel id)",
        )

    def _unknown_kernel(self, kernel_id: str) -> UnknownKernelError:
        live = [k for k, e in self.kernels.items() if not e.closed]
        return unknown_kernel_error(self.paths, kernel_id, live)

    def _live(self, kernel_id: str | None, notebook: str | None = None) -> KernelEntry:
        entry = self.entry(kernel_id, notebook)
        if entry.closed:
            raise UnknownKernelError(
                f"kernel {entry.kernel_id} is closed", hint="its records stay readable; start a new kernel to run code"
            )
        return entry

    @staticmethod
    def _describe(e: KernelEntry) -> str:
        return f"{e.kernel_id}: {e.notebook.name if e.notebook else 'scratch'}"

    def _notebook_path(self, notebook: str) -> Path:
        if "\0" in notebook:
            raise UsageError(f"not a path: {notebook!r}", hint="pass the path of a file or directory")
        path = Path(notebook).expanduser()
        if not path.is_absolute():
            path = Path(os.getcwd()) / path
        return path.resolve()

    # -- records -----------------------------------------------------------------------------
    def _output_view(self, entry: KernelEntry, ex: Execution, cursor: int) -> tuple[OutputView, int]:
        text, new_cursor = ex.text_since(cursor)
        full_path = uri = None
        images = []
        try:
            if len(text) > entry.config.max_output_chars:
                art = entry.archive.store_text(text)
                full_path, uri = str(art.path), art.uri
            for img in ex.images_since(cursor):
                art = entry.archive.store(base64.b64decode(img["data"]), img["mime"])
                images.append(ImageRef(mime=img["mime"], path=str(art.path), uri=art.uri))
        except OSError as exc:  # a full disk costs the artifact, never the result
            log.warning("artifact of %s not stored: %s", ex.handle, exc)
            note = f"artifacts could not be stored ({exc.strerror or exc}); the output shown is all there is"
            if note not in entry.notices:
                entry.notices.append(note)
        bounded = bound_text(text, entry.config.max_output_chars, full_path=full_path, uri=uri)
        view = OutputView(
            text=bounded.text,
            truncated=bounded.truncated,
            total_chars=bounded.total_chars,
            total_lines=bounded.total_lines,
            full_path=full_path,
            uri=uri,
            images=images,
            dropped_bytes=ex.dropped_bytes,
        )
        return view, new_cursor

    def _error_info(self, entry: KernelEntry, ex: Execution) -> ErrorInfo | None:
        if not ex.error:
            return None
        tb = "\n".join(ex.error.get("traceback", []))
        bounded = bound_text(tb, max(entry.config.max_output_chars, 1500))
        return ErrorInfo(ename=ex.error["ename"], evalue=ex.error["evalue"], traceback=bounded.text)

    def record(self, entry: KernelEntry, ex: Execution, *, cursor: int = 0, reader: str | None = None) -> ExecutionRecord:
        output, new_cursor = self._output_view(entry, ex, cursor)
        if reader is not None:
            self._readers[(reader, ex.handle)] = new_cursor
        index = None
        if ex.cell_id and ex.cell_id in entry.cell_runs:
            index = entry.cell_runs[ex.cell_id].index
        return ExecutionRecord(
            handle=ex.handle,
            kernel_id=entry.kernel_id,
            kind=ex.kind,
            state=ex.state,
            cell_id=ex.cell_id,
            index=index,
            execution_count=ex.execution_count,
            duration_s=round(ex.duration, 4) if ex.duration is not None else None,
            subshell=ex.subshell or None,
            output=output,
            error=self._error_info(entry, ex),
            cursor=new_cursor,
            notices=entry.take_notices(),
        )

    def _kernel_state(self, entry: KernelEntry) -> str:
        if entry.closed:
            return "closed"
        if not entry.process.alive and entry.state not in ("starting",):
            return "dead"
        if entry.state in ("starting", "warming"):
            return entry.state
        return "busy" if entry.running() else "idle"

    def kernel_record(self, entry: KernelEntry, *, with_cells: bool = False) -> KernelRecord:
        cells = None
        stale_count = None
        # Not while warming, unless cells are asked for: warm-up progress is polled every half
        # second, and re-reading the notebook and re-planning each time slows the warm-up.
        if entry.notebook is not None and not entry.closed and (with_cells or entry.state != "warming"):
            try:
                snap = read_notebook(entry.notebook)
                states = self.cell_states(entry, snap)
                stale_count = sum(1 for c in states if c.state in ("stale", "failed", "never_run"))
                cells = states if with_cells else None
            except IpykeepError as exc:
                entry.notices.append(f"notebook unreadable: {exc.message}")
        return KernelRecord(
            kernel_id=entry.kernel_id,
            pid=entry.process.pid,
            state=self._kernel_state(entry),  # type: ignore[arg-type]
            notebook=str(entry.notebook) if entry.notebook else None,
            cwd=str(entry.cwd),
            python=entry.process.python,
            dataflow=entry.process.dataflow,
            running=entry.running(),
            stale_count=stale_count,
            warm=entry.warm,
            cells=cells,
            served_url=entry.served_url,
            notices=list(entry.notices) or None,
        )

    def cell_states(self, entry: KernelEntry, snap: NotebookSnapshot) -> list[CellState]:
        stale: dict[str, list[dict[str, Any]]] = {}
        for plugin in self.plugins:
            if hasattr(plugin, "stale_reasons"):
                stale.update(plugin.stale_reasons(entry, snap))
        out = []
        for cell in snap.cells:
            first = cell.source.strip().splitlines()[0][:80] if cell.source.strip() else ""
            if cell.cell_type != "code":
                out.append(CellState(cell_id=cell.cell_id, index=cell.index, cell_type=cell.cell_type, state="markdown", first_line=first))
                continue
            run = entry.cell_runs.get(cell.cell_id)
            ex = entry.executions.get(run.handle) if run else None
            if ex is not None and ex.state in ("running", "queued"):
                state = "running"
            elif run is None:
                state = "never_run"
            elif run.state != "ok":
                state = "failed"
            elif cell.cell_id in stale or (not self.plugins and run.source != cell.source):
                state = "stale"
            else:
                state = "ok"
            out.append(
                CellState(
                    cell_id=cell.cell_id,
                    index=cell.index,
                    cell_type="code",
                    state=state,
                    handle=run.handle if run else None,
                    execution_count=run.execution_count if run else None,
                    reasons=stale.get(cell.cell_id),
                    first_line=first,
                )
            )
        return out

    # -- kernels -----------------------------------------------------------------------------
    async def ping(self) -> DaemonInfo:
        return DaemonInfo(pid=os.getpid(), version=__version__, project=str(self.paths.root), started_at=self.started_at)

    async def status(self, notebook: str | None = None, kernel_id: str | None = None) -> StatusRecord:
        if notebook or kernel_id:
            entries = [self.entry(kernel_id, notebook)]
        else:
            entries = [e for e in self.kernels.values() if not e.closed]
        return StatusRecord(
            daemon=await self.ping(),
            kernels=[self.kernel_record(e, with_cells=True) for e in entries],
        )

    async def list_kernels(self) -> list[KernelRecord]:
        return [self.kernel_record(e) for e in self.kernels.values() if not e.closed]

    def _resolve_cwd(self, cwd: str | None, notebook: Path | None) -> Path:
        if notebook is not None:
            return notebook.parent
        if cwd is None:
            return self.paths.root
        if "://" in cwd:
            raise RemoteNotSupportedError(
                f"remote working directories are not supported: {cwd}",
                hint="use ssh://user@host/path for a kernel over SSH, or gateway=URL for a Jupyter server",
            )
        path = self._notebook_path(cwd)
        root = self.paths.root.resolve()
        if path != root and root not in path.parents:
            raise UsageError(
                f"cwd {path} is outside the project {root}",
                hint="use a directory inside the project, or start ipykeep from the other project",
            )
        if not path.is_dir():
            raise UsageError(f"cwd {path} is not a directory", hint="create it first or pick another")
        return path

    async def create_kernel(
        self,
        notebook: str | None = None,
        cwd: str | None = None,
        python: str | None = None,
        warm: bool = True,
        write_outputs: bool | None = None,
        dataflow: str | None = None,
        wait: bool = True,
        gateway: str | None = None,
    ) -> KernelRecord:
        """Start a kernel (bound to ``notebook`` if given), or return the one already bound.

        ``gateway`` (a Jupyter server URL) or a ``cwd`` of ``ssh://user@host/path`` runs the
        kernel remotely (see ``providers/``)."""
        nb_path = None
        snap = None
        if notebook:
            nb_path = self._notebook_path(notebook)
            for e in self.kernels.values():
                if not e.closed and e.notebook == nb_path:
                    return self.kernel_record(e)
            root = self.paths.root.resolve()
            if root not in nb_path.parents:
                raise UsageError(
                    f"notebook {nb_path} is outside the project {root}",
                    hint="use a notebook inside the project, or start ipykeep from the notebook's own project",
                )
            snap = read_notebook(nb_path)  # validates before anything starts
        if dataflow is not None and dataflow not in ("ipyflow", "static"):
            raise UsageError(f"dataflow must be 'ipyflow' or 'static', not {dataflow!r}")
        config = self.config.with_overrides(python=python, write_outputs=write_outputs, dataflow=dataflow)
        config = config.with_overrides(python=resolve_python(config.python, self.paths.root))
        if gateway:
            config = config.with_overrides(kernel_provider="gateway", gateway_url=gateway)
        remote = cwd if is_remote_location(cwd) else None
        work_dir = self._resolve_cwd(None if remote else cwd, nb_path)
        kernel_id = f"k{self._next_kernel}"
        self._next_kernel += 1
        self._save_counters()
        launch = LaunchSpec(name=kernel_id, python=config.python, dataflow=config.dataflow, cwd=work_dir)
        provider = make_provider(launch, config, location=remote)
        process = KernelProcess(python=config.python, dataflow=config.dataflow, cwd=work_dir, name=kernel_id, provider=provider)
        entry = KernelEntry(
            kernel_id=kernel_id,
            process=process,
            notebook=nb_path,
            cwd=work_dir,
            config=config,
            archive=KernelArchive(self.paths.kernel_dir(kernel_id), kernel_id),
        )
        self.kernels[kernel_id] = entry
        process.on_death = lambda p, e=entry: self._on_death(e)
        process.on_foreign = lambda msg, e=entry: self._on_foreign(e, msg)
        try:
            await process.start()
            for plugin in self.plugins:
                if hasattr(plugin, "kernel_started"):
                    await plugin.kernel_started(self, entry)
        except BaseException:
            del self.kernels[kernel_id]
            await process.shutdown(now=True)
            raise
        entry.state = "idle"
        self._ensure_expiry()
        if snap is not None and warm and snap.code_cells:
            entry.state = "warming"
            entry.warm = WarmProgress(done=0, total=len(snap.code_cells))
            entry.warm_task = asyncio.create_task(self._warm(entry))
            if wait:
                await asyncio.shield(entry.warm_task)
        return self.kernel_record(entry)

    async def _warm(self, entry: KernelEntry) -> BatchResult:
        try:
            snap = read_notebook(entry.notebook)  # type: ignore[arg-type]
            for plugin in self.plugins:
                if hasattr(plugin, "warm_starting"):
                    await plugin.warm_starting(self, entry)
            return await self._run_batch(entry, snap, [c.cell_id for c in snap.code_cells], progress=entry.warm)
        finally:
            for plugin in self.plugins:
                if hasattr(plugin, "warm_finished"):
                    with contextlib.suppress(Exception):
                        await plugin.warm_finished(self, entry)
            if entry.warm:
                entry.warm.finished = True
                entry.warm.current = None
            if entry.state == "warming":
                entry.state = "idle"

    async def wait_warm(self, kernel_id: str | None = None, notebook: str | None = None, timeout: float = 0.5) -> KernelRecord:
        """Wait up to ``timeout`` s for warm-up; returns the record with its progress."""
        entry = self.entry(kernel_id, notebook)
        if entry.warm_task is not None and not entry.warm_task.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(entry.warm_task), timeout)
        return self.kernel_record(entry)

    async def close_kernel(self, kernel_id: str | None = None, notebook: str | None = None) -> KernelRecord:
        entry = self.entry(kernel_id, notebook)
        if not entry.closed:
            await self._close(entry, "closed on request")
        return self.kernel_record(entry)

    async def _close(self, entry: KernelEntry, why: str) -> None:
        entry.closed = True
        if entry.warm_task and not entry.warm_task.done():
            entry.warm_task.cancel()
        for plugin in self.plugins:
            if hasattr(plugin, "kernel_closing"):
                with contextlib.suppress(Exception):
                    await plugin.kernel_closing(self, entry)
        await entry.process.shutdown(now=True)
        with contextlib.suppress(OSError):
            (entry.archive.dir / "closed.json").write_text(
                json.dumps({"kernel_id": entry.kernel_id, "reason": why, "closed_at": time.time(),
                            "notebook": str(entry.notebook) if entry.notebook else None})
            )
        log.info("kernel %s closed: %s", entry.kernel_id, why)
        if self.on_empty and not any(not e.closed for e in self.kernels.values()):
            self.on_empty()

    async def shutdown(self) -> None:
        await asyncio.gather(*(self._close(e, "daemon shutting down") for e in self.kernels.values() if not e.closed))
        for plugin in self.plugins:
            if hasattr(plugin, "shutdown"):
                with contextlib.suppress(Exception):
                    await plugin.shutdown(self)

    def _on_death(self, entry: KernelEntry) -> None:
        if entry.closed:
            return
        lost = entry.process.provider.lost_reason  # a remote kernel's link, not the kernel
        entry.notices.append(
            f"kernel {entry.kernel_id} " + (f"is unreachable: {lost}" if lost else "died; its state is gone")
            + " (restart it: `ipykeep restart` / the restart_kernel tool; run_stale then re-runs what is needed)"
        )
        entry.state = "dead"
        for plugin in self.plugins:
            if hasattr(plugin, "kernel_lost"):
                plugin.kernel_lost(self, entry)

    def _on_foreign(self, entry: KernelEntry, msg: dict[str, Any]) -> None:
        for plugin in self.plugins:
            if hasattr(plugin, "foreign_message"):
                plugin.foreign_message(self, entry, msg)

    # -- idle expiry -------------------------------------------------------------------------
    def _ensure_expiry(self) -> None:
        if self._expiry_task is None and self.config.idle_timeout > 0:
            self._expiry_task = asyncio.create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        period = min(max(self.config.idle_timeout / 10, 0.2), 30)
        while True:
            await asyncio.sleep(period)
            now = time.time()
            for entry in list(self.kernels.values()):
                if entry.closed or entry.running() or entry.served_url or entry.published:
                    continue
                if entry.config.idle_timeout > 0 and now - entry.last_activity > entry.config.idle_timeout:
                    await self._close(entry, f"idle for more than {entry.config.idle_timeout:g} s")

    # -- notebook cells ----------------------------------------------------------------------
    async def run_cells(
        self, cells: list[str], kernel_id: str | None = None, notebook: str | None = None
    ) -> BatchResult:
        """Run notebook cells (ids or 0-based indexes) in the given order, using the source on disk now."""
        entry = self._live(kernel_id, notebook)
        if entry.notebook is None:
            raise UsageError(f"kernel {entry.kernel_id} has no notebook", hint="use `exec` for scratch code")
        if not cells:
            raise UsageError("no cells given", hint="name cells by id or 0-based index")
        snap = read_notebook(entry.notebook)
        chosen = [snap.resolve(ref) for ref in cells]
        for cell in chosen:
            if cell.cell_type != "code":
                raise UnknownCellError(
                    f"cell {cell.index} ({cell.cell_id}) is a {cell.cell_type} cell, not code",
                    hint="only code cells run",
                )
        return await self._run_batch(entry, snap, [c.cell_id for c in chosen])

    async def _run_batch(
        self,
        entry: KernelEntry,
        snap: NotebookSnapshot,
        cell_ids: list[str],
        *,
        progress: WarmProgress | None = None,
        skip_if: Callable[[str, set[str]], str | None] | None = None,
    ) -> BatchResult:
        """Run cells on the main shell in order, then write outputs back once."""
        by_id = snap.by_id()
        results: list[ExecutionRecord] = []
        skipped: list[SkippedCell] = []
        failed: set[str] = set()
        ran: list[tuple[Execution, str]] = []
        # Queue every execution first so the handles exist (and show as queued) at once.
        planned = []
        previous: dict[str, CellRun | None] = {}
        for cid in cell_ids:
            cell = by_id[cid]
            ex = self._new_execution(entry, cell.source, "cell", cell_id=cid)
            previous[cid] = entry.cell_runs.get(cid)
            entry.cell_runs[cid] = CellRun(ex.handle, cell.source, "queued", None, cell.index)
            planned.append((cell, ex))
        stopped: str | None = None
        current: Execution | None = None
        try:
            async with entry.main_lock:
                generation = entry.process.generation
                for cell, ex in planned:
                    entry.touch()
                    if progress is not None:
                        progress.current = cell.cell_id
                    why = skip_if(cell.cell_id, failed) if skip_if else None
                    if stopped is None and (not entry.process.alive or entry.closed):
                        stopped = "kernel_died" if not entry.closed else "kernel_closed"
                    elif stopped is None and entry.process.generation != generation:
                        # Restarted under the batch: what the cells above built is gone.
                        stopped = "kernel_restarted"
                    if why or stopped:
                        reason = why or {
                            "kernel_died": "kernel is not running",
                            "kernel_closed": "kernel closed",
                            "kernel_restarted": "the kernel was restarted under the batch",
                            "interrupted": "the batch was interrupted",
                        }[stopped]  # type: ignore[index]
                        self._skip(entry, ex, cell, previous[cell.cell_id], reason, skipped)
                        continue
                    current = ex
                    await self._run_cell(entry, cell, ex)
                    current = None
                    if ex.state != "ok":
                        failed.add(cell.cell_id)
                        if progress is not None:
                            progress.failed.append(cell.cell_id)
                    if ex.state == "interrupted":
                        stopped = "interrupted"  # an interrupt stops the whole batch
                    elif ex.state == "lost" and not entry.process.alive:
                        stopped = "kernel_died"
                    ran.append((ex, cell.source))
                    results.append(self.record(entry, ex))
                    if progress is not None:
                        progress.done += 1
        except asyncio.CancelledError:
            # The caller went away (a disconnected client): stop the running cell, run no more.
            if current is not None and not current.finished:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self._interrupt_execution(entry, current))
            for cell, ex in planned:
                if not ex.finished:
                    self._skip(entry, ex, cell, previous[cell.cell_id], "the client disconnected", skipped)
            with contextlib.suppress(Exception):
                self._write_back(entry, ran)
            raise
        finally:
            # Whatever failed above (a full disk, a bug), no cell stays queued or running.
            for cell, ex in planned:
                if not ex.finished:
                    ex.finish("lost", note="skipped: the batch stopped early")
                    before = previous[cell.cell_id]
                    if entry.cell_runs.get(cell.cell_id) is not None and entry.cell_runs[cell.cell_id].handle == ex.handle:
                        if before is None:
                            entry.cell_runs.pop(cell.cell_id, None)
                        else:
                            entry.cell_runs[cell.cell_id] = before
        write = self._write_back(entry, ran)
        if stopped == "kernel_died":
            entry.notices.append(
                f"kernel {entry.kernel_id} died; {len(skipped)} cell(s) did not run — "
                "restart it (`ipykeep restart` / the restart_kernel tool) and run_stale re-runs what is needed"
            )
        return BatchResult(
            kernel_id=entry.kernel_id,
            ok=not failed and stopped is None,
            results=results,
            skipped=skipped,
            write=write,
            stopped=stopped,
            notices=entry.take_notices(),
        )

    def _skip(
        self, entry: KernelEntry, ex: Execution, cell: Any, before: CellRun | None, reason: str, skipped: list[SkippedCell]
    ) -> None:
        ex.finish("lost", note=f"skipped: {reason}")
        # A skipped cell keeps pointing at its last real execution.
        if before is None:
            entry.cell_runs.pop(cell.cell_id, None)
        else:
            entry.cell_runs[cell.cell_id] = before
        skipped.append(SkippedCell(cell_id=cell.cell_id, index=cell.index, reason=reason))

    def _expressions(self, entry: KernelEntry, hook: str, *args: Any) -> dict[str, str]:
        """Probe expressions the layers want evaluated with an execution (see KernelProcess.run)."""
        exprs: dict[str, str] = {}
        for plugin in self.plugins:
            if hasattr(plugin, hook):
                exprs.update(getattr(plugin, hook)(entry, *args))
        return exprs

    async def _run_cell(self, entry: KernelEntry, cell: Any, ex: Execution) -> None:
        ex.expressions = {**self._expressions(entry, "cell_expressions", cell), "ipykeep_warm": WARM_TRACEBACKS}
        timeout = entry.config.cell_timeout or None
        # Shielded: a caller that goes away (cancellation) leaves the execution tracked to its
        # end, so the batch can interrupt it and see it finish.
        run = asyncio.ensure_future(entry.process.run(ex, timeout=timeout))
        try:
            await asyncio.shield(run)
        except IpykeepError as exc:
            if exc.code == "timeout":
                await self._interrupt_execution(entry, ex)
            ex.finish("failed", note=exc.message)
        entry.cell_runs[cell.cell_id] = CellRun(ex.handle, cell.source, ex.state, ex.execution_count, cell.index)
        self._archive(entry, ex)
        for plugin in self.plugins:
            if hasattr(plugin, "after_cell"):
                await plugin.after_cell(self, entry, cell, ex)

    def _archive(self, entry: KernelEntry, ex: Execution) -> None:
        """Append to the kernel's record; a full or read-only disk costs the record, not the run."""
        try:
            entry.archive.append_execution(ex)
        except OSError as exc:
            log.warning("record of %s not written: %s", ex.handle, exc)
            note = f"the archival record could not be written ({exc.strerror or exc}); results stay in memory"
            if note not in entry.notices:
                entry.notices.append(note)

    def _write_back(self, entry: KernelEntry, ran: list[tuple[Execution, str]]) -> WriteResult | None:
        if not ran or entry.notebook is None or not entry.config.write_outputs:
            return None
        updates = {
            ex.cell_id: CellOutputs(source=src, outputs=ex.nbformat_outputs(), execution_count=ex.execution_count)
            for ex, src in ran
            if ex.cell_id
        }
        try:
            rep = write_outputs(entry.notebook, updates)
        except IpykeepError as exc:
            entry.notices.append(f"outputs not written: {exc.message}")
            return WriteResult(written=False, error=exc.message)
        if rep.content_hash:
            entry.own_writes.add(rep.content_hash)
        if rep.repairs:
            entry.notices.append(f"{entry.notebook.name} repaired on write: " + "; ".join(rep.repairs))
        if rep.skipped_edited:
            entry.notices.append(
                "cells edited on disk while they ran kept their new source and got no output: "
                + ", ".join(rep.skipped_edited)
            )
        return WriteResult(
            written=rep.written, updated=rep.updated, skipped_edited=rep.skipped_edited, repairs=rep.repairs
        )

    # -- scratch code ------------------------------------------------------------------------
    def _new_execution(self, entry: KernelEntry, code: str, kind: Any, **kw: Any) -> Execution:
        ex = Execution(handle=self._new_handle(), kernel_id=entry.kernel_id, code=code, kind=kind, **kw)
        ex.cap = entry.config.output_cap_bytes
        entry.executions[ex.handle] = ex
        return ex

    async def execute(
        self,
        code: str,
        kernel_id: str | None = None,
        notebook: str | None = None,
        yield_time_ms: int | None = None,
        request_id: str | None = None,
        reader: str = "default",
    ) -> ExecutionRecord:
        """Run scratch code; return when it finishes or after ``yield_time_ms`` (None = wait)."""
        entry = self._live(kernel_id, notebook)
        entry.touch()
        if request_id:
            seen = entry.request_ids.get(request_id)
            if seen is not None:
                if seen[0] != code:
                    raise UsageError(
                        f"request_id {request_id!r} was already used with different code (execution {seen[1]})",
                        hint="use a new request_id for new code",
                    )
                return await self.read_execution(seen[1], kernel_id=entry.kernel_id, yield_time_ms=yield_time_ms or 0, reader=reader, cursor=0)
        if not entry.process.alive:
            lost = entry.process.provider.lost_reason
            raise KernelDiedError(
                f"kernel {entry.kernel_id} is not running" + (f": {lost}" if lost else ""),
                hint="restart it (`ipykeep restart` / the restart_kernel tool), then run_stale re-runs what is needed",
            )
        subshell = None
        if entry.main_lock.locked():
            subshell = await entry.process.acquire_subshell(entry.config.max_subshells)
            if subshell is None and entry.queued >= entry.config.max_queue:
                raise KernelBusyError(
                    f"kernel {entry.kernel_id} is saturated: {len(entry.running())} executions running or queued",
                    hint="wait for running work to finish (read_cell), or interrupt it, then retry",
                )
        ex = self._new_execution(entry, code, "scratch", request_id=request_id)
        if request_id:
            entry.request_ids[request_id] = (code, ex.handle)
        task = asyncio.create_task(self._run_scratch(entry, ex, subshell))
        entry.hooks.setdefault("tasks", set()).add(task)
        task.add_done_callback(entry.hooks["tasks"].discard)
        await ex.wait(None if yield_time_ms is None else yield_time_ms / 1000)
        return self.record(entry, ex, cursor=0, reader=reader)

    async def _run_scratch(self, entry: KernelEntry, ex: Execution, subshell: str | None) -> None:
        try:
            if subshell is not None:
                # ipyflow's tracer is not thread-safe: subshell code runs untraced there.
                untraced = entry.process.dataflow == "ipyflow"
                try:
                    await entry.process.run(ex, subshell_id=subshell, untraced=untraced)
                except ExecutionLostError:
                    entry.process.retire_subshell(subshell)
                    subshell = None
                    raise
                finally:
                    if subshell is not None:
                        entry.process.release_subshell(subshell)
            else:
                entry.queued += 1
                try:
                    async with entry.main_lock:
                        entry.queued -= 1
                        ex.expressions = self._expressions(entry, "scratch_expressions")
                        if "import" in ex.code:
                            ex.expressions["ipykeep_warm"] = WARM_TRACEBACKS
                        await entry.process.run(ex)
                except BaseException:
                    entry.queued = max(0, entry.queued - 1) if ex.state == "queued" else entry.queued
                    raise
        except IpykeepError as exc:
            ex.finish("lost", note=exc.message)
        except Exception as exc:  # keep the daemon alive whatever happens
            log.exception("scratch execution %s failed", ex.handle)
            ex.finish("lost", note=f"internal error: {exc}")
        entry.touch()
        self._archive(entry, ex)
        for plugin in self.plugins:
            if hasattr(plugin, "after_scratch"):
                with contextlib.suppress(Exception):
                    await plugin.after_scratch(self, entry, ex)

    async def note_foreign_execution(self, entry: KernelEntry, ex: Execution) -> None:
        """Code another client (a browser) ran in this kernel: it may have changed state."""
        entry.archive.append_execution(ex)
        for plugin in self.plugins:
            if hasattr(plugin, "after_scratch"):
                with contextlib.suppress(Exception):
                    await plugin.after_scratch(self, entry, ex, origin="browser")

    async def read_execution(
        self,
        handle: str,
        kernel_id: str | None = None,
        notebook: str | None = None,
        yield_time_ms: int = 0,
        cursor: int | None = None,
        reader: str = "default",
    ) -> ExecutionRecord:
        """Output since the reader's cursor; waits up to ``yield_time_ms`` for the end."""
        entry = self._find_execution_entry(handle, kernel_id, notebook)
        ex = entry.executions[handle]
        start = self._readers.get((reader, handle), 0) if cursor is None else cursor
        if yield_time_ms and not ex.finished:
            await ex.wait(yield_time_ms / 1000)
        return self.record(entry, ex, cursor=start, reader=reader)

    def _find_execution_entry(self, handle: str, kernel_id: str | None, notebook: str | None) -> KernelEntry:
        if kernel_id or notebook:
            entry = self.entry(kernel_id, notebook)
            if handle in entry.executions:
                return entry
        else:
            for entry in self.kernels.values():
                if handle in entry.executions:
                    return entry
        where = f" on kernel {kernel_id}" if kernel_id else ""
        raise UnknownCellError(
            f"no execution {handle!r}{where}",
            hint="execution handles look like c12; notebook cells are named by id or index (list_cells)",
        )

    # -- interrupt ---------------------------------------------------------------------------
    async def interrupt(
        self, kernel_id: str | None = None, notebook: str | None = None, handle: str | None = None
    ) -> InterruptResult:
        entry = self._live(kernel_id, notebook)
        if handle:
            ex = self._find_execution_entry(handle, entry.kernel_id, None).executions[handle]
            if ex.finished:
                return InterruptResult(kernel_id=entry.kernel_id, handle=handle, action="already_finished", message=f"{handle} had already finished ({ex.state})")
            targets = [ex]
        else:
            targets = [entry.executions[h] for h in entry.running()]
            if not targets:
                return InterruptResult(kernel_id=entry.kernel_id, action="nothing_running", message="nothing was running")
        running = [t for t in targets if t.state == "running"] or targets
        return await self._interrupt_execution(entry, running[0])

    async def _interrupt_execution(self, entry: KernelEntry, ex: Execution) -> InterruptResult:
        ex.interrupt_requested = True
        await entry.process.interrupt()
        if await ex.wait(entry.config.interrupt_grace):
            return InterruptResult(
                kernel_id=entry.kernel_id, handle=ex.handle, action="interrupted", message=f"{ex.handle} interrupted ({ex.state})"
            )
        # The cell ignored SIGINT: kill and restart, keeping partial output.
        await self.restart_kernel(entry, reason=f"{ex.handle} ignored the interrupt for {entry.config.interrupt_grace:g} s")
        return InterruptResult(
            kernel_id=entry.kernel_id,
            handle=ex.handle,
            action="killed_and_restarted",
            message=f"{ex.handle} did not stop within {entry.config.interrupt_grace:g} s; the kernel was killed and restarted (state lost)",
        )

    async def restart(self, kernel_id: str | None = None, notebook: str | None = None) -> KernelRecord:
        """Restart a kernel (dead or alive) in place: same id and notebook, fresh state."""
        entry = self._live(kernel_id, notebook)
        if entry.warm_task is not None and not entry.warm_task.done():
            entry.warm_task.cancel()  # warming would go on against the new, empty kernel
            with contextlib.suppress(BaseException):
                await entry.warm_task
        try:
            await asyncio.wait_for(
                self.restart_kernel(entry, reason="restarted on request" if entry.process.alive else "it had died"), 120
            )
        except asyncio.TimeoutError:
            raise KernelStartError(
                f"kernel {entry.kernel_id} did not come back within 120 s of the restart",
                hint="check `ipykeep doctor` and the daemon log; close it and start a new one",
            ) from None
        entry.state = "idle"
        return self.kernel_record(entry)

    async def restart_kernel(self, entry: KernelEntry, reason: str) -> None:
        for ex in entry.executions.values():
            if not ex.finished:
                ex.add_note("kernel killed and restarted")
        await entry.process.restart()
        entry.notices.append(f"kernel {entry.kernel_id} was restarted ({reason}); all variables are gone — run_stale re-runs what is needed")
        for plugin in self.plugins:
            if hasattr(plugin, "kernel_restarted"):
                await plugin.kernel_restarted(self, entry)

    # -- notebook views ----------------------------------------------------------------------
    async def list_cells(self, kernel_id: str | None = None, notebook: str | None = None) -> CellsRecord:
        entry = self.entry(kernel_id, notebook)
        cells: list[CellState] = []
        if entry.notebook is not None:
            cells = self.cell_states(entry, read_notebook(entry.notebook))
        scratch = [self.record(entry, ex) for ex in list(entry.executions.values()) if ex.kind != "cell"][-10:]
        for rec in scratch:
            rec.output = OutputView(total_chars=rec.output.total_chars, total_lines=rec.output.total_lines)
        return CellsRecord(
            kernel_id=entry.kernel_id,
            notebook=str(entry.notebook) if entry.notebook else None,
            cells=cells,
            scratch=scratch,
        )

    async def markdown(self, source: str, kernel_id: str | None = None, notebook: str | None = None) -> dict[str, Any]:
        entry = self.entry(kernel_id, notebook)
        entry.archive.append_markdown(source)
        return {"kernel_id": entry.kernel_id, "appended": True, "record": str(entry.archive.record)}

    async def read_artifact(self, uri: str) -> dict[str, Any]:
        return read_artifact(self.paths.state, uri)
