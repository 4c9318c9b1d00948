"""Plan rules, first pass: each cell's own reasons to re-run (never run, edited, failed, file
changed, kernel restarted, reads a value no longer from its producer) and blocked cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ipykeep.staleness.graph import Graph, GraphCell
from ipykeep.staleness.models import DynamicCellInfo, FileStamp, NotebookCell, Observed, Reason
from ipykeep.staleness.tracker_model import (
    StatFn,
    TrackerState,
    _canonical,
    _Draft,
    _hash,
    _mentions,
    _Run,
    _same_stamp,
    _Write,
    writer_label,
)


class PlanReasons(TrackerState):
    def _watch_dependents(self, graph: Graph) -> dict[str, tuple[str, ...]]:
        """cell id -> watched paths it depends on."""
        deps: dict[str, list[str]] = {gc.cell_id: [] for gc in graph.cells}
        for path in self._watched:
            named = [gc.cell_id for gc in graph.cells if _mentions(gc.cell.source, path)]
            for cid in named or [gc.cell_id for gc in graph.cells]:
                deps[cid].append(path)
        return {k: tuple(v) for k, v in deps.items()}

    def _evidence(
        self, cells: Sequence[NotebookCell]
    ) -> tuple[dict[str, Observed], dict[str, Observed]]:
        """Runtime evidence per cell: the full observation of runs whose source is unchanged,
        and, for edited cells, the in-place changes their last run made (still likely)."""
        full: dict[str, Observed] = {}
        carried: dict[str, Observed] = {}
        for cell in cells:
            run = self._runs.get(cell.cell_id)
            if run is None or run.observed is None or run.outcome != "ok":
                continue
            if run.epoch == self._epoch and run.source_hash == _hash(cell.source):
                full[cell.cell_id] = run.observed
            elif run.observed.mutated or run.observed.bound:
                carried[cell.cell_id] = run.observed
        return full, carried

    def _block(self, graph: Graph, drafts: dict[str, _Draft]) -> None:
        """Blocking is transitive: a cell reading a name from a cell that a fresh run cannot
        run (it reads a name no cell above defines) would fail too, whatever the kernel holds."""
        blocked: set[str] = set()
        for gc in graph.cells:  # notebook order: producers are decided before their readers
            draft = drafts[gc.cell_id]
            if "missing_producer" in draft.kinds():
                blocked.add(gc.cell_id)
                continue
            by_producer: dict[str, list[str]] = {}
            for name in sorted(gc.reads):
                producer = gc.producers.get(name)
                if producer is not None and producer in blocked:
                    by_producer.setdefault(producer, []).append(name)
            for producer, names in by_producer.items():
                draft.add(
                    Reason(
                        "missing_producer",
                        f"uses {', '.join(names)} from {self._label(graph, producer)}, "
                        "which a fresh run cannot run (it is blocked)",
                        cells=(producer,),
                        symbols=tuple(names),
                    )
                )
            if by_producer:
                blocked.add(gc.cell_id)

    def _still_valid_dynamic(self, cells: Sequence[NotebookCell]) -> dict[str, DynamicCellInfo]:
        out: dict[str, DynamicCellInfo] = {}
        for cell in cells:
            run = self._runs.get(cell.cell_id)
            if (
                run is not None
                and run.dynamic is not None
                and run.epoch == self._epoch
                and run.source_hash == _hash(cell.source)
            ):
                out[cell.cell_id] = run.dynamic
        return out

    def _direct_reasons(
        self,
        gc: GraphCell,
        graph: Graph,
        draft: _Draft,
        stat: StatFn,
        watch_deps: Mapping[str, tuple[str, ...]],
    ) -> None:
        cid = gc.cell_id
        run = self._runs.get(cid)
        for name in sorted(gc.reads):
            self._missing_producer(gc, graph, draft, name)
        if run is None:
            draft.add(Reason("never_run", "never run in this kernel"))
            return
        if run.epoch != self._epoch:
            draft.add(Reason("kernel_restarted", "its results were lost when the kernel restarted"))
            return
        if run.source_hash != _hash(gc.cell.source):
            draft.add(Reason("source_changed", "source edited since it last ran"))
        if run.outcome != "ok" and not (run.outcome == "failed" and gc.cell.expects_failure):
            verb = "raised an error" if run.outcome == "failed" else "was interrupted"
            draft.add(Reason("failed", f"its last run {verb}"))
        self._file_reasons(gc, run, draft, stat, watch_deps.get(cid, ()))
        for name in sorted(gc.reads):
            self._read_reason(gc, graph, run, draft, name)

    def _file_reasons(
        self,
        gc: GraphCell,
        run: _Run,
        draft: _Draft,
        stat: StatFn,
        watched: tuple[str, ...],
    ) -> None:
        baseline: dict[str, FileStamp] = dict(run.files)
        for path in watched:
            if path not in baseline:
                stamp = self._watched[path]
                if stamp is not None:
                    baseline[path] = stamp
        for path in sorted(baseline):
            before = baseline[path]
            now = stat(path)
            if _same_stamp(before, now):
                continue
            if now is None or not now.exists:
                what = "was deleted"
            elif not before.exists:
                what = "appeared"
            else:
                what = "changed"
            draft.add(Reason("file_changed", f"file {path} {what} since it last ran", path=path))

    def _missing_producer(self, gc: GraphCell, graph: Graph, draft: _Draft, name: str) -> None:
        if gc.producers.get(name) is not None or not name.isidentifier():
            return  # pseudo-names (``<numpy.random>``) stand for state that always exists
        below = graph.writers_below(name, gc.cell_id)
        below = tuple(w for w in below if w != gc.cell_id)
        if below:
            where = ", ".join(self._label(graph, w) for w in below)
            draft.add(
                Reason(
                    "missing_producer",
                    f"uses {name}, which only {where} below it defines",
                    cells=below,
                    symbols=(name,),
                )
            )
            return
        write = self._writers.get(name)
        if write is None:
            return  # a builtin, or something no tracked code ever defined
        if write.origin != "cell":
            source = writer_label(write.origin)
            message = f"uses {name}, which no cell defines (it came from {source})"
            cells: tuple[str, ...] = ()
        elif write.cell_id == gc.cell_id:
            message = f"uses {name}, which no cell above defines (only its own earlier run)"
            cells = ()
        else:
            message = f"uses {name}, which no cell defines any more (it came from {self._label(graph, write.cell_id)})"
            cells = (write.cell_id,) if write.cell_id else ()
        draft.add(Reason("missing_producer", message, cells=cells, symbols=(name,)))

    @staticmethod
    def _same_import_binding(graph: Graph, name: str, a: str, b: str, draft_a: _Draft) -> bool:
        """Whether re-running cell ``a`` binds ``name`` to what cell ``b`` left: both import the
        same thing under it (``from scipy import stats`` twice), which the interpreter caches,
        and ``a`` is not planned because a module source file changed (see ``_reimports``)."""
        return PlanReasons._imports_alike(graph, name, a, b) and not PlanReasons._module_changed(
            draft_a
        )

    @staticmethod
    def _reimports(graph: Graph, name: str, a: str, b: str, draft_a: _Draft) -> bool:
        """Whether re-running ``a`` loads new code for the module that ``b`` imports under
        ``name`` too: ``b``'s binding then changes when it re-runs (it finds ``a``'s newly loaded
        module in the interpreter's cache), so its readers must re-run after it."""
        return PlanReasons._imports_alike(graph, name, a, b) and PlanReasons._module_changed(
            draft_a
        )

    @staticmethod
    def _imports_alike(graph: Graph, name: str, a: str, b: str) -> bool:
        wanted = graph.by_id[a].analysis.imports.get(name)
        return wanted is not None and wanted == graph.by_id[b].analysis.imports.get(name)

    @staticmethod
    def _module_changed(draft: _Draft) -> bool:
        return any(
            r.kind == "file_changed" and (r.path or "").endswith(".py") for r in draft.reasons
        )

    def _kernel_holds_import(self, graph: Graph, name: str, cell_id: str) -> bool:
        """Whether the kernel holds ``name`` as bound by a cell's run importing exactly what
        ``cell_id`` imports under that name (so the object ``cell_id`` would give), and that
        object is the one ``cell_id``'s own readers saw (see ``_reloaded_since``)."""
        return self._imported_as(
            graph, name, self._writers.get(name), cell_id
        ) and not self._reloaded_since(name, cell_id)

    def _reloaded_since(self, name: str, cell_id: str) -> bool:
        """Whether another cell's import bound ``name`` to a new object after ``cell_id`` last
        ran: the module was loaded again (its source changed and it was dropped from the
        interpreter's cache), so what ``cell_id``'s readers read is not what it gives now."""
        latest = self._writers.get(name)
        run = self._runs.get(cell_id)
        if (
            latest is None
            or run is None
            or latest.origin != "cell"
            or latest.cell_id in (None, cell_id)
        ):
            return False
        other = self._runs.get(latest.cell_id or "")
        return (
            other is not None
            and other.seq > run.seq
            and other.observed is not None
            and name in other.observed.bound
        )

    def _imported_as(self, graph: Graph, name: str, write: _Write | None, cell_id: str) -> bool:
        """Whether ``write`` of ``name`` was a cell run's import of exactly what ``cell_id``
        imports under that name, in this kernel."""
        if write is None or write.origin != "cell" or write.cell_id is None:
            return False
        run = self._runs.get(write.cell_id)
        return self._run_imported(run, name, graph.by_id[cell_id].analysis.imports.get(name)) and (
            run is not None and write.version == run.version_of(name)
        )

    def _run_imported(self, run: _Run | None, name: str, wanted: str | None) -> bool:
        """Whether ``run`` (an ok run in this kernel) bound ``name`` by importing ``wanted``."""
        return (
            wanted is not None
            and run is not None
            and run.epoch == self._epoch
            and run.outcome == "ok"
            and run.imports.get(name) == wanted
        )

    def _reload_reason(self, graph: Graph, name: str, importer: str) -> Reason:
        """Why a cell importing ``name`` as ``importer`` does must re-run after it, with its
        readers: ``importer`` loads (or loaded) the module's changed source (``_reimports``,
        ``_reloaded_since``)."""
        return Reason(
            "upstream",
            f"imports {name} as {self._label(graph, importer)} does, which loads its changed source",
            cells=(importer,),
            symbols=(name,),
        )

    def _read_reason(
        self, gc: GraphCell, graph: Graph, run: _Run, draft: _Draft, name: str
    ) -> None:
        producer = gc.producers.get(name)
        if producer is None or name not in run.reads:
            return  # no producer (reported above), or a new read: its edit already counts
        seen = run.reads[name]
        p_run = self._runs.get(producer)
        label = self._label(graph, producer)
        latest = self._writers.get(name)
        p_run = self._runs.get(producer)
        if latest is not None and latest.origin != "cell" and latest.seq > run.seq:
            if (
                latest.evidence
                and seen is not None
                and seen.origin == "cell"
                and seen.cell_id == producer
                and p_run is not None
                and seen.version == p_run.version_of(name)
            ):
                # the cell ran on the producer's value; the scratch change is undone by the
                # producer's restore, and the kernel saw that it touched nothing else
                return
            by = writer_label(latest.origin)
            draft.add(
                Reason("state_changed", f"{name} was changed by {by} after it ran", symbols=(name,))
            )
            return
        if p_run is None or p_run.epoch != self._epoch or p_run.outcome != "ok":
            return  # the producer is in the plan itself: ``upstream`` covers it
        if seen is None:
            if p_run.seq > run.seq:
                draft.add(
                    Reason(
                        "state_changed",
                        f"{name} was defined by {label} only after it ran",
                        cells=(producer,),
                        symbols=(name,),
                    )
                )
            return
        if seen.origin != "cell":
            by = writer_label(seen.origin)
            draft.add(Reason("state_changed", f"it read {name} as set by {by}", symbols=(name,)))
            return
        if seen.cell_id == producer:
            if seen.version != p_run.version_of(name):
                draft.add(
                    Reason(
                        "state_changed",
                        f"{name} was changed by re-running {label}",
                        cells=(producer,),
                        symbols=(name,),
                    )
                )
            return
        if seen.cell_id == gc.cell_id:
            draft.add(
                Reason(
                    "state_changed",
                    f"it last ran on its own earlier result for {name}, not on {label}'s",
                    cells=(producer,),
                    symbols=(name,),
                )
            )
            return
        if self._imported_as(graph, name, seen, producer):
            return  # another cell's same import: the one module object either way
        old = self._label(graph, seen.cell_id)
        seen_id = seen.cell_id
        seen_here = seen_id is not None and seen_id in graph.by_id
        moved = (
            run.index != gc.cell.index
            or (
                seen_id is not None
                and seen_here
                and (seen_run := self._runs.get(seen_id)) is not None
                and seen_run.index != graph.by_id[seen_id].cell.index
            )
            or p_run.index != graph.by_id[producer].cell.index
        )
        if moved and seen_id is not None and seen_here:
            draft.add(
                Reason(
                    "moved",
                    f"cells moved: it now reads {name} from {label}, not {old}",
                    cells=(producer, seen_id),
                    symbols=(name,),
                )
            )
        else:
            draft.add(
                Reason(
                    "state_changed",
                    f"it read {name} from {old}; {label} defines it now",
                    cells=(producer,),
                    symbols=(name,),
                )
            )

    def _file_writers(self, graph: Graph, stat: StatFn) -> dict[str, tuple[str, ...]]:
        """path -> ids of the cells that write it (last run, or a literal in the source now)."""
        out: dict[str, list[str]] = {}
        for gc in graph.cells:
            paths = {_canonical(stat, p) for p in gc.analysis.written_paths}
            run = self._runs.get(gc.cell_id)
            if run is not None:
                paths |= run.written
            for path in paths:
                out.setdefault(path, []).append(gc.cell_id)
        return {k: tuple(v) for k, v in out.items()}

    def _file_upstream(
        self,
        gc: GraphCell,
        graph: Graph,
        drafts: dict[str, _Draft],
        file_writers: Mapping[str, tuple[str, ...]],
    ) -> bool:
        """A cell reading a file that a planned cell above it rewrites must run after it."""
        run = self._runs.get(gc.cell_id)
        if run is None:
            return False
        changed = False
        pos = graph.position[gc.cell_id]
        if run.files:
            # shell commands are opaque: a re-running cell above that runs one may rewrite any
            # project file, so the cells that read project files re-run after it
            for other in graph.cells[:pos]:
                kinds = drafts[other.cell_id].kinds()
                if other.analysis.shell and kinds and "missing_producer" not in kinds:
                    changed |= drafts[gc.cell_id].add(
                        Reason(
                            "upstream",
                            f"reads {', '.join(sorted(run.files)[:3])}, which the shell command in "
                            f"{self._label(graph, other.cell_id)} may rewrite (shell commands are "
                            "opaque)",
                            cells=(other.cell_id,),
                        )
                    )
        for path in sorted(run.files):
            for writer in file_writers.get(path, ()):
                if graph.position[writer] >= pos:
                    continue
                kinds = drafts[writer].kinds()
                if not kinds or "missing_producer" in kinds:
                    continue
                changed |= drafts[gc.cell_id].add(
                    Reason(
                        "upstream",
                        f"reads {path}, which {self._label(graph, writer)} writes "
                        f"({self._cause(drafts[writer])})",
                        cells=(writer,),
                        path=path,
                    )
                )
        return changed
