"""The engine: a registry of kernel sessions and executions, and the scheduling of their work.

Every public coroutine here that the daemon lists is reachable over RPC under the same name
with the same keyword arguments, and returns a typed record. Kernel ids (``k1``…) and
execution handles (``c1``…) are never reused in a project (see ``engine/counters.py``).

Scheduling, per kernel: notebook cells and stale plans take the main shell in order (one batch
at a time, under the scheduler's ``main_lock``, see ``engine/batch.py``); scratch code runs on the
main shell when it is free and on a subshell when it is not (``engine/scratch.py``).

Collaborators (staleness, inspection, serving, checkpoints) are ``SessionObserver``s attached
once, in order, by the composition root (``ipykeep.daemon.composition``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from ipykeep import __version__
from ipykeep.api import execution as execution_api
from ipykeep.api import kernels as kernels_api
from ipykeep.api.errors import (
    IpykeepError,
    KernelStartError,
    UnknownCellError,
    UnknownKernelError,
    UsageError,
)
from ipykeep.api.execution import Artifact, MarkdownResult
from ipykeep.api.records import (
    BatchResult,
    CellsRecord,
    CellState,
    DaemonInfo,
    EnvironmentInfo,
    ExecutionRecord,
    InterruptResult,
    KernelRecord,
    OutputView,
    StatusRecord,
    WarmProgress,
)
from ipykeep.api.spec import Bindings, bind
from ipykeep.engine import batch, scratch, writeback
from ipykeep.engine.archive import KernelArchive
from ipykeep.engine.counters import IdCounters
from ipykeep.engine.document import current_notebook
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.resolve import kernel_process, notebook_path, resolve_cwd
from ipykeep.engine.session import KernelSession, code_digest
from ipykeep.engine.session_records import (
    StaleReasons,
    cell_states,
    execution_record,
    kernel_record,
)
from ipykeep.kernel.driver import pipelined
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import InKernelModule
from ipykeep.kernel.prestart import KernelPool
from ipykeep.kernel.providers import KernelProvider, LaunchSpec, is_remote_location
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.project.config import Config, resolve_python
from ipykeep.project.layout import ProjectPaths
from ipykeep.project.notebook import Cell, NotebookSnapshot, read_notebook
from ipykeep.project.stored import read_artifact, unknown_kernel_error

log = logging.getLogger("ipykeep.engine")


#: Chooses the environment a local kernel runs in, from its configuration.
EnvironmentChooser = Callable[[Config], Awaitable[EnvironmentInfo]]


async def _setting_or_own(config: Config) -> EnvironmentInfo:
    if config.python is not None:
        return EnvironmentInfo(kind="setting", python=config.python, why="the python setting")
    return EnvironmentInfo(
        kind="ipykeep", python=sys.executable, prefix=sys.prefix, why="ipykeep's interpreter"
    )


def _describe(s: KernelSession) -> str:
    return f"{s.kernel_id}: {s.notebook.name if s.notebook else 'scratch'}"


class Engine:
    """Owns every kernel session of one project."""

    def __init__(
        self,
        paths: ProjectPaths,
        config: Config,
        environment_for: EnvironmentChooser | None = None,
    ) -> None:
        self.paths = paths
        self.config = config
        #: which environment a local kernel runs in (the environments service decides; without
        #: it, the python setting or ipykeep's own interpreter)
        self.environment_for = environment_for or _setting_or_own
        self.started_at = time.time()
        self.kernels: dict[str, KernelSession] = {}
        self._ids = IdCounters(paths)
        #: (reader, handle) -> the reader's cursor into that execution's in-memory output
        self._readers: dict[tuple[str, str], int] = {}
        self._readers_pruned_at = 0
        self._expiry_task: asyncio.Task[Any] | None = None
        self.on_empty: Callable[[], None] | None = None
        self.observers: tuple[SessionObserver, ...] = ()
        #: spare local kernels, started ahead of the requests that will want them
        self.spares = KernelPool(
            config.prestart_kernels,
            paths.root,
            self.kernel_helpers,
            ipython_history=config.ipython_history,
        )

    def attach(self, *observers: SessionObserver) -> None:
        """Set the collaborators, once, in the order they are called."""
        if self.observers:
            raise RuntimeError("observers are already attached")
        self.observers = tuple(observers)

    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        """The in-kernel helpers the observers install into every kernel of ``dataflow``."""
        return tuple(m for o in self.observers for m in o.kernel_helpers(dataflow))

    # -- lookup ------------------------------------------------------------------------------
    def session(self, kernel_id: str | None = None, notebook: str | None = None) -> KernelSession:
        """The session named by id or notebook, or the only one running (closed ones included)."""
        if kernel_id:
            found = self.kernels.get(kernel_id)
            if found is None:
                live_ids = [k for k, s in self.kernels.items() if not s.closed]
                raise unknown_kernel_error(self.paths, kernel_id, live_ids)
            return found
        live = [s for s in self.kernels.values() if not s.closed]
        if notebook:
            path = notebook_path(notebook)
            for s in live:
                if s.notebook == path:
                    return s
            hint = (
                f"start one with `ipykeep start {notebook}`"
                if path.exists()
                else "there is no such file: check the name (`ipykeep status` lists the kernels)"
            )
            raise UnknownKernelError(f"no kernel is bound to {path}", hint=hint)
        if len(live) == 1:
            return live[0]
        if not live:
            raise UnknownKernelError(
                "no kernel is running", hint="start one with `ipykeep start NOTEBOOK`"
            )
        raise UsageError(
            f"{len(live)} kernels are running ({', '.join(map(_describe, live))}); say which",
            hint="name the notebook or the kernel id "
            "(CLI: -n NOTEBOOK or -k k1; MCP: notebook or kernel_id)",
        )

    def live(self, kernel_id: str | None, notebook: str | None = None) -> KernelSession:
        """Like ``session``, refusing a closed one (to run code in it)."""
        found = self.session(kernel_id, notebook)
        if found.closed:
            raise UnknownKernelError(
                f"kernel {found.kernel_id} is closed",
                hint="its records stay readable; start a new kernel to run code",
            )
        return found

    # -- observers ---------------------------------------------------------------------------
    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        exprs: dict[str, str] = {}
        for observer in self.observers:
            exprs.update(observer.cell_expressions(session, cell))
        return exprs

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        exprs: dict[str, str] = {}
        for observer in self.observers:
            exprs.update(observer.scratch_expressions(session, code))
        return exprs

    def stale_reasons(
        self, session: KernelSession, snap: NotebookSnapshot, running: Collection[str] = ()
    ) -> StaleReasons | None:
        """Why each stale cell is stale; ``running``: cells about to run by hand, judged as
        cells that run (see ``SessionObserver.stale_reasons``)."""
        merged: StaleReasons | None = None
        for observer in self.observers:
            reasons = observer.stale_reasons(session, snap, running)
            if reasons is not None:
                merged = {**(merged or {}), **reasons}
        return merged

    # -- records -----------------------------------------------------------------------------
    def new_execution(self, session: KernelSession, code: str, kind: Any, **kw: Any) -> Execution:
        """A new tracked execution with a fresh handle (not started)."""
        ex = Execution(
            handle=self._ids.new_handle(), kernel_id=session.kernel_id, code=code, kind=kind, **kw
        )
        ex.cap = session.config.output_cap_bytes
        session.executions[ex.handle] = ex
        return ex

    def record(
        self, session: KernelSession, ex: Execution, *, cursor: int = 0, reader: str | None = None
    ) -> ExecutionRecord:
        rec = execution_record(session, ex, cursor, reader)
        if reader is not None and not ex.spilled:
            self._readers[(reader, ex.handle)] = rec.cursor
            if len(self._readers) > 2 * max(256, self._readers_pruned_at):
                self._prune_readers()
        return rec

    def _prune_readers(self) -> None:
        """Forget cursors into output no longer in memory (spilled: read from the archive, from
        the start) or of closed kernels: one per call read, they grew for the daemon's life.
        Run when the cursors doubled since the last pruning, so its cost is spread over them."""
        held = {
            handle
            for session in self.kernels.values()
            if not session.closed
            for handle, ex in session.executions.items()
            if not ex.spilled
        }
        self._readers = {key: at for key, at in self._readers.items() if key[1] in held}
        self._readers_pruned_at = len(self._readers)

    def cell_states(self, session: KernelSession, snap: NotebookSnapshot) -> list[CellState]:
        return cell_states(session, snap, self.stale_reasons(session, snap))

    def kernel_record(
        self,
        session: KernelSession,
        *,
        with_cells: bool = False,
        reader: str | None = None,
        snap: NotebookSnapshot | None = None,
    ) -> KernelRecord:
        """The kernel's record; its cells from ``snap`` when given, else from the file."""
        cells = None
        stale_count = None
        # Not while warming, unless cells are asked for: warm-up progress is polled every half
        # second, and re-reading the notebook and re-planning each time slows the warm-up.
        if (
            session.notebook is not None
            and not session.closed
            and (with_cells or session.state != "warming")
        ):
            try:
                states = self.cell_states(session, snap or read_notebook(session.notebook))
                stale_count = sum(1 for c in states if c.state in ("stale", "failed", "never_run"))
                cells = states if with_cells else None
            except IpykeepError as exc:
                session.notices.append(f"notebook unreadable: {exc.message}")
        return kernel_record(
            session,
            cells,
            stale_count,
            next((t for o in self.observers if (t := o.kernel_summary(session))), None),
            reader,
        )

    # -- kernels -----------------------------------------------------------------------------
    async def ping(self) -> DaemonInfo:
        return DaemonInfo(
            pid=os.getpid(),
            version=__version__,
            project=str(self.paths.root),
            started_at=self.started_at,
        )

    async def status(
        self, notebook: str | None = None, kernel_id: str | None = None, reader: str | None = None
    ) -> StatusRecord:
        if notebook or kernel_id:
            sessions = [self.session(kernel_id, notebook)]
        else:
            sessions = [s for s in self.kernels.values() if not s.closed]
        return StatusRecord(
            daemon=await self.ping(),
            kernels=[
                self.kernel_record(
                    s, with_cells=True, reader=reader, snap=await self._status_snapshot(s)
                )
                for s in sessions
            ],
        )

    @staticmethod
    async def _status_snapshot(session: KernelSession) -> NotebookSnapshot | None:
        """The live document of a notebook served as one (what plans read), else None (the
        file). A document that does not answer leaves the file, with a notice saying so."""
        if session.notebook is None or session.closed or session.hosting.document is None:
            return None
        try:
            return await current_notebook(session)
        except IpykeepError as exc:
            session.notice_once(f"status read the saved file: {exc.message}")
            return None

    async def list_kernels(self) -> list[KernelRecord]:
        return [self.kernel_record(s) for s in self.kernels.values() if not s.closed]

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
        *,
        launch_with: Callable[[LaunchSpec], KernelProvider] | None = None,
    ) -> KernelRecord:
        """Start a kernel (bound to ``notebook`` if given), or return the one already bound.
        ``gateway`` (a Jupyter server URL) or a ``cwd`` of ``ssh://user@host/path`` runs the
        kernel remotely (see ``providers/``). ``launch_with`` (not a daemon parameter) makes
        a local kernel's provider: a fork of another kernel's process (``checkpoints/forks``)."""
        nb_path = None
        snap = None
        if notebook:
            nb_path = notebook_path(notebook)
            for s in self.kernels.values():
                if not s.closed and s.notebook == nb_path:
                    if (
                        warm and s.state == "dead" and not s.process.alive
                    ):  # died: start it again, warm it
                        await self.restart_kernel(s, reason="it had died; started again")
                        s.state = "idle"
                        await batch.start_warm(self, s, read_notebook(nb_path), wait)
                        return self.kernel_record(s)
                    return self.kernel_record(s).model_copy(update={"reused": True})
            root = self.paths.root.resolve()
            if root not in nb_path.parents:
                raise UsageError(
                    f"notebook {nb_path} is outside the project {root}",
                    hint="use a notebook inside the project, "
                    "or start ipykeep from the notebook's own project",
                )
            snap = read_notebook(nb_path)  # validates before anything starts
        if dataflow is not None and dataflow not in ("ipyflow", "static"):
            raise UsageError(f"dataflow must be 'ipyflow' or 'static', not {dataflow!r}")
        config = self.config.with_overrides(
            python=python, write_outputs=write_outputs, dataflow=dataflow
        )
        if gateway:
            config = config.with_overrides(kernel_provider="gateway", gateway_url=gateway)
        remote = cwd if is_remote_location(cwd) else None
        if remote or config.kernel_provider != "local":
            # the host or gateway picks the interpreter (remote_python, the kernel spec)
            environment = EnvironmentInfo(
                kind="remote",
                python=config.remote_python if remote or config.kernel_provider == "ssh" else "",
                why="chosen where the kernel runs",
            )
            python = resolve_python(config.python or sys.executable, self.paths.root)
        else:
            environment = await self.environment_for(config)
            python = resolve_python(environment.python, self.paths.root)
        config = config.with_overrides(python=python)
        work_dir = resolve_cwd(self.paths, None if remote else cwd, nb_path)
        kernel_id = self._ids.new_kernel_id()
        process = kernel_process(kernel_id, config, work_dir, remote, self.spares, launch_with)
        session = KernelSession(
            kernel_id=kernel_id,
            process=process,
            notebook=nb_path,
            cwd=work_dir,
            config=config,
            archive=KernelArchive(self.paths.kernel_dir(kernel_id), kernel_id),
            environment=environment,
        )
        self.kernels[kernel_id] = session
        process.on_death = lambda p, s=session: self._on_death(s)
        process.on_foreign = lambda msg, s=session: self._on_foreign(s, msg)
        process.on_notice = session.notice_once
        try:
            await process.start()
            await pipelined(*(observer.kernel_started(session) for observer in self.observers))
        except BaseException:
            del self.kernels[kernel_id]
            await process.shutdown(now=True)
            raise
        session.state = "idle"
        self._ensure_expiry()
        if snap is not None and warm:
            await batch.start_warm(self, session, snap, wait)
        return self.kernel_record(session)

    async def wait_warm(
        self,
        kernel_id: str | None = None,
        notebook: str | None = None,
        timeout: float = 0.5,
        reader: str | None = None,
    ) -> KernelRecord:
        """Wait up to ``timeout`` s for warm-up; returns the record with its progress."""
        session = self.session(kernel_id, notebook)
        if session.warm_task is not None and not session.warm_task.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(session.warm_task), timeout)
        return self.kernel_record(session, reader=reader)

    async def close_kernel(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> KernelRecord:
        session = self.session(kernel_id, notebook)
        if not session.closed:
            await self._close(session, "closed on request")
        return self.kernel_record(session)

    async def _close(self, session: KernelSession, why: str) -> None:
        session.closed = True
        if session.warm_task and not session.warm_task.done():
            session.warm_task.cancel()
        for observer in self.observers:
            with contextlib.suppress(Exception):
                await observer.kernel_closing(session)
        await session.process.shutdown(now=True)
        await writeback.close(session)  # a clean stop never loses an output
        session.archive.mark_closed(why, session.notebook)
        log.info("kernel %s closed: %s", session.kernel_id, why)
        if self.on_empty and not any(not s.closed for s in self.kernels.values()):
            self.on_empty()

    async def shutdown(self) -> None:
        await asyncio.gather(
            self.spares.close(),
            *(
                self._close(s, "daemon shutting down")
                for s in self.kernels.values()
                if not s.closed
            ),
        )
        for observer in self.observers:
            with contextlib.suppress(Exception):
                await observer.shutdown()

    def _on_death(self, session: KernelSession) -> None:
        if session.closed:
            return
        lost = session.process.provider.lost_reason  # a remote kernel's link, not the kernel
        session.notices.append(
            f"kernel {session.kernel_id} "
            + (f"is unreachable: {lost}" if lost else "died; its state is gone")
            + " (restart it: `ipykeep restart` / the restart_kernel tool; "
            "`ipykeep run-stale --execute` / the run_stale tool then re-runs what is needed)"
        )
        session.state = "dead"
        for observer in self.observers:
            observer.kernel_lost(session)

    def _on_foreign(self, session: KernelSession, msg: dict[str, Any]) -> None:
        for observer in self.observers:
            observer.foreign_message(session, msg)

    # -- idle expiry -------------------------------------------------------------------------
    def _ensure_expiry(self) -> None:
        if self._expiry_task is None and self.config.idle_timeout > 0:
            self._expiry_task = asyncio.create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        period = min(max(self.config.idle_timeout / 10, 0.2), 30)
        while True:
            await asyncio.sleep(period)
            now = time.time()
            for session in list(self.kernels.values()):
                if session.closed or session.running() or session.hosting.active:
                    continue
                if (
                    session.config.idle_timeout > 0
                    and now - session.last_activity > session.config.idle_timeout
                ):
                    await self._close(
                        session, f"idle for more than {session.config.idle_timeout:g} s"
                    )

    # -- notebook cells ----------------------------------------------------------------------
    async def run_cells(
        self,
        cells: list[str],
        kernel_id: str | None = None,
        notebook: str | None = None,
        wait_for_write: bool = True,
    ) -> BatchResult:
        """Run notebook cells (ids or 0-based indexes) in order, with their source on disk now;
        ``wait_for_write=False``: reply before the outputs are written (``engine/writeback.py``)."""
        session = self.live(kernel_id, notebook)
        if session.notebook is None:
            raise UsageError(
                f"kernel {session.kernel_id} has no notebook", hint="use `exec` for scratch code"
            )
        if not cells:
            raise UsageError("no cells given", hint="name cells by id or 0-based index")
        snap = await current_notebook(session)  # served as a shared document: its live cells
        chosen = [snap.resolve(ref) for ref in cells]
        for cell in chosen:
            if cell.cell_type != "code":
                raise UnknownCellError(
                    f"cell {cell.index} ({cell.cell_id}) is a {cell.cell_type} cell, not code",
                    hint="only code cells run",
                )
        return await self.run_batch(
            session, snap, [c.cell_id for c in chosen], wait_for_write=wait_for_write
        )

    async def run_batch(
        self,
        session: KernelSession,
        snap: NotebookSnapshot,
        cell_ids: list[str],
        *,
        progress: WarmProgress | None = None,
        skip_if: batch.SkipIf | None = None,
        wait_for_write: bool = True,
        may_load: bool = False,
    ) -> BatchResult:
        """Run cells of ``snap`` on the main shell in order (see ``engine/batch.py``)."""
        return await batch.run_batch(
            self,
            session,
            snap,
            cell_ids,
            progress=progress,
            skip_if=skip_if,
            wait_for_write=wait_for_write,
            may_load=may_load,
        )

    # -- scratch code ------------------------------------------------------------------------
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
        session = self.live(kernel_id, notebook)
        session.touch()
        if request_id:
            seen = session.request_ids.get(request_id)
            if seen is not None:
                if seen[0] != code_digest(code):
                    raise UsageError(
                        f"request_id {request_id!r} was already used with different code "
                        f"(execution {seen[1]})",
                        hint="use a new request_id for new code",
                    )
                return await self.read_execution(
                    seen[1],
                    kernel_id=session.kernel_id,
                    yield_time_ms=yield_time_ms or 0,
                    reader=reader,
                    cursor=0,
                )
        ex = await scratch.submit(self, session, code, request_id)
        await ex.wait(None if yield_time_ms is None else yield_time_ms / 1000)
        return self.record(session, ex, cursor=0, reader=reader)

    async def note_foreign_execution(self, session: KernelSession, ex: Execution) -> None:
        """Code another client (a browser) ran in this kernel: it may have changed state."""
        session.archive.append_execution(ex)
        session.retain([ex])
        for observer in self.observers:
            with contextlib.suppress(Exception):
                await observer.after_scratch(session, ex, origin="browser")

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
        session = self._session_of(handle, kernel_id, notebook)
        ex = self._execution(session, handle)
        if cursor is not None:
            start = cursor
        else:  # a spilled execution is read from the archive, from the start
            start = 0 if ex.spilled else self._readers.get((reader, handle), 0)
        if yield_time_ms and not ex.finished:
            await ex.wait(yield_time_ms / 1000)
        return self.record(session, ex, cursor=start, reader=reader)

    @staticmethod
    def _execution(session: KernelSession, handle: str) -> Execution:
        """``handle`` of ``session`` (``_session_of`` found it there), rebuilt from the archive
        if its record left memory."""
        ex = session.execution(handle)
        if ex is None:
            raise UnknownCellError(
                f"no execution {handle!r} on kernel {session.kernel_id}",
                hint="its archived record could not be read; run the code again",
            )
        return ex

    def _session_of(
        self, handle: str, kernel_id: str | None, notebook: str | None
    ) -> KernelSession:
        if kernel_id or notebook:
            found = self.session(kernel_id, notebook)
            if handle in found.executions or handle in found.archive.offsets:
                return found
        else:
            for found in self.kernels.values():
                if handle in found.executions or handle in found.archive.offsets:
                    return found
        where = f" on kernel {kernel_id}" if kernel_id else ""
        raise UnknownCellError(
            f"no execution {handle!r}{where}",
            hint="execution handles look like c12; "
            "notebook cells are named by id or index (list_cells, `ipykeep status`)",
        )

    # -- interrupt and restart ---------------------------------------------------------------
    async def interrupt(
        self, kernel_id: str | None = None, notebook: str | None = None, handle: str | None = None
    ) -> InterruptResult:
        session = self.live(kernel_id, notebook)
        if handle:
            ex = self._execution(self._session_of(handle, session.kernel_id, None), handle)
            if ex.finished:
                return InterruptResult(
                    kernel_id=session.kernel_id,
                    handle=handle,
                    action="already_finished",
                    message=f"{handle} had already finished ({ex.state})",
                )
            targets = [ex]
        else:
            targets = [session.executions[h] for h in session.running()]
            if not targets:
                return InterruptResult(
                    kernel_id=session.kernel_id,
                    action="nothing_running",
                    message="nothing was running",
                )
        running = [t for t in targets if t.state == "running"] or targets
        return await self.interrupt_execution(session, running[0])

    async def interrupt_execution(self, session: KernelSession, ex: Execution) -> InterruptResult:
        """Interrupt ``ex``; a cell that ignores SIGINT gets its kernel killed and restarted."""
        ex.interrupt_requested = True
        await session.process.interrupt()
        grace = session.config.interrupt_grace
        if await ex.wait(grace):
            return InterruptResult(
                kernel_id=session.kernel_id,
                handle=ex.handle,
                action="interrupted",
                message=f"{ex.handle} interrupted ({ex.state})",
            )
        # The cell ignored SIGINT: kill and restart, keeping partial output.
        await self.restart_kernel(
            session, reason=f"{ex.handle} ignored the interrupt for {grace:g} s"
        )
        return InterruptResult(
            kernel_id=session.kernel_id,
            handle=ex.handle,
            action="killed_and_restarted",
            message=f"{ex.handle} did not stop within {grace:g} s; "
            "the kernel was killed and restarted (state lost)",
        )

    async def restart(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> KernelRecord:
        """Restart a kernel (dead or alive) in place: same id and notebook, fresh state."""
        session = self.live(kernel_id, notebook)
        if session.warm_task is not None and not session.warm_task.done():
            session.warm_task.cancel()  # warming would go on against the new, empty kernel
            with contextlib.suppress(BaseException):
                await session.warm_task
        try:
            await asyncio.wait_for(
                self.restart_kernel(
                    session,
                    reason="restarted on request" if session.process.alive else "it had died",
                ),
                120,
            )
        except asyncio.TimeoutError:
            raise KernelStartError(
                f"kernel {session.kernel_id} did not come back within 120 s of the restart",
                hint="check `ipykeep doctor` and the daemon log; close it and start a new one",
            ) from None
        session.state = "idle"
        return self.kernel_record(session)

    async def restart_kernel(self, session: KernelSession, reason: str) -> None:
        """Restart the process in place and tell the observers (callers hold the lock they need)."""
        for ex in session.executions.values():
            if not ex.finished:
                ex.add_note("kernel killed and restarted")
        await session.process.restart()
        session.warm = None  # the new process ran no cell: an earlier warm-up says nothing now
        session.notices.append(
            f"kernel {session.kernel_id} was restarted ({reason}); all variables are gone — "
            "executing the stale plan re-runs what is needed"
        )
        await pipelined(*(observer.kernel_restarted(session) for observer in self.observers))

    # -- notebook views ----------------------------------------------------------------------
    async def list_cells(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> CellsRecord:
        session = self.session(kernel_id, notebook)
        cells: list[CellState] = []
        if session.notebook is not None:
            cells = self.cell_states(session, await current_notebook(session))
        recent = [
            self.record(session, ex)
            for ex in list(session.executions.values())
            if ex.kind != "cell"
        ][-10:]
        for rec in recent:
            rec.output = OutputView(
                total_chars=rec.output.total_chars, total_lines=rec.output.total_lines
            )
        return CellsRecord(
            kernel_id=session.kernel_id,
            notebook=str(session.notebook) if session.notebook else None,
            cells=cells,
            scratch=recent,
        )

    async def markdown(
        self, source: str, kernel_id: str | None = None, notebook: str | None = None
    ) -> MarkdownResult:
        session = self.session(kernel_id, notebook)
        session.archive.append_markdown(source)
        return MarkdownResult(
            kernel_id=session.kernel_id, appended=True, record=str(session.archive.record)
        )

    async def read_artifact(self, uri: str) -> Artifact:
        return Artifact.model_validate(read_artifact(self.paths.state, uri))

    async def version(self) -> kernels_api.VersionInfo:
        return kernels_api.VersionInfo(
            version=__version__, protocol=kernels_api.PROTOCOL, python=platform.python_version()
        )

    def bindings(self) -> Bindings:
        """The daemon methods the engine serves, each bound to its declaration."""
        return (
            bind(kernels_api.PING, self.ping),
            bind(kernels_api.VERSION, self.version),
            bind(kernels_api.STATUS, self.status),
            bind(kernels_api.LIST_KERNELS, self.list_kernels),
            bind(kernels_api.CREATE_KERNEL, self.create_kernel),
            bind(kernels_api.WAIT_WARM, self.wait_warm),
            bind(kernels_api.CLOSE_KERNEL, self.close_kernel),
            bind(kernels_api.RESTART, self.restart),
            bind(execution_api.EXECUTE, self.execute),
            bind(execution_api.READ_EXECUTION, self.read_execution),
            bind(execution_api.INTERRUPT, self.interrupt),
            bind(execution_api.RUN_CELLS, self.run_cells),
            bind(execution_api.LIST_CELLS, self.list_cells),
            bind(execution_api.MARKDOWN, self.markdown),
            bind(execution_api.READ_ARTIFACT, self.read_artifact),
        )
