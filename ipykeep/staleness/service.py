"""Staleness as an engine collaborator: feeds each kernel's tracker and serves ``run_stale``,
``watch_file`` and ``plan_progress``.

Around every notebook cell the layer asks the kernel (silently) which files the cell read, and,
in ``ipyflow`` mode, what ipyflow saw it define and use; scratch and browser code is recorded
from static analysis. Plans are computed from the notebook and the files as they are on disk
at the moment of the request (re-read, re-stat), never from what a watcher last saw.

A watcher (watchfiles, non-recursive, on the notebook's directory and the directories of the
files cells read) only adds a notice to the next result, saying what changed and how many
cells are stale now; it is blind to ipykeep's own notebook writes (recognised by content hash)
and to the file of a notebook served as a shared document (the Jupyter server's copy of it).
A remote kernel's files are stat'ed and polled through the kernel instead (``remote_stat``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat as stat_module
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipykeep.api import staleness as staleness_api
from ipykeep.api.errors import IpykeepError, UsageError
from ipykeep.api.records import BatchResult, RunStaleResult
from ipykeep.api.spec import Bindings, bind
from ipykeep.api.staleness import PlanProgress, WatchResult
from ipykeep.engine.document import current_notebook
from ipykeep.engine.document import reads as document_reads
from ipykeep.engine.observer import ScratchOrigin, SessionObserver
from ipykeep.engine.readonly import is_read_only
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.driver import pipelined
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import (
    DATAHASH,
    FILETRACK,
    IPYFLOW,
    REACH,
    STATEMON,
    InKernelModule,
)
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.project.notebook import Cell, NotebookSnapshot, content_hash, read_notebook
from ipykeep.staleness import (
    FileStamp,
    NotebookCell,
    Plan,
    StalenessTracker,
    plan_runs,
    probes,
    remote_stat,
)
from ipykeep.staleness import ipyflow as ipyflow_adapter
from ipykeep.staleness._inkernel.filetrack import (
    listing_stamp,  # the one rule, shared with the kernel
)
from ipykeep.staleness.errors import StalenessError
from ipykeep.staleness.state import staleness_of
from ipykeep.staleness.tracker_state import StatFn

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

log = logging.getLogger("ipykeep.staleness")

#: rounds of one execute: the plan, then what its re-runs made stale that it could not foresee
_MAX_ROUNDS = 3

_OUTCOME = {"ok": "ok", "failed": "failed", "interrupted": "interrupted", "lost": "interrupted"}
#: reasons a cell keeps until it runs itself, whatever the cells above it do
_OWN_REASONS = frozenset({"never_run", "kernel_restarted", "source_changed", "failed"})


def stat_for(session: KernelSession) -> StatFn:
    if remote_stat.is_remote(session):
        return remote_stat.cached(session)
    base = session.cwd

    def stat(path: str) -> FileStamp | None:
        # normalized like the in-kernel read hook (no symlink resolution), so a path literal
        # and the run-time read of the same file carry the same name
        full = os.path.normpath(os.path.join(base, path))
        try:
            st = os.stat(full)
            if stat_module.S_ISDIR(st.st_mode):
                digest, count = listing_stamp(full)
                return FileStamp(full, digest, count)
        except OSError:
            return None
        return FileStamp(full, st.st_mtime_ns, st.st_size)

    return stat


def notebook_cells(snap: NotebookSnapshot) -> list[NotebookCell]:
    return [
        NotebookCell(c.cell_id, c.index, c.cell_type, c.source, tuple(getattr(c, "tags", ())))  # type: ignore[arg-type]
        for c in snap.cells
    ]


def _batch_ok(batch: BatchResult | None, snap: NotebookSnapshot) -> bool:
    """Every cell ran fine, or failed as its ``raises-exception`` tag says it should."""
    if batch is None:
        return True
    if batch.stopped is not None:  # interrupted, or the kernel died or closed under it
        return False
    expected = {c.cell_id for c in notebook_cells(snap) if c.expects_failure}
    return all(
        r.state == "ok" or (r.state == "failed" and r.cell_id in expected) for r in batch.results
    )


class StalenessService(SessionObserver):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @staticmethod
    def tracker(session: KernelSession) -> StalenessTracker:
        return staleness_of(session).tracker

    @staticmethod
    def defining_cells(session: KernelSession) -> dict[str, str]:
        """Each name the notebook defines -> the cell that last defined it in this kernel."""
        return staleness_of(session).tracker.last_writers()

    @staticmethod
    def packages_installed(session: KernelSession) -> None:
        """Packages were installed into the kernel's environment: cells that failed are
        planned again (a missing module may be there now)."""
        staleness_of(session).tracker.environment_changed()

    @staticmethod
    def importing_cells(session: KernelSession, modules: frozenset[str]) -> list[str]:
        """The cells whose last run in this kernel imported one of ``modules`` (top-level
        names): they ran with what the kernel held then (a package upgraded since)."""
        tracker = staleness_of(session).tracker
        return [
            cell_id
            for cell_id in list(tracker.state.runs)
            if any(m.split(".")[0] in modules for m in tracker.run_imports(cell_id).values())
        ]

    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return (
            FILETRACK,
            REACH,
            DATAHASH,
            STATEMON,
            *((IPYFLOW,) if dataflow == "ipyflow" else ()),
        )

    async def _install_probes(self, session: KernelSession) -> None:
        proc = session.process
        # Two requests at most, sent together (none for the modules a spare already holds):
        # the modules come first; the set-up calls are one tuple, evaluated left to right.
        # a remote kernel's files live under its own working directory, not this project's
        root = "." if remote_stat.is_remote(session) else str(self.engine.paths.root)
        setup = (
            probes.filetrack_install_expr(root),
            probes.filetrack_begin_expr(),
            probes.statemon_install_expr(),
        )
        await pipelined(
            proc.install(*self.kernel_helpers(proc.dataflow)),
            proc.eval_silent(f"__import__('json').dumps([{', '.join(setup)}])", decode=False),
        )

    # -- observer events ---------------------------------------------------------------------
    async def kernel_started(self, session: KernelSession) -> None:
        plan_runs.note_started(session)
        await self._install_probes(session)
        if session.notebook is not None:
            staleness_of(session).watch_task = asyncio.create_task(self._watch(session))
            if remote_stat.is_remote(session) and staleness_of(session).poll_task is None:
                staleness_of(session).poll_task = asyncio.create_task(
                    remote_stat.poll(
                        session,
                        lambda: self._needed_paths(session),
                        lambda moved: self._notice(session, moved),
                    )
                )

    async def kernel_restarted(self, session: KernelSession) -> None:
        self.tracker(session).kernel_restarted()
        await self._install_probes(session)

    def kernel_lost(self, session: KernelSession) -> None:
        self.tracker(session).kernel_restarted()

    async def kernel_closing(self, session: KernelSession) -> None:
        for task in (staleness_of(session).watch_task, staleness_of(session).poll_task):
            if task is not None:
                task.cancel()
        staleness_of(session).watch_task = staleness_of(session).poll_task = None

    @staticmethod
    def _traced(session: KernelSession) -> bool:
        return session.process.dataflow == "ipyflow" and not staleness_of(session).untraced

    async def warm_starting(self, session: KernelSession) -> None:
        """``warm_tracing = false``: run warm-up untraced; those runs carry static analysis only.
        The warm-up is a fresh run: its time beyond the cells' own is measured."""
        plan_runs.begin_measuring(session)
        if session.process.dataflow == "ipyflow" and not session.config.warm_tracing:
            await session.process.eval_silent(ipyflow_adapter.tracing_expr(False))
            staleness_of(session).untraced = True

    async def warm_finished(self, session: KernelSession) -> None:
        plan_runs.end_measuring(session, fresh=True)
        untraced, staleness_of(session).untraced = staleness_of(session).untraced, False
        if untraced and session.process.alive and not session.closed:
            await session.process.eval_silent(ipyflow_adapter.tracing_expr(True))

    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        """Probes evaluated right after the cell, in its own execute request."""
        exprs = {
            "ipykeep_files": probes.filetrack_collect_expr(),
            "ipykeep_state": probes.statemon_collect_expr(),
        }
        if self._traced(session):
            exprs["ipykeep_flow"] = ipyflow_adapter.cell_expr(cell.cell_id)
        if remote_stat.is_remote(session):
            exprs[remote_stat.STAT_KEY] = remote_stat.cell_stat_expr(session, cell.source)
        return exprs

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        # Closes the file-read window so a scratch execution's reads are not charged to the
        # next notebook cell (the result is not needed); the namespace diff is its evidence.
        # Code that can only read (``df.shape``) needs neither: its static effects are none,
        # which is what ``after_scratch`` records when no probe came back.
        if is_read_only(code):
            return {}
        return {
            "ipykeep_files": probes.filetrack_collect_expr(),
            "ipykeep_state": probes.statemon_collect_expr(),
        }

    async def _probe_result(
        self, session: KernelSession, ex: Execution, key: str, expr: str
    ) -> Any:
        """A probe's value from the execution's reply, or asked for afresh when the cell failed
        (the kernel evaluates user_expressions only after code that succeeded)."""
        result = ex.expression_results.get(key)
        if result is not None:
            return probes.decode_expression_value(result)
        return await session.process.eval_silent(expr)

    async def after_cell(self, session: KernelSession, cell: Cell, ex: Execution) -> None:
        plan_runs.note_cell(session, cell.cell_id, ex)
        files: tuple[FileStamp, ...] = ()
        written: tuple[str, ...] = ()
        dynamic = None
        observed = None
        stat = stat_for(session)
        if session.process.alive:
            try:
                reply = await self._probe_result(
                    session, ex, "ipykeep_files", probes.filetrack_collect_expr()
                )
                files = probes.parse_filetrack_end(reply)
                written = probes.parse_filetrack_written(reply)
                state = await self._probe_result(
                    session, ex, "ipykeep_state", probes.statemon_collect_expr()
                )
                observed = probes.parse_statemon(state)
                if self._traced(session):
                    flow = await self._probe_result(
                        session, ex, "ipykeep_flow", ipyflow_adapter.cell_expr(cell.cell_id)
                    )
                    dynamic = ipyflow_adapter.parse_cell(flow)
                if remote_stat.is_remote(session):
                    expr = remote_stat.cell_stat_expr(session, cell.source)
                    stamps = probes.parse_filetrack_stamps(
                        await self._probe_result(session, ex, remote_stat.STAT_KEY, expr)
                    )
                    stat = remote_stat.KernelStat(
                        remote_stat.remember(
                            session, remote_stat.cell_paths(session, cell.source), stamps
                        )
                    )
                    remote_stat.remember(session, (f.path for f in files), files)
            except (IpykeepError, StalenessError) as exc:
                log.warning("probe after %s failed: %s", cell.cell_id, exc.message)
        self.tracker(session).record_cell_run(
            cell.cell_id,
            cell.index,
            cell.source,
            _OUTCOME.get(ex.state, "failed"),  # type: ignore[arg-type]
            files_read=files,
            dynamic=dynamic,
            stat=stat,
            files_written=written,
            observed=observed,
            error=_error_line(ex),
        )
        if files and not remote_stat.is_remote(session):
            self._watch_dirs(session, {str(Path(f.path).parent) for f in files})

    async def after_scratch(
        self, session: KernelSession, ex: Execution, origin: ScratchOrigin = "scratch"
    ) -> None:
        if ex.state in ("ok", "failed", "interrupted"):
            observed = None
            result = ex.expression_results.get("ipykeep_state") if ex.expression_results else None
            if result is not None:
                with contextlib.suppress(IpykeepError, StalenessError):
                    observed = probes.parse_statemon(probes.decode_expression_value(result))
            self.tracker(session).record_scratch(ex.code, origin, observed=observed)

    def stale_reasons(
        self, session: KernelSession, snap: NotebookSnapshot, running: Collection[str] = ()
    ) -> dict[str, list[dict[str, Any]]]:
        plan = self.tracker(session).plan(notebook_cells(snap), stat_for(session), running)
        planned = {
            "stale": [e.to_json() for e in plan.stale],
            "conditional": [e.to_json() for e in plan.conditional],
        }
        for observer in self.engine.observers:  # cells that load a stored run (checkpoints)
            observer.annotate_plan(session, snap, planned)
        return {
            e["cell_id"]: e["reasons"]
            for e in planned["stale"] + planned["conditional"] + [b.to_json() for b in plan.blocked]
        }

    def plan(self, session: KernelSession, snap: NotebookSnapshot) -> Plan:
        return self.tracker(session).plan(notebook_cells(snap), stat_for(session))

    async def _fresh_stat(self, session: KernelSession, snap: NotebookSnapshot) -> StatFn:
        """The stat a plan made now should use: a remote kernel's stamps fetched for it."""
        if not remote_stat.is_remote(session) or not session.process.alive:
            return stat_for(session)
        cells = notebook_cells(snap)
        return await remote_stat.prefetched(
            session, lambda stat: self.tracker(session).plan(cells, stat)
        )

    def _needed_paths(self, session: KernelSession) -> set[str]:
        """The files a plan of the notebook stats now (what a remote kernel's poll re-stats)."""
        assert session.notebook is not None
        probe = remote_stat.KernelStat({})
        self.tracker(session).plan(notebook_cells(read_notebook(session.notebook)), probe)
        return probe.missed | set(self.tracker(session).watched)

    # -- RPC methods (registered by the daemon) -----------------------------------------------
    async def plan_progress(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> PlanProgress:
        """How far the plan being executed (``run_stale(execute=True)``) has got."""
        return PlanProgress.model_validate(
            plan_runs.progress_of(self.engine.session(kernel_id, notebook))
        )

    async def run_stale(
        self,
        kernel_id: str | None = None,
        notebook: str | None = None,
        execute: bool = False,
        fresh: bool = False,
        wait_for_write: bool = True,
    ) -> RunStaleResult:
        """The stale plan (read-only); with ``execute`` run it in order on the main shell.

        When a cell fails, the planned cells that depend on it (transitively) are skipped and
        reported; independent cells still run. With ``fresh`` (and ``execute``) the kernel is
        restarted and every code cell runs top to bottom instead, as warm-up does. The result
        carries each planned cell's last measured duration and the plan's estimated cost
        against that fresh run. ``wait_for_write=False`` replies before the outputs are in the
        notebook file (``engine/writeback.py``).
        """
        if fresh and not execute:
            raise UsageError(
                "fresh restarts the kernel and runs every cell: it needs execute",
                hint="ipykeep run-stale --execute --fresh",
            )
        asked = time.monotonic()  # an executed plan's overhead includes making the plan
        session = (
            self.engine.live(kernel_id, notebook)
            if execute
            else self.engine.session(kernel_id, notebook)
        )
        if session.notebook is None:
            raise UsageError(
                f"kernel {session.kernel_id} has no notebook",
                hint="run_stale works on a notebook's kernel",
            )
        snap = await current_notebook(session)
        stat = await self._fresh_stat(session, snap)
        plan = self.tracker(session).plan(notebook_cells(snap), stat)
        plan_json = plan.to_json()
        cost = plan_runs.annotate(
            session, snap, plan.cell_ids, plan_json, [e.cell_id for e in plan.conditional]
        )
        saved = 0.0
        for observer in self.engine.observers:  # cells that load a stored run (checkpoints)
            saved += observer.annotate_plan(session, snap, plan_json)
        if saved:
            cost["memo_saved_s"] = round(saved, 3)
        batch = None
        if fresh:
            batch = await plan_runs.run_fresh(self.engine, session, snap, wait_for_write)
        elif execute and plan.runnable_ids:
            plan_runs.begin_measuring(session, since=asked)
            try:
                batch = await self._execute_plan(session, snap, plan, wait_for_write)
            finally:
                plan_runs.end_measuring(session, fresh=False)
        return RunStaleResult(
            kernel_id=session.kernel_id,
            executed=bool(execute),
            stale=plan_json["stale"],
            fresh=plan_json["fresh"],
            blocked=plan_json["blocked"],
            conditional=plan_json["conditional"],
            batch=batch,
            ok=_batch_ok(batch, snap),
            notices=session.take_notices(),
            cost=cost,
            fresh_run=True if fresh else None,
            # Served, say which copy the plan is of: the shared document or the saved file.
            reads=document_reads(session),
        )

    async def _execute_plan(
        self, session: KernelSession, snap: NotebookSnapshot, plan: Plan, wait_for_write: bool
    ) -> BatchResult:
        """Run ``plan`` in order, re-planning before every cell; then run what the re-runs made
        stale that the plan could not foresee, until the plan is empty.

        A planned cell is skipped when the re-plan no longer lists it to run: a conditional
        reader whose inputs kept their value (a print-only edit), or a cell whose reason went
        away. A re-run whose values came out different from its last run's (``time.time()``,
        an unseeded draw in a cell re-run only to restore another name) makes its readers
        stale at run time; they run in a further round. Rounds stop when nothing is stale, when
        a cell fails, when the plan lists only cells that already ran in this execute (a plan
        that does not settle is reported, not looped on), or after ``_MAX_ROUNDS``.
        """
        cells = notebook_cells(snap)
        tracker = self.tracker(session)
        await self._forget_changed_modules(session, plan)
        rounds: list[BatchResult] = []
        ran: set[str] = set()
        for _ in range(_MAX_ROUNDS):
            batch = await self._run_round(session, snap, plan, cells, wait_for_write)
            rounds.append(batch)
            ran |= {r.cell_id for r in batch.results if r.cell_id is not None}
            if not batch.ok or batch.stopped is not None:
                break
            plan = tracker.plan(cells, stat_for(session))
            if not set(plan.cell_ids) - ran:
                break
        return plan_runs.merge_batches(rounds)

    async def _run_round(
        self,
        session: KernelSession,
        snap: NotebookSnapshot,
        plan: Plan,
        cells: list[NotebookCell],
        wait_for_write: bool,
    ) -> BatchResult:
        """One batch of ``plan``'s cells (those that will run and the conditional ones)."""
        ids = list(plan.runnable_ids)
        deps = {
            e.cell_id: {c for r in e.reasons for c in r.cells if c != e.cell_id}
            for e in plan.stale + plan.conditional
        }
        expected = {c.cell_id for c in cells if c.expects_failure}
        tracker = self.tracker(session)
        skipped: set[str] = set()
        first = plan.cell_ids[0] if plan.cell_ids else None
        # only a cell planned for what other cells did can leave the plan when they re-run;
        # re-planning before every cell (each re-plan is linear in the notebook) made a plan's
        # execution quadratic in its size
        replan = {
            e.cell_id: e.reasons
            for e in plan.stale + plan.conditional
            if not e.kinds & _OWN_REASONS
        }
        since = tracker.seq  # the runs recorded after the plan was made
        # the re-plan made since the last cell that ran (a dropped cell runs nothing)
        replanned: list[frozenset[str]] = []

        def skip_if(cell_id: str, failed: set[str]) -> str | None:
            bad = deps.get(cell_id, set()) & ((failed - expected) | skipped)
            if bad:
                skipped.add(cell_id)
                return f"depends on {', '.join(sorted(bad))}, which failed"
            # The plan was made before anything ran. Re-plan with what the cells above just
            # did: a reader planned because an edited cell might change its input is dropped
            # when the kernel saw that input keep its value (a print-only edit).
            if (
                cell_id != first
                and cell_id in replan
                # a producer that re-ran gave it a new input: a re-plan would keep it, so the
                # common case (an edit flowing down) costs no re-plan at all
                and not tracker.still_planned(cell_id, replan[cell_id], since)
            ):
                if not replanned:
                    replanned.append(frozenset(tracker.plan(cells, stat_for(session)).cell_ids))
                if cell_id not in replanned[0]:
                    return (
                        "no longer stale: the values it reads kept their value when the cells "
                        "above re-ran"
                    )
            replanned.clear()  # this cell runs: what it does can change the plan
            return None

        progress = plan_runs.track_progress(session, ids)
        try:
            return await self.engine.run_batch(
                session,
                snap,
                ids,
                skip_if=skip_if,
                progress=progress,
                wait_for_write=wait_for_write,
                may_load=True,
            )
        finally:
            progress.finished = True

    async def _forget_changed_modules(self, session: KernelSession, plan: Plan) -> None:
        """Local modules whose source changed are dropped from ``sys.modules`` so the cells that
        import them re-run the new code (as a fresh run would), not the cached module."""
        paths = sorted(
            {
                r.path
                for e in plan.stale
                for r in e.reasons
                if r.kind == "file_changed" and r.path and r.path.endswith(".py")
            }
        )
        if paths and session.process.alive:
            with contextlib.suppress(IpykeepError):
                await session.process.eval_silent(probes.forget_modules_expr(paths))

    async def watch_file(
        self, path: str, kernel_id: str | None = None, notebook: str | None = None
    ) -> WatchResult:
        """Register ``path`` as an input of the notebook (a read the detection missed)."""
        session = self.engine.session(kernel_id, notebook)
        if remote_stat.is_remote(session):
            # the path is the kernel's (relative to its working directory), stat'ed there; it
            # must stay under that directory, judged before anything is asked of the host
            if os.path.isabs(path) or os.path.normpath(path).split(os.sep)[0] == os.pardir:
                raise _outside_project(path, "the kernel's working directory")
            fetched = await remote_stat.fetch(self.engine.live(kernel_id, notebook), [path])
            found = (fetched or {})[path]
            self.tracker(session).watch(found.path, found if found.exists else None)
            return WatchResult(
                kernel_id=session.kernel_id,
                path=found.path,
                exists=found.exists,
                watched=list(self.tracker(session).watched),
            )
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = session.cwd / p
        p = p.resolve()
        root = self.engine.paths.root.resolve()
        # refused before any stat, whether the file exists or not: watch_file is not a way to
        # learn what exists outside the project (nor to watch it)
        if root not in p.parents or p.is_relative_to(self.engine.paths.state.resolve()):
            raise _outside_project(path, f"the project {root}")
        stamp = stat_for(session)(str(p))
        self.tracker(session).watch(str(p), stamp)
        self._watch_dirs(session, {str(p.parent)})
        return WatchResult(
            kernel_id=session.kernel_id,
            path=str(p),
            exists=stamp is not None,
            watched=list(self.tracker(session).watched),
        )

    # -- watcher -----------------------------------------------------------------------------
    async def _watch(self, session: KernelSession) -> None:
        """Notice edits made by others; the notice rides on the next result."""
        from watchfiles import awatch

        assert session.notebook is not None
        while not session.closed:
            dirs = {str(session.notebook.parent)} | set(staleness_of(session).read_dirs)
            dirs = {d for d in dirs if os.path.isdir(d)}
            stop = asyncio.Event()
            staleness_of(session).watch_restart = stop
            try:
                # ends when _watch_dirs adds a directory: the loop restarts with it
                async for changes in awatch(
                    *dirs, recursive=False, debounce=300, step=100, stop_event=stop
                ):
                    self._on_changes(session, {Path(p) for _, p in changes})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a vanished directory, inotify limits…
                log.info("watcher for %s stopped: %s", session.kernel_id, exc)
                await asyncio.sleep(2)

    @staticmethod
    def _watch_dirs(session: KernelSession, dirs: set[str]) -> None:
        """Add directories of files the notebook depends on; restart the watcher if one is not
        watched yet (the notebook's own directory always is: restarting for it would open a
        window in which a change goes unnoticed, right when a run has just read the file)."""
        known = staleness_of(session).read_dirs
        watched = known | ({str(session.notebook.parent)} if session.notebook else set())
        new = dirs - watched
        known |= dirs
        restart = staleness_of(session).watch_restart
        if new and restart is not None:
            restart.set()

    def _on_changes(self, session: KernelSession, paths: set[Path]) -> None:
        nb = session.notebook
        if nb is None:
            return
        changed: list[str] = []
        # A shared document is the notebook, and its file a copy the Jupyter server saves
        # (and merges file writes from): the file changing is no news of its own.
        if nb in paths and session.hosting.document is None:
            with contextlib.suppress(OSError):
                if content_hash(nb.read_bytes()) not in session.own_writes:
                    changed.append(str(nb))
        others = paths - {nb}
        if others:
            # Only the files this notebook's cells read (or that were registered for it): the
            # watched directories also hold files of other notebooks, and files nothing reads.
            try:
                read = {self._absolute(session, p) for p in self._needed_paths(session)}
            except IpykeepError:
                read = set()
            changed += sorted(str(p) for p in others if str(p) in read)
        self._notice(session, changed)

    @staticmethod
    def _absolute(session: KernelSession, path: str) -> str:
        return os.path.normpath(os.path.join(session.cwd, path))

    def _notice(self, session: KernelSession, changed: list[str]) -> None:
        """Leave a notice on the next result: what changed, and how many cells are stale because
        of that change (not the cells that were stale already, for another reason)."""
        nb = session.notebook
        if nb is None or not changed:
            return
        try:
            plan = self.plan(session, read_notebook(nb))
        except IpykeepError:
            return
        paths = {self._absolute(session, c) for c in changed}
        caused = stale_because_of(plan, paths, session.cwd, notebook_changed=str(nb) in paths)
        names = ", ".join(Path(c).name for c in changed[:5])
        note = (
            f"changed on disk: {names}; {caused} cell(s) stale because of it"
            " (the stale plan says why)"
        )
        session.notices = [n for n in session.notices if not n.startswith("changed on disk:")] + [
            note
        ]

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (
            bind(staleness_api.RUN_STALE, self.run_stale),
            bind(staleness_api.PLAN_PROGRESS, self.plan_progress),
            bind(staleness_api.WATCH_FILE, self.watch_file),
        )


#: What an edit of the notebook itself makes a cell stale for (its own text, or its position).
def _error_line(ex: Execution) -> str | None:
    """``ename: evalue`` of a run that raised, bounded."""
    if not ex.error:
        return None
    line = f"{ex.error.get('ename', 'Error')}: {ex.error.get('evalue', '')}".strip()
    return line if len(line) <= 200 else line[:199] + "…"


_NOTEBOOK_EDIT_KINDS = frozenset({"source_changed", "never_run", "moved", "missing_producer"})
#: Reasons that pass staleness on from the cells they name.
_PASSED_ON_KINDS = frozenset({"upstream", "restores", "state_changed"})


def stale_because_of(plan: Plan, paths: set[str], cwd: Path, *, notebook_changed: bool) -> int:
    """How many cells of ``plan`` are in it because of a change to ``paths`` (absolute; the
    notebook's own file among them when ``notebook_changed``): directly, or through cells that
    are. A reason's path is read relative to the kernel's ``cwd``, as the cells read it."""
    entries = [*plan.stale, *plan.blocked]
    caused: set[str] = set()
    grew = True
    while grew:  # to a fixed point: a ``restores`` reason may name a cell further down
        grew = False
        for entry in entries:
            if entry.cell_id in caused:
                continue
            if any(
                (
                    r.kind == "file_changed"
                    and r.path is not None
                    and os.path.normpath(os.path.join(cwd, r.path)) in paths
                )
                or (notebook_changed and r.kind in _NOTEBOOK_EDIT_KINDS)
                or (r.kind in _PASSED_ON_KINDS and caused.intersection(r.cells))
                for r in entry.reasons
            ):
                caused.add(entry.cell_id)
                grew = True
    return len(caused)


def _outside_project(path: str, where: str) -> UsageError:
    return UsageError(
        f"watch_file {path!r}: not a file inside {where}",
        hint="watch a file of the project (relative to the kernel's working directory); "
        "copy outside data into the project to track it",
    )
