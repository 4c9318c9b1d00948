"""Staleness in the engine: feeds each kernel's tracker and serves ``run_stale``/``watch_file``.

Around every notebook cell the layer asks the kernel (silently) which files the cell read, and,
in ``ipyflow`` mode, what ipyflow saw it define and use; scratch and browser code is recorded
from static analysis. Plans are computed from the notebook and the files as they are on disk
at the moment of the request (re-read, re-stat), never from what a watcher last saw.

A watcher (watchfiles, non-recursive, on the notebook's directory and the directories of the
files cells read) only adds a notice to the next result, saying what changed and how many
cells are stale now; it is blind to ipykeep's own notebook writes (recognised by content hash).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import stat as stat_module
from pathlib import Path
from typing import Any

from ..staleness import FileStamp, NotebookCell, Plan, StalenessTracker, probes
from . import ipyflow_adapter, plan_runs
from .engine import Engine, KernelEntry
from .errors import IpykeepError, UsageError
from .execution import Execution
from .notebook import NotebookSnapshot, content_hash, read_notebook
from .records import BatchResult, RunStaleResult

log = logging.getLogger("ipykeep.staleness")

_OUTCOME = {"ok": "ok", "failed": "failed", "interrupted": "interrupted", "lost": "interrupted"}


def _stat_for(entry: KernelEntry):
    base = entry.cwd

    def stat(path: str) -> FileStamp | None:
        # normalized like the in-kernel read hook (no symlink resolution), so a path literal
        # and the run-time read of the same file carry the same name
        full = os.path.normpath(os.path.join(base, path))
        try:
            st = os.stat(full)
            if stat_module.S_ISDIR(st.st_mode):
                digest, count = _listing_stamp(full)
                return FileStamp(full, digest, count)
        except OSError:
            return None
        return FileStamp(full, st.st_mtime_ns, st.st_size)

    return stat


def _listing_stamp(path: str) -> tuple[int, int]:
    """A directory's stamp: its entries' names (same as ``filetrack.listing_stamp``)."""
    names = sorted(
        n
        for n in os.listdir(path)
        if not n.startswith((".", "~"))
        and not n.endswith((".ipynb", ".tmp", ".ipykeep-tmp"))
        and n != "__pycache__"
    )
    digest = hashlib.sha1("\n".join(names).encode("utf-8", "surrogateescape")).hexdigest()
    return int(digest[:15], 16), len(names)


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
    return all(r.state == "ok" or (r.state == "failed" and r.cell_id in expected) for r in batch.results)


class StalenessLayer:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- per-kernel state --------------------------------------------------------------------
    @staticmethod
    def tracker(entry: KernelEntry) -> StalenessTracker:
        return entry.hooks.setdefault("tracker", StalenessTracker())

    async def _install_probes(self, entry: KernelEntry) -> None:
        proc = entry.process
        await proc.install_helper(probes.FILETRACK_MODULE, probes.filetrack_source())
        await proc.eval_silent(probes.filetrack_install_expr(str(self.engine.paths.root)))
        await proc.eval_silent(probes.filetrack_begin_expr())
        await proc.install_helper(probes.STATEMON_MODULE, probes.statemon_source())
        await proc.eval_silent(probes.statemon_install_expr())
        if proc.dataflow == "ipyflow":
            await proc.install_helper(ipyflow_adapter.MODULE_NAME, ipyflow_adapter.probe_source_text())

    # -- engine hooks ------------------------------------------------------------------------
    async def kernel_started(self, engine: Engine, entry: KernelEntry) -> None:
        plan_runs.note_started(entry)
        self.tracker(entry)
        await self._install_probes(entry)
        if entry.notebook is not None:
            entry.hooks["watch_task"] = asyncio.create_task(self._watch(entry))

    async def kernel_restarted(self, engine: Engine, entry: KernelEntry) -> None:
        self.tracker(entry).kernel_restarted()
        await self._install_probes(entry)

    def kernel_lost(self, engine: Engine, entry: KernelEntry) -> None:
        self.tracker(entry).kernel_restarted()

    async def kernel_closing(self, engine: Engine, entry: KernelEntry) -> None:
        task = entry.hooks.pop("watch_task", None)
        if task is not None:
            task.cancel()

    @staticmethod
    def _traced(entry: KernelEntry) -> bool:
        return entry.process.dataflow == "ipyflow" and not entry.hooks.get("untraced")

    async def warm_starting(self, engine: Engine, entry: KernelEntry) -> None:
        """``warm_tracing = false``: run warm-up untraced; those runs carry static analysis only."""
        if entry.process.dataflow == "ipyflow" and not entry.config.warm_tracing:
            await entry.process.eval_silent(ipyflow_adapter.tracing_expr(False))
            entry.hooks["untraced"] = True

    async def warm_finished(self, engine: Engine, entry: KernelEntry) -> None:
        if entry.hooks.pop("untraced", False) and entry.process.alive and not entry.closed:
            await entry.process.eval_silent(ipyflow_adapter.tracing_expr(True))

    def cell_expressions(self, entry: KernelEntry, cell: Any) -> dict[str, str]:
        """Probes evaluated right after the cell, in its own execute request."""
        exprs = {
            "ipykeep_files": probes.filetrack_collect_expr(),
            "ipykeep_state": probes.statemon_collect_expr(),
        }
        if self._traced(entry):
            exprs["ipykeep_flow"] = ipyflow_adapter.cell_expr(cell.cell_id)
        return exprs

    def scratch_expressions(self, entry: KernelEntry) -> dict[str, str]:
        # Closes the file-read window so a scratch execution's reads are not charged to the
        # next notebook cell (the result is not needed); the namespace diff is its evidence.
        return {
            "ipykeep_files": probes.filetrack_collect_expr(),
            "ipykeep_state": probes.statemon_collect_expr(),
        }

    async def _probe_result(self, entry: KernelEntry, ex: Execution, key: str, expr: str) -> Any:
        """A probe's value from the execution's reply, or asked for afresh when the cell failed
        (the kernel evaluates user_expressions only after code that succeeded)."""
        result = ex.expression_results.get(key)
        if result is not None:
            return probes.decode_expression_value(result)
        return await entry.process.eval_silent(expr)

    async def after_cell(self, engine: Engine, entry: KernelEntry, cell: Any, ex: Execution) -> None:
        plan_runs.note_cell(entry, cell.cell_id, ex)
        files: tuple[FileStamp, ...] = ()
        written: tuple[str, ...] = ()
        dynamic = None
        observed = None
        if entry.process.alive:
            try:
                reply = await self._probe_result(entry, ex, "ipykeep_files", probes.filetrack_collect_expr())
                files = probes.parse_filetrack_end(reply)
                written = probes.parse_filetrack_written(reply)
                state = await self._probe_result(entry, ex, "ipykeep_state", probes.statemon_collect_expr())
                observed = probes.parse_statemon(state)
                if self._traced(entry):
                    flow = await self._probe_result(entry, ex, "ipykeep_flow", ipyflow_adapter.cell_expr(cell.cell_id))
                    dynamic = ipyflow_adapter.parse_cell(flow)
            except IpykeepError as exc:
                log.warning("probe after %s failed: %s", cell.cell_id, exc.message)
        self.tracker(entry).record_cell_run(
            cell.cell_id,
            cell.index,
            cell.source,
            _OUTCOME.get(ex.state, "failed"),  # type: ignore[arg-type]
            files_read=files,
            dynamic=dynamic,
            stat=_stat_for(entry),
            files_written=written,
            observed=observed,
        )
        if files:
            self._watch_dirs(entry, {str(Path(f.path).parent) for f in files})

    async def after_scratch(self, engine: Engine, entry: KernelEntry, ex: Execution, origin: str = "scratch") -> None:
        if ex.state in ("ok", "failed", "interrupted"):
            observed = None
            result = ex.expression_results.get("ipykeep_state") if ex.expression_results else None
            if result is not None:
                with contextlib.suppress(IpykeepError):
                    observed = probes.parse_statemon(probes.decode_expression_value(result))
            self.tracker(entry).record_scratch(ex.code, origin, observed=observed)  # type: ignore[arg-type]

    def stale_reasons(self, entry: KernelEntry, snap: NotebookSnapshot) -> dict[str, list[dict[str, Any]]]:
        plan = self.plan(entry, snap)
        return {e.cell_id: [r.to_json() for r in e.reasons] for e in plan.stale + plan.blocked}

    def plan(self, entry: KernelEntry, snap: NotebookSnapshot) -> Plan:
        return self.tracker(entry).plan(notebook_cells(snap), _stat_for(entry))

    # -- RPC methods -------------------------------------------------------------------------
    def rpc_methods(self) -> dict[str, Any]:
        return {"run_stale": self.run_stale, "watch_file": self.watch_file, "plan_progress": self.plan_progress}

    async def plan_progress(self, kernel_id: str | None = None, notebook: str | None = None) -> dict[str, Any]:
        """How far the plan being executed (``run_stale(execute=True)``) has got."""
        return plan_runs.progress_of(self.engine.entry(kernel_id, notebook))

    async def run_stale(
        self, kernel_id: str | None = None, notebook: str | None = None, execute: bool = False, fresh: bool = False
    ) -> RunStaleResult:
        """The stale plan (read-only); with ``execute`` run it in order on the main shell.

        When a cell fails, the planned cells that depend on it (transitively) are skipped and
        reported; independent cells still run. With ``fresh`` (and ``execute``) the kernel is
        restarted and every code cell runs top to bottom instead, as warm-up does. The result
        carries each planned cell's last measured duration and the plan's estimated cost
        against that fresh run.
        """
        if fresh and not execute:
            raise UsageError("fresh restarts the kernel and runs every cell: it needs execute", hint="ipykeep run-stale --execute --fresh")
        entry = self.engine._live(kernel_id, notebook) if execute else self.engine.entry(kernel_id, notebook)
        if entry.notebook is None:
            raise UsageError(f"kernel {entry.kernel_id} has no notebook", hint="run_stale works on a notebook's kernel")
        snap = read_notebook(entry.notebook)
        plan = self.plan(entry, snap)
        plan_json = plan.to_json()
        cost = plan_runs.annotate(entry, snap, plan.cell_ids, plan_json)
        batch = None
        if fresh:
            batch = await plan_runs.run_fresh(self.engine, entry, snap)
        elif execute and plan.stale:
            deps = {e.cell_id: {c for r in e.reasons for c in r.cells if c != e.cell_id} for e in plan.stale}
            skipped: set[str] = set()

            cells = notebook_cells(snap)
            expected = {c.cell_id for c in cells if c.expects_failure}
            tracker = self.tracker(entry)
            stat = _stat_for(entry)
            first = plan.stale[0].cell_id

            def skip_if(cell_id: str, failed: set[str]) -> str | None:
                bad = deps.get(cell_id, set()) & ((failed - expected) | skipped)
                if bad:
                    skipped.add(cell_id)
                    return f"depends on {', '.join(sorted(bad))}, which failed"
                # The plan was made before anything ran. Re-plan with what the cells above
                # just did: a reader planned because an edited cell might change its input is
                # dropped when the kernel saw that input keep its value (a print-only edit).
                if cell_id != first and cell_id not in tracker.plan(cells, stat).cell_ids:
                    return "no longer stale: the values it reads kept their value when the cells above re-ran"
                return None

            await self._forget_changed_modules(entry, plan)

            progress = plan_runs.track_progress(entry, list(plan.cell_ids))
            try:
                batch = await self.engine._run_batch(entry, snap, list(plan.cell_ids), skip_if=skip_if, progress=progress)
            finally:
                progress.finished = True
        return RunStaleResult(
            kernel_id=entry.kernel_id,
            executed=bool(execute),
            stale=plan_json["stale"],
            fresh=plan_json["fresh"],
            blocked=plan_json["blocked"],
            batch=batch,
            ok=_batch_ok(batch, snap),
            notices=entry.take_notices(),
            cost=cost,
            fresh_run=True if fresh else None,
        )

    async def _forget_changed_modules(self, entry: KernelEntry, plan: Plan) -> None:
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
        if paths and entry.process.alive:
            with contextlib.suppress(IpykeepError):
                await entry.process.eval_silent(probes.forget_modules_expr(paths))

    async def watch_file(self, path: str, kernel_id: str | None = None, notebook: str | None = None) -> dict[str, Any]:
        """Register ``path`` as an input of the notebook (a read the detection missed)."""
        entry = self.engine.entry(kernel_id, notebook)
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = (entry.cwd / p).resolve()
        stamp = _stat_for(entry)(str(p))
        self.tracker(entry).watch(str(p), stamp)
        self._watch_dirs(entry, {str(p.parent)})
        return {"kernel_id": entry.kernel_id, "path": str(p), "exists": stamp is not None, "watched": list(self.tracker(entry).watched)}

    # -- watcher -----------------------------------------------------------------------------
    async def _watch(self, entry: KernelEntry) -> None:
        """Notice edits made by others; the notice rides on the next result."""
        from watchfiles import awatch

        assert entry.notebook is not None
        while not entry.closed:
            dirs = {str(entry.notebook.parent)} | set(entry.hooks.get("read_dirs", set()))
            dirs = {d for d in dirs if os.path.isdir(d)}
            stop = asyncio.Event()
            entry.hooks["watch_restart"] = stop
            try:
                # ends when _watch_dirs adds a directory: the loop restarts with it
                async for changes in awatch(*dirs, recursive=False, debounce=300, step=100, stop_event=stop):
                    self._on_changes(entry, {Path(p) for _, p in changes})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a vanished directory, inotify limits…
                log.info("watcher for %s stopped: %s", entry.kernel_id, exc)
                await asyncio.sleep(2)

    @staticmethod
    def _watch_dirs(entry: KernelEntry, dirs: set[str]) -> None:
        """Add directories of files the notebook depends on; restart the watcher if new."""
        known: set[str] = entry.hooks.setdefault("read_dirs", set())
        if dirs - known:
            known |= dirs
            restart = entry.hooks.get("watch_restart")
            if restart is not None:
                restart.set()

    def _on_changes(self, entry: KernelEntry, paths: set[Path]) -> None:
        nb = entry.notebook
        if nb is None:
            return
        relevant = []
        if nb in paths:
            with contextlib.suppress(OSError):
                if content_hash(nb.read_bytes()) not in entry.own_writes:
                    relevant.append(nb.name)
        tracked = entry.hooks.get("read_dirs", set())
        relevant += sorted(
            p.name
            for p in paths
            if p != nb and str(p.parent) in tracked and p.suffix != ".ipynb" and not p.name.startswith(".")
        )
        if not relevant:
            return
        try:
            plan = self.plan(entry, read_notebook(nb))
        except IpykeepError:
            return
        note = f"changed on disk: {', '.join(relevant[:5])}; {len(plan.stale)} cell(s) stale now (run_stale to see why)"
        entry.notices = [n for n in entry.notices if not n.startswith("changed on disk:")] + [note]
