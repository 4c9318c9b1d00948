"""Plan rules, second pass: staleness propagates to readers, and values a re-run clobbers (or
scratch code already clobbered) are restored by re-running their producers; then the plan is
assembled in notebook order."""

from __future__ import annotations

from collections.abc import Mapping

from ipykeep.staleness.graph import Graph, GraphCell
from ipykeep.staleness.models import REASON_ORDER, FreshCell, Plan, PlanEntry, Reason
from ipykeep.staleness.tracker_model import _Draft, _Run, writer_label
from ipykeep.staleness.tracker_reasons import PlanReasons


class PlanRestores(PlanReasons):
    def _propagate(
        self,
        graph: Graph,
        drafts: dict[str, _Draft],
        file_writers: Mapping[str, tuple[str, ...]],
    ) -> None:
        changed = True
        while changed:
            changed = False
            for gc in graph.cells:
                draft = drafts[gc.cell_id]
                changed |= self._file_upstream(gc, graph, drafts, file_writers)
                by_producer: dict[str, list[str]] = {}
                for name in sorted(gc.reads):
                    producer = gc.producers.get(name)
                    if (
                        producer is not None
                        and drafts[producer].changes_output()
                        and not self._same_import(graph, graph.by_id[producer], name, drafts)
                    ):
                        by_producer.setdefault(producer, []).append(name)
                for producer, names in by_producer.items():
                    cause = self._cause(drafts[producer])
                    label = self._label(graph, producer)
                    reason = Reason(
                        "upstream",
                        f"uses {', '.join(names)} from {label} ({cause})",
                        cells=(producer,),
                        symbols=tuple(names),
                    )
                    changed |= draft.add(reason)
                if draft.reasons and "missing_producer" not in draft.kinds():
                    changed |= self._restore_mutated(gc, graph, drafts)
                    changed |= self._restore_inputs(gc, graph, drafts)
            changed |= self._restore_clobbered(graph, drafts)

    def _same_import(
        self, graph: Graph, producer: GraphCell, name: str, drafts: Mapping[str, _Draft]
    ) -> bool:
        """Whether re-running ``producer`` leaves ``name`` as it is: it is bound by the same
        import statement its last run executed (the module object is cached by the interpreter),
        and no module source file it (or another cell importing the same) read changed."""
        if not self._run_imported(
            self._runs.get(producer.cell_id), name, producer.analysis.imports.get(name)
        ):
            return False
        if self._module_changed(drafts[producer.cell_id]) or any(
            self._reimports(graph, name, w, producer.cell_id, drafts[w])
            for w in graph.writers.get(name, ())
            if w != producer.cell_id
        ):
            return False
        latest = self._writers.get(name)
        return latest is not None and (
            latest.cell_id == producer.cell_id
            or self._kernel_holds_import(graph, name, producer.cell_id)
        )

    def _restore_inputs(self, gc: GraphCell, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """Restore before re-read: a planned cell must read what a fresh run gives it at that
        point. When the value it would find in the kernel did not come from the cell that should
        produce it (a later definer, its own earlier run of ``x = x[1:]``, a mutation since,
        scratch code, or a planned writer above the producer), that producer re-runs first."""
        changed = False
        for name in sorted(gc.reads - gc.mutates):  # mutated names: see _restore_mutated
            producer = gc.producers.get(name)
            if producer is None or producer == gc.cell_id or drafts[producer].reasons:
                continue
            p_run = self._runs.get(producer)
            if p_run is None or p_run.epoch != self._epoch:
                continue
            why = self._not_from_producer(gc, graph, drafts, name, producer, p_run)
            if why is None:
                continue
            if graph.final_writer(name) == producer:
                # the producer has the last word on the name: say why the kernel lost it
                clobber = self._kernel_clobber(graph, name, producer)
                if clobber is not None:
                    changed |= drafts[producer].add(clobber)
                    continue
            changed |= drafts[producer].add(
                Reason(
                    "restores",
                    f"{self._label(graph, gc.cell_id)} re-runs and reads {name}, but {why}; "
                    f"{self._label(graph, producer)} re-runs first to recreate it",
                    cells=(gc.cell_id,),
                    symbols=(name,),
                )
            )
        return changed

    def _not_from_producer(
        self,
        gc: GraphCell,
        graph: Graph,
        drafts: dict[str, _Draft],
        name: str,
        producer: str,
        p_run: _Run,
    ) -> str | None:
        """Why the value of ``name`` that ``gc`` would read now is not ``producer``'s (None: it is)."""
        p_pos = graph.position[producer]
        for writer in reversed(graph.writers.get(name, ())):
            if (
                graph.position[writer] < p_pos
                and drafts[writer].reasons
                and ("missing_producer" not in drafts[writer].kinds())
                and not self._same_import_binding(graph, name, writer, producer, drafts[writer])
            ):
                return f"re-running {self._label(graph, writer)} overwrites it first"
        latest = self._writers.get(name)
        if latest is None:
            return "it is no longer defined in the kernel"
        if latest.origin != "cell":
            return (
                "scratch code changed it"
                if latest.origin == "scratch"
                else "the browser changed it"
            )
        if self._kernel_holds_import(graph, name, producer):
            return None
        if latest.cell_id == gc.cell_id:
            return "the kernel holds its own earlier result"
        if latest.cell_id != producer:
            return f"the kernel holds the value {self._label(graph, latest.cell_id)} left"
        if latest.version != p_run.version_of(name):
            return f"it changed since {self._label(graph, producer)} ran"
        return None

    def _restore_mutated(self, gc: GraphCell, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """A planned cell that mutates a value in place needs that value rebuilt first."""
        changed = False
        for name in sorted(gc.mutates):
            producer = gc.producers.get(name)
            if producer is None or drafts[producer].reasons:
                continue
            changed |= drafts[producer].add(
                Reason(
                    "restores",
                    f"{self._label(graph, gc.cell_id)} re-runs and changes {name} in place, "
                    f"so {name} must be rebuilt first",
                    cells=(gc.cell_id,),
                    symbols=(name,),
                )
            )
        return changed

    def _restore_clobbered(self, graph: Graph, drafts: dict[str, _Draft]) -> bool:
        """The last writer of each name must have the last word on it."""
        changed = False
        for name, writer_ids in graph.writers.items():
            if not name.isidentifier():
                # hidden generator state is no notebook name: what matters is that cells
                # drawing from it re-run after it is reset (``upstream``), not its final value
                continue
            final = writer_ids[-1]
            reloading = [
                w
                for w in writer_ids[:-1]
                if drafts[w].reasons and self._reimports(graph, name, w, final, drafts[w])
            ]
            if reloading:
                changed |= drafts[final].add(self._reload_reason(graph, name, reloading[0]))
            if drafts[final].reasons:
                continue
            clobbering = [
                w
                for w in writer_ids[:-1]
                if drafts[w].reasons
                and "missing_producer" not in drafts[w].kinds()
                and not self._same_import_binding(graph, name, w, final, drafts[w])
            ]
            if clobbering:
                first = clobbering[0]
                changed |= drafts[final].add(
                    Reason(
                        "restores",
                        f"re-running {self._label(graph, first)} overwrites {name}",
                        cells=(first,),
                        symbols=(name,),
                    )
                )
                continue
            reason = self._kernel_clobber(graph, name, final)
            if reason is not None:
                changed |= drafts[final].add(reason)
        return changed

    def _kernel_clobber(self, graph: Graph, name: str, final: str) -> Reason | None:
        run = self._runs.get(final)
        if run is None or run.epoch != self._epoch:
            return None
        latest = self._writers.get(name)
        if latest is not None and latest.origin == "cell" and latest.cell_id == final:
            return None  # it is the kernel's last writer (its run is its latest one)
        if (
            latest is not None
            and latest.cell_id is not None
            and self._imported_as(graph, name, latest, final)
        ):
            # the same import: the kernel holds what ``final`` gives, unless the module was
            # loaded anew since ``final`` ran (its readers then hold the old one)
            return (
                self._reload_reason(graph, name, latest.cell_id)
                if self._reloaded_since(name, final)
                else None
            )
        if latest is None:
            return Reason("restores", f"{name} is no longer defined in the kernel", symbols=(name,))
        if latest.origin != "cell":
            by = writer_label(latest.origin)
            return Reason("restores", f"{name} was overwritten by {by}", symbols=(name,))
        latest_id = latest.cell_id
        other = self._runs.get(latest_id or "")
        if (
            other is not None
            and latest_id is not None
            and latest_id in graph.by_id
            and (other.index > run.index)
            != (graph.by_id[latest_id].cell.index > graph.by_id[final].cell.index)
        ):
            return Reason(
                "moved",
                f"cells moved: {self._label(graph, final)} now defines {name} last, "
                f"after {self._label(graph, latest_id)}",
                cells=(latest_id,),
                symbols=(name,),
            )
        return Reason(
            "restores",
            f"{name} was overwritten by running {self._label(graph, latest.cell_id)}",
            cells=(latest.cell_id,) if latest.cell_id else (),
            symbols=(name,),
        )

    def _assemble(self, graph: Graph, drafts: dict[str, _Draft]) -> Plan:
        blocked_ids: set[str] = set()
        for gc in graph.cells:  # notebook order: a producer is decided before its readers
            kinds = drafts[gc.cell_id].kinds()
            if "missing_producer" in kinds:
                blocked_ids.add(gc.cell_id)
                continue
            if any(
                r.kind == "upstream" and r.cells and r.cells[0] in blocked_ids
                for r in drafts[gc.cell_id].reasons
            ):
                blocked_ids.add(gc.cell_id)
        stale: list[PlanEntry] = []
        blocked: list[PlanEntry] = []
        fresh: list[FreshCell] = []
        for gc in graph.cells:
            draft = drafts[gc.cell_id]
            if not draft.reasons:
                fresh.append(FreshCell(gc.cell_id, gc.cell.index))
                continue
            order = {k: i for i, k in enumerate(REASON_ORDER)}
            reasons = tuple(sorted(draft.reasons, key=lambda r: order[r.kind]))
            entry = PlanEntry(
                cell_id=gc.cell_id,
                index=gc.cell.index,
                reasons=reasons,
                produces=tuple(sorted(gc.writes)),
            )
            (blocked if gc.cell_id in blocked_ids else stale).append(entry)
        return Plan(stale=tuple(stale), fresh=tuple(fresh), blocked=tuple(blocked))
