"""Staleness propagates to readers of names and files, and values a re-run clobbers (or scratch
code clobbered) are restored by re-running their producers; then the plan is assembled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ipykeep.staleness.graph import Graph, GraphCell
from ipykeep.staleness.hashing import effect_hash
from ipykeep.staleness.models import REASON_ORDER, FreshCell, Plan, PlanEntry, Reason
from ipykeep.staleness.process_state import symbol_label
from ipykeep.staleness.tracker_imports import (
    imported_as,
    kernel_holds_import,
    module_changed,
    reimports,
    reload_reason,
    reloaded_since,
    run_imported,
    same_import_binding,
)
from ipykeep.staleness.tracker_reasons import AGAIN
from ipykeep.staleness.tracker_state import (
    CellDraft,
    RunRecord,
    StatFn,
    TrackerState,
    canonical_path,
    cell_label,
    mutated_below,
    unseeded,
    writer_label,
)


def propagate(
    state: TrackerState,
    graph: Graph,
    drafts: Mapping[str, CellDraft],
    writers_by_path: Mapping[str, tuple[str, ...]],
) -> None:
    """Add reasons that follow from other cells' reasons, until no draft changes."""
    changed = True
    while changed:
        changed = False
        for gc in graph.cells:
            draft = drafts[gc.cell_id]
            changed |= file_upstream(state, gc, graph, drafts, writers_by_path)
            by_producer: dict[str, list[str]] = {}
            for name in sorted(gc.reads):
                producer = gc.producers.get(name)
                if (
                    producer is not None
                    and drafts[producer].changes_output()
                    and not same_import(state, graph, graph.by_id[producer], name, drafts)
                ):
                    by_producer.setdefault(producer, []).append(name)
            for producer, names in by_producer.items():
                said = ", ".join(map(symbol_label, names))  # hidden state in words
                reason = Reason(
                    "upstream",
                    f"uses {said} from {cell_label(graph, producer)} ({drafts[producer].cause()})",
                    cells=(producer,),
                    symbols=tuple(names),
                )
                changed |= draft.add(reason, via=producer, if_changed=True)
            if draft.failing and draft.kinds() - {"failed", "restores"}:
                unfail(draft)  # an input changes: it may not fail again
                changed = True
            if draft.reasons and not draft.blocked():
                changed |= restore_mutated(state, gc, graph, drafts)
                changed |= restore_inputs(state, gc, graph, drafts)
            elif not draft.reasons:
                changed |= restore_holders(state, gc, graph, drafts)
        changed |= restore_clobbered(state, graph, drafts)


def unfail(draft: CellDraft) -> None:
    """A failing cell runs after all: something it depends on changes."""
    draft.failing = False
    draft.reasons[:] = [
        replace(r, message=r.message.removesuffix(AGAIN)) if r.kind == "failed" else r
        for r in draft.reasons
    ]


def file_writers(state: TrackerState, graph: Graph, stat: StatFn) -> dict[str, tuple[str, ...]]:
    """path -> ids of the cells that write it (last run, or a literal in the source now)."""
    out: dict[str, list[str]] = {}
    for gc in graph.cells:
        paths = {canonical_path(stat, p) for p in gc.analysis.written_paths}
        run = state.runs.get(gc.cell_id)
        if run is not None:
            paths |= run.written
        for path in paths:
            out.setdefault(path, []).append(gc.cell_id)
    return {k: tuple(v) for k, v in out.items()}


def file_upstream(
    state: TrackerState,
    gc: GraphCell,
    graph: Graph,
    drafts: Mapping[str, CellDraft],
    writers_by_path: Mapping[str, tuple[str, ...]],
) -> bool:
    """A cell reading a file that a planned cell above it rewrites must run after it."""
    run = state.runs.get(gc.cell_id)
    if run is None:
        return False
    changed = False
    pos = graph.position[gc.cell_id]
    if run.files:
        # shell commands are opaque: a re-running cell above that runs one may rewrite any
        # project file, so the cells that read project files re-run after it
        for other in graph.cells[:pos]:
            other_draft = drafts[other.cell_id]
            if other.analysis.shell and other_draft.reasons and not other_draft.blocked():
                changed |= drafts[gc.cell_id].add(
                    Reason(
                        "upstream",
                        f"reads {', '.join(sorted(run.files)[:3])}, which the shell command in "
                        f"{cell_label(graph, other.cell_id)} may rewrite (shell commands are "
                        "opaque)",
                        cells=(other.cell_id,),
                    ),
                    via=other.cell_id,
                )
    for path in sorted(run.files):
        for writer in writers_by_path.get(path, ()):
            if graph.position[writer] >= pos:
                continue
            if not drafts[writer].reasons or drafts[writer].blocked():
                continue
            changed |= drafts[gc.cell_id].add(
                Reason(
                    "upstream",
                    f"reads {path}, which {cell_label(graph, writer)} writes "
                    f"({drafts[writer].cause()})",
                    cells=(writer,),
                    path=path,
                ),
                via=writer,
            )
    return changed


def same_import(
    state: TrackerState,
    graph: Graph,
    producer: GraphCell,
    name: str,
    drafts: Mapping[str, CellDraft],
) -> bool:
    """Whether re-running ``producer`` leaves ``name`` as it is: it is bound by the same
    import statement its last run executed (the module object is cached by the interpreter),
    and no module source file it (or another cell importing the same) read changed."""
    if not run_imported(
        state, state.runs.get(producer.cell_id), name, producer.analysis.imports.get(name)
    ):
        return False
    if module_changed(drafts[producer.cell_id]) or any(
        reimports(graph, name, w, producer.cell_id, drafts[w])
        for w in graph.writers.get(name, ())
        if w != producer.cell_id
    ):
        return False
    latest = state.writers.get(name)
    return latest is not None and (
        latest.cell_id == producer.cell_id
        or kernel_holds_import(state, graph, name, producer.cell_id)
    )


def restore_inputs(
    state: TrackerState, gc: GraphCell, graph: Graph, drafts: Mapping[str, CellDraft]
) -> bool:
    """Restore before re-read: a planned cell must read what a fresh run gives it at that
    point. When the value it would find in the kernel did not come from the cell that should
    produce it (a later definer, its own earlier run of ``x = x[1:]``, a mutation since,
    scratch code, or a planned writer above the producer), that producer re-runs first."""
    changed = False
    for name in sorted(gc.reads - gc.mutates):  # mutated names: see restore_mutated
        producer = gc.producers.get(name)
        if producer is None or producer == gc.cell_id or drafts[producer].reasons:
            continue
        p_run = state.runs.get(producer)
        if p_run is None or p_run.epoch != state.epoch:
            continue
        why = not_from_producer(state, gc, graph, drafts, name, producer, p_run)
        if why is None:
            continue
        module_owned = unrestorable(state, graph, name, producer)
        if module_owned is not None:
            changed |= fresh_only(graph, drafts, gc.cell_id, producer, module_owned)
            continue
        if graph.final_writer(name) == producer:
            # the producer has the last word on the name: say why the kernel lost it
            clobber = kernel_clobber(state, graph, name, producer)
            if clobber is not None:
                changed |= drafts[producer].add(clobber)
                continue
        changed |= drafts[producer].add(
            Reason(
                "restores",
                f"{cell_label(graph, gc.cell_id)} re-runs and reads {name}, but {why}; "
                f"{cell_label(graph, producer)} re-runs first to recreate it",
                cells=(gc.cell_id,),
                symbols=(name,),
            ),
            via=gc.cell_id,
        )
    return changed


def not_from_producer(
    state: TrackerState,
    gc: GraphCell,
    graph: Graph,
    drafts: Mapping[str, CellDraft],
    name: str,
    producer: str,
    p_run: RunRecord,
) -> str | None:
    """Why the value of ``name`` that ``gc`` would read is not ``producer``'s (None: it is)."""
    p_pos = graph.position[producer]
    for writer in reversed(graph.writers.get(name, ())):
        if (
            graph.position[writer] < p_pos
            and drafts[writer].reasons
            and not drafts[writer].blocked()
            and not same_import_binding(graph, name, writer, producer, drafts[writer])
        ):
            return f"re-running {cell_label(graph, writer)} overwrites it first"
    latest = state.writers.get(name)
    if latest is None:
        return "it is no longer defined in the kernel"
    if latest.origin != "cell":
        return "scratch code changed it" if latest.origin == "scratch" else "the browser changed it"
    if kernel_holds_import(state, graph, name, producer):
        return None
    if latest.cell_id == gc.cell_id:
        return "the kernel holds its own earlier result"
    if latest.cell_id != producer:
        return f"the kernel holds the value {cell_label(graph, latest.cell_id)} left"
    if latest.version != p_run.version_of(name):
        return f"it changed since {cell_label(graph, producer)} ran"
    return None


def restore_mutated(
    state: TrackerState, gc: GraphCell, graph: Graph, drafts: Mapping[str, CellDraft]
) -> bool:
    """A planned cell that mutates a value in place needs that value rebuilt first, unless the
    kernel holds what a fresh run has there: the producer's own value, which nothing wrote or
    changed since (rebuilding it would make a new object, and the values that took a reference
    to the old one, a list in a dict or a model holding its frame, would miss the mutation)."""
    changed = False
    for name in sorted(gc.mutates):
        producer = gc.producers.get(name)
        if producer is not None and drafts[producer].reasons:
            continue
        if unseeded(graph, name, gc.cell_id):
            # hidden generator state that no cell above sets (``import numpy`` leaves the
            # global generator as it is, and is no write of it): no re-run rebuilds it, so
            # nothing is planned for it; the drawing cell's values are new ones, which its
            # readers must see
            if producer is not None or gc.cell_id in state.runs:
                changed |= drafts[gc.cell_id].add(
                    unseeded_draw(graph, name, producer), via=gc.cell_id
                )
            continue
        if producer is None:
            continue
        if holds_producer_value(state, gc, graph, drafts, name, producer):
            continue
        module_owned = unrestorable(state, graph, name, producer)
        if module_owned is not None:
            changed |= fresh_only(graph, drafts, gc.cell_id, producer, module_owned)
            continue
        changed |= drafts[producer].add(
            Reason(
                "restores",
                f"{cell_label(graph, gc.cell_id)} re-runs and changes {name} in place, "
                f"so {name} must be rebuilt first",
                cells=(gc.cell_id,),
                symbols=(name,),
            ),
            via=gc.cell_id,
        )
    return changed


def unseeded_draw(graph: Graph, name: str, producer: str | None) -> Reason:
    """The reason a cell drawing from an unseeded generator re-runs with new draws."""
    rebuilder = (
        "re-running the cells above"
        if producer is None
        else f"re-running {cell_label(graph, producer)}"
    )
    return Reason(
        "state_changed",
        f"it draws from {name}, which no cell above seeds: {rebuilder} cannot rebuild it, "
        "so its draws differ from its last run's",
        cells=() if producer is None else (producer,),
        symbols=(name,),
    )


def holds_producer_value(
    state: TrackerState,
    gc: GraphCell,
    graph: Graph,
    drafts: Mapping[str, CellDraft],
    name: str,
    producer: str,
) -> bool:
    """Whether the kernel's ``name`` is, on the evidence, the value ``producer``'s last run left
    (the kernel's latest write of it, same version) and no planned cell above overwrites it
    first. It takes the kernel's evidence: with a fully fingerprinted value (not sampled, not
    compared by identity) a change since would have shown as a write of its own."""
    p_run = state.runs.get(producer)
    if (
        p_run is None
        or p_run.epoch != state.epoch
        or p_run.outcome != "ok"
        or p_run.observed is None
        or name in p_run.observed.opaque
    ):
        return False
    return not_from_producer(state, gc, graph, drafts, name, producer, p_run) is None


def restore_holders(
    state: TrackerState, gc: GraphCell, graph: Graph, drafts: Mapping[str, CellDraft]
) -> bool:
    """A cell whose values hold a reference to an object it read (``holder = {'data': rows}``,
    a model fitted on ``df``) re-runs when that object's producer re-runs and a cell below
    changes the object in place: the re-run makes a new object, and the change must reach what
    the holder holds, as in a fresh run."""
    run = state.runs.get(gc.cell_id)
    if run is None or run.observed is None or run.epoch != state.epoch:
        return False
    for name in sorted(gc.reads):
        producer = gc.producers.get(name)
        if producer is None or name not in graph.by_id[producer].analysis.defs:
            continue
        if not drafts[producer].reasons or drafts[producer].blocked():
            continue
        holders = run.observed.holds(name)
        if holders and mutated_below(graph, name, gc.cell_id):
            return drafts[gc.cell_id].add(
                Reason(
                    "restores",
                    f"{', '.join(holders)} holds the {name} object that "
                    f"{cell_label(graph, producer)} makes anew when it re-runs",
                    cells=(producer,),
                    symbols=(name,),
                ),
                via=producer,
            )
    return False


def restore_clobbered(state: TrackerState, graph: Graph, drafts: Mapping[str, CellDraft]) -> bool:
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
            if drafts[w].reasons and reimports(graph, name, w, final, drafts[w])
        ]
        if reloading:
            changed |= drafts[final].add(reload_reason(graph, name, reloading[0]))
        if drafts[final].reasons:
            continue
        clobbering = [
            w
            for w in writer_ids[:-1]
            if drafts[w].reasons
            and not drafts[w].blocked()
            and not same_import_binding(graph, name, w, final, drafts[w])
        ]
        if clobbering:
            first = clobbering[0]
            changed |= drafts[final].add(
                Reason(
                    "restores",
                    f"re-running {cell_label(graph, first)} overwrites {name}",
                    cells=(first,),
                    symbols=(name,),
                ),
                via=first,
            )
            continue
        reason = kernel_clobber(state, graph, name, final)
        if reason is not None:
            changed |= drafts[final].add(reason)
    return changed


def unrestorable(state: TrackerState, graph: Graph, name: str, producer: str) -> Reason | None:
    """Why re-running ``producer`` cannot rebuild ``name`` (None: it can): ``producer`` binds it
    by an import, and the kernel's object was changed in place by a cell's run since. The import
    hands back the one object the module owns, changed as it is; a fresh run starts from the
    module's own, unchanged. The reason blocks ``producer`` (``needs_fresh``)."""
    module = graph.by_id[producer].analysis.imports.get(name)
    latest = state.writers.get(name)
    if module is None or latest is None or latest.origin != "cell" or latest.cell_id is None:
        return None
    run = state.runs.get(latest.cell_id)
    if (
        run is None
        or run.epoch != state.epoch
        or run.observed is None
        or name not in run.observed.mutated
        or name in run.observed.bound
    ):
        return None
    return Reason(
        "restores",
        f"{name} (from {module.partition(':')[0]}) was changed in place by "
        f"{cell_label(graph, latest.cell_id)}; re-running the import gives back the same "
        "changed object, so only a fresh run (run-stale --execute --fresh) undoes it",
        cells=(latest.cell_id,),
        symbols=(name,),
        needs_fresh=True,
    )


def fresh_only(
    graph: Graph, drafts: Mapping[str, CellDraft], cell_id: str, producer: str, why: Reason
) -> bool:
    """``producer`` cannot rebuild what ``cell_id`` needs (``why``, from ``unrestorable``): both
    are blocked until a fresh run, the cell with the name it would read wrong."""
    name = why.symbols[0]
    changed = drafts[producer].add(why)
    return changed | drafts[cell_id].add(
        Reason(
            "state_changed",
            f"it would work on {name} as changed in place before, which only a fresh run "
            f"gives back as {cell_label(graph, producer)} made it",
            cells=(producer,),
            symbols=(name,),
        )
    )


def kernel_clobber(state: TrackerState, graph: Graph, name: str, final: str) -> Reason | None:
    """Why the kernel does not hold the value of ``name`` that ``final`` last gave it (None:
    it does, or ``final`` has not run in this kernel)."""
    run = state.runs.get(final)
    if run is None or run.epoch != state.epoch:
        return None
    latest = state.writers.get(name)
    if latest is not None and latest.origin == "cell" and latest.cell_id == final:
        return None  # it is the kernel's last writer (its run is its latest one)
    if (
        latest is not None
        and latest.cell_id is not None
        and imported_as(state, graph, name, latest, final)
    ):
        # the same import: the kernel holds what ``final`` gives, unless the module was
        # loaded anew since ``final`` ran (its readers then hold the old one)
        return (
            reload_reason(graph, name, latest.cell_id)
            if reloaded_since(state, name, final)
            else None
        )
    if latest is None:
        return Reason("restores", f"{name} is no longer defined in the kernel", symbols=(name,))
    if latest.origin != "cell":
        by = writer_label(latest.origin)
        return Reason("restores", f"{name} was overwritten by {by}", symbols=(name,))
    latest_id = latest.cell_id
    other = state.runs.get(latest_id or "")
    module_owned = unrestorable(state, graph, name, final)
    if module_owned is not None:
        return module_owned
    if (
        other is not None
        and latest_id is not None
        and latest_id in graph.by_id
        and (other.index > run.index)
        != (graph.by_id[latest_id].cell.index > graph.by_id[final].cell.index)
    ):
        return Reason(
            "moved",
            f"cells moved: {cell_label(graph, final)} now defines {name} last, "
            f"after {cell_label(graph, latest_id)}",
            cells=(latest_id,),
            symbols=(name,),
        )
    return Reason(
        "restores",
        f"{name} was overwritten by running {cell_label(graph, latest.cell_id)}",
        cells=(latest.cell_id,) if latest.cell_id else (),
        symbols=(name,),
    )


def keeps_values(state: TrackerState, graph: Graph, drafts: Mapping[str, CellDraft]) -> set[str]:
    """Cells planned only for an edit that changed what they show, not what they compute
    (``hashing.effect_hash`` unchanged, inputs unchanged): their values come out the same."""
    out: set[str] = set()
    for gc in graph.cells:
        run = state.runs.get(gc.cell_id)
        if (
            drafts[gc.cell_id].kinds() == {"source_changed"}
            and run is not None
            and run.outcome == "ok"
            and run.epoch == state.epoch
            and run.effect_hash is not None
            and run.effect_hash == effect_hash(gc.cell.source)
        ):
            out.add(gc.cell_id)
    return out


def certain_cells(graph: Graph, drafts: Mapping[str, CellDraft], keeps: set[str]) -> set[str]:
    """The planned cells that will run whatever the cells above them do: one of their reasons
    holds by itself, or follows from a cell that will run (for ``upstream``: one whose values
    may change). The others are conditional."""
    certain: set[str] = set()
    changed = True
    while changed:
        changed = False
        for gc in graph.cells:
            draft = drafts[gc.cell_id]
            if gc.cell_id in certain or not draft.reasons:
                continue
            for reason in draft.reasons:
                cause = draft.causes.get(reason)
                if cause is None or (cause[0] in certain and not (cause[1] and cause[0] in keeps)):
                    certain.add(gc.cell_id)
                    changed = True
                    break
    return certain


def condition(graph: Graph, draft: CellDraft, keeps: set[str]) -> str:
    """What must happen for a conditional cell to run, as the plan says it."""
    names = sorted(
        {
            name
            for reason in draft.reasons
            if (cause := draft.causes.get(reason)) is not None and cause[1] and cause[0] in keeps
            for name in reason.symbols
        }
    )
    if names:
        verb = "changes" if len(names) == 1 else "change"
        return f"re-runs only if {', '.join(names)} {verb}"
    via = sorted(
        {cause[0] for cause in draft.causes.values()}, key=lambda c: graph.position.get(c, -1)
    )
    cells = ", ".join(cell_label(graph, c) for c in via)
    return f"re-runs only if {cells} {'re-runs' if len(via) == 1 else 're-run'}"


def needs_fresh(draft: CellDraft) -> bool:
    return any(r.needs_fresh for r in draft.reasons)


def assemble(graph: Graph, drafts: Mapping[str, CellDraft], keeps: set[str]) -> Plan:
    """The plan: planned cells in notebook order (runnable, conditional and blocked ones) and
    fresh ones."""
    blocked_ids: set[str] = set()
    for gc in graph.cells:  # notebook order: a producer is decided before its readers
        if drafts[gc.cell_id].blocked():
            blocked_ids.add(gc.cell_id)
            continue
        if any(
            r.cells
            and r.cells[0] in blocked_ids
            and (
                r.kind == "upstream"
                # it read a value only a fresh run makes right: so is its own
                or (r.kind == "state_changed" and needs_fresh(drafts[r.cells[0]]))
            )
            for r in drafts[gc.cell_id].reasons
        ):
            blocked_ids.add(gc.cell_id)
    certain = certain_cells(graph, drafts, keeps)
    order = {k: i for i, k in enumerate(REASON_ORDER)}
    stale: list[PlanEntry] = []
    conditional: list[PlanEntry] = []
    blocked: list[PlanEntry] = []
    fresh: list[FreshCell] = []
    for gc in graph.cells:
        draft = drafts[gc.cell_id]
        if not draft.reasons:
            fresh.append(FreshCell(gc.cell_id, gc.cell.index))
            continue
        reasons = tuple(sorted(draft.reasons, key=lambda r: order[r.kind]))
        entry = PlanEntry(
            cell_id=gc.cell_id,
            index=gc.cell.index,
            reasons=reasons,
            produces=tuple(sorted(gc.writes)),
        )
        if gc.cell_id in blocked_ids:
            blocked.append(entry)
        elif gc.cell_id in certain:
            stale.append(entry)
        else:
            conditional.append(replace(entry, condition=condition(graph, draft, keeps)))
    return Plan(
        stale=tuple(stale),
        fresh=tuple(fresh),
        blocked=tuple(blocked),
        conditional=tuple(conditional),
    )
