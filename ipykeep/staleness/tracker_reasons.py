"""Each cell's own reasons to re-run (never run, edited, failed, file changed, kernel restarted,
reads a value not from its producer), and the cells a fresh run cannot run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ipykeep.staleness.graph import Graph, GraphCell
from ipykeep.staleness.hashing import source_hash
from ipykeep.staleness.models import DynamicCellInfo, FileStamp, NotebookCell, Observed, Reason
from ipykeep.staleness.process_state import symbol_label
from ipykeep.staleness.tracker_imports import imported_as
from ipykeep.staleness.tracker_state import (
    CellDraft,
    RunRecord,
    StatFn,
    TrackerState,
    cell_label,
    mentions,
    mutated_below,
    same_stamp,
    unseeded,
    writer_label,
)


def watch_dependents(state: TrackerState, graph: Graph) -> dict[str, tuple[str, ...]]:
    """cell id -> watched paths it depends on."""
    deps: dict[str, list[str]] = {gc.cell_id: [] for gc in graph.cells}
    for path in state.watched:
        named = [gc.cell_id for gc in graph.cells if mentions(gc.cell.source, path)]
        for cid in named or [gc.cell_id for gc in graph.cells]:
            deps[cid].append(path)
    return {k: tuple(v) for k, v in deps.items()}


def runtime_evidence(
    state: TrackerState, cells: Sequence[NotebookCell]
) -> tuple[dict[str, Observed], dict[str, Observed], set[str]]:
    """Runtime evidence per cell: the full observation of runs whose source is unchanged,
    and, for edited cells, the in-place changes their last run made (still likely); and the
    cells whose observed run (of the source they hold now) raised: it is all they wrote."""
    full: dict[str, Observed] = {}
    carried: dict[str, Observed] = {}
    raised: set[str] = set()
    for cell in cells:
        run = state.runs.get(cell.cell_id)
        if run is None or run.observed is None:
            continue
        same = run.epoch == state.epoch and run.source_hash == source_hash(cell.source)
        if run.outcome != "ok":
            if same:
                full[cell.cell_id] = run.observed
                raised.add(cell.cell_id)
            continue
        if same:
            full[cell.cell_id] = run.observed
        elif run.observed.mutated or run.observed.bound:
            carried[cell.cell_id] = run.observed
    return full, carried, raised


def still_valid_dynamic(
    state: TrackerState, cells: Sequence[NotebookCell]
) -> dict[str, DynamicCellInfo]:
    """Per cell: what the runtime tracer saw its last run do, while its source is unchanged."""
    out: dict[str, DynamicCellInfo] = {}
    for cell in cells:
        run = state.runs.get(cell.cell_id)
        if (
            run is not None
            and run.dynamic is not None
            and run.epoch == state.epoch
            and run.source_hash == source_hash(cell.source)
        ):
            out[cell.cell_id] = run.dynamic
    return out


def block(graph: Graph, drafts: Mapping[str, CellDraft]) -> None:
    """Blocking is transitive: a cell reading a name from a cell that a fresh run cannot
    run (it reads a name no cell above defines, or it fails the way its last run did) would
    fail too, whatever the kernel holds."""
    blocked: set[str] = set()
    for gc in graph.cells:  # notebook order: producers are decided before their readers
        draft = drafts[gc.cell_id]
        if draft.blocked():
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
                    f"uses {', '.join(names)} from {cell_label(graph, producer)}, "
                    "which a fresh run cannot run (it is blocked)",
                    cells=(producer,),
                    symbols=tuple(names),
                )
            )
        if by_producer:
            blocked.add(gc.cell_id)


def direct_reasons(
    state: TrackerState,
    gc: GraphCell,
    graph: Graph,
    draft: CellDraft,
    stat: StatFn,
    watch_deps: Mapping[str, tuple[str, ...]],
) -> None:
    """Add the reasons ``gc`` must re-run that do not depend on other cells being planned."""
    cid = gc.cell_id
    run = state.runs.get(cid)
    for name in sorted(gc.reads):
        missing_producer(state, gc, graph, draft, name)
    if run is None:
        draft.add(Reason("never_run", "never run in this kernel"))
        return
    if run.epoch != state.epoch:
        draft.add(Reason("kernel_restarted", "its results were lost when the kernel restarted"))
        return
    if run.source_hash != source_hash(gc.cell.source):
        draft.add(Reason("source_changed", "source edited since it last ran"))
    if run.outcome != "ok" and not (run.outcome == "failed" and gc.cell.expects_failure):
        verb = "raised an error" if run.outcome == "failed" else "was interrupted"
        said = f" ({run.error})" if run.error else ""
        draft.add(Reason("failed", f"its last run {verb}{said}"))
    file_reasons(state, run, draft, stat, watch_deps.get(cid, ()))
    for name in sorted(gc.reads):
        read_reason(state, gc, graph, run, draft, name)
    if draft.kinds() == {"failed"} and run.outcome == "failed" and not run_dropped(state, run):
        # same source, same inputs, same environment: it would raise again. Reported, not run
        # (nor are its producers restored for it) until one of them changes
        draft.reasons[:] = [replace(r, message=r.message + AGAIN) for r in draft.reasons]
        draft.failing = True
    if not draft.reasons:
        held_reason(state, gc, graph, run, draft)


def held_reason(
    state: TrackerState, gc: GraphCell, graph: Graph, run: RunRecord, draft: CellDraft
) -> None:
    """The cell's values hold a reference to an object it read, and the cell that made it has
    bound the name anew since (it re-ran to restore it: an equal value, a new object)."""
    if run.observed is None:
        return
    for name in sorted(gc.reads & run.reads.keys()):
        seen = run.reads[name]
        latest = state.writers.get(name)
        if (
            seen is None
            or latest is None
            or latest.seq <= seen.seq
            or latest.cell_id != seen.cell_id  # a later definer: a fresh run holds the old one
            or latest.origin != "cell"
        ):
            continue
        holders = run.observed.holds(name)
        if (
            holders
            and latest.cell_id is not None
            and latest.cell_id in graph.by_id
            and mutated_below(graph, name, gc.cell_id)
        ):
            if name not in graph.by_id[latest.cell_id].analysis.defs:
                continue  # changed in place: the holder sees it (the version says if it matters)
            draft.add(
                Reason(
                    "restores",
                    f"{', '.join(holders)} holds the {name} object that "
                    f"{cell_label(graph, latest.cell_id)} has made anew since",
                    cells=(latest.cell_id,),
                    symbols=(name,),
                )
            )
            return


#: what a failing cell's reason adds while it is reported, not run
AGAIN = ", and would again: same source, inputs and packages; it runs once one of them changes"


def run_dropped(state: TrackerState, run: RunRecord) -> bool:
    """Whether the kernel's environment changed since ``run`` (packages installed)."""
    return run.environment != state.environment


def file_reasons(
    state: TrackerState,
    run: RunRecord,
    draft: CellDraft,
    stat: StatFn,
    watched: tuple[str, ...],
) -> None:
    """Add a ``file_changed`` reason per file the run depended on that differs now."""
    baseline: dict[str, FileStamp] = dict(run.files)
    for path in watched:
        if path not in baseline:
            baseline[path] = state.watched[path]
    for path in sorted(baseline):
        before = baseline[path]
        now = stat(path)
        if same_stamp(before, now):
            continue
        if now is None or not now.exists:
            what = "was deleted"
        elif not before.exists:
            what = "appeared"
        else:
            what = "changed"
        draft.add(Reason("file_changed", f"file {path} {what} since it last ran", path=path))


def missing_producer(
    state: TrackerState, gc: GraphCell, graph: Graph, draft: CellDraft, name: str
) -> None:
    """Block ``gc`` when it reads ``name`` and no cell above it defines it (a fresh run fails)."""
    if gc.producers.get(name) is not None or not name.isidentifier():
        return  # pseudo-names (``<numpy.random>``) stand for state that always exists
    below = graph.writers_below(name, gc.cell_id)
    below = tuple(w for w in below if w != gc.cell_id)
    if below:
        where = ", ".join(cell_label(graph, w) for w in below)
        draft.add(
            Reason(
                "missing_producer",
                f"uses {name}, which only {where} below it defines",
                cells=below,
                symbols=(name,),
            )
        )
        return
    write = state.writers.get(name)
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
        origin = cell_label(graph, write.cell_id)
        message = f"uses {name}, which no cell defines any more (it came from {origin})"
        cells = (write.cell_id,) if write.cell_id else ()
    draft.add(Reason("missing_producer", message, cells=cells, symbols=(name,)))


def read_reason(
    state: TrackerState,
    gc: GraphCell,
    graph: Graph,
    run: RunRecord,
    draft: CellDraft,
    name: str,
) -> None:
    """Add why the value of ``name`` that ``gc``'s last run read is not its producer's."""
    producer = gc.producers.get(name)
    if producer is None or name not in run.reads:
        return  # no producer (reported above), or a new read: its edit already counts
    if unseeded(graph, name, gc.cell_id):
        return  # an unseeded generator: any state it drew from is as fresh as a fresh run's
    seen = run.reads[name]
    label = cell_label(graph, producer)
    said = symbol_label(name)  # hidden state in words (``numpy print options``)
    latest = state.writers.get(name)
    p_run = state.runs.get(producer)
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
            Reason("state_changed", f"{said} was changed by {by} after it ran", symbols=(name,))
        )
        return
    if p_run is None or p_run.epoch != state.epoch or p_run.outcome != "ok":
        return  # the producer is in the plan itself: ``upstream`` covers it
    if seen is None:
        if p_run.seq > run.seq:
            draft.add(
                Reason(
                    "state_changed",
                    f"{said} was defined by {label} only after it ran",
                    cells=(producer,),
                    symbols=(name,),
                )
            )
        return
    if seen.origin != "cell":
        by = writer_label(seen.origin)
        draft.add(Reason("state_changed", f"it read {said} as set by {by}", symbols=(name,)))
        return
    if seen.cell_id == producer:
        if seen.version != p_run.version_of(name):
            draft.add(
                Reason(
                    "state_changed",
                    f"{said} was changed by re-running {label}",
                    cells=(producer,),
                    symbols=(name,),
                )
            )
        return
    if seen.cell_id == gc.cell_id:
        draft.add(
            Reason(
                "state_changed",
                f"it last ran on its own earlier result for {said}, not on {label}'s",
                cells=(producer,),
                symbols=(name,),
            )
        )
        return
    if imported_as(state, graph, name, seen, producer):
        return  # another cell's same import: the one module object either way
    old = cell_label(graph, seen.cell_id)
    seen_id = seen.cell_id
    seen_here = seen_id is not None and seen_id in graph.by_id
    moved = (
        run.index != gc.cell.index
        or (
            seen_id is not None
            and seen_here
            and (seen_run := state.runs.get(seen_id)) is not None
            and seen_run.index != graph.by_id[seen_id].cell.index
        )
        or p_run.index != graph.by_id[producer].cell.index
    )
    if moved and seen_id is not None and seen_here:
        draft.add(
            Reason(
                "moved",
                f"cells moved: it now reads {said} from {label}, not {old}",
                cells=(producer, seen_id),
                symbols=(name,),
            )
        )
    else:
        draft.add(
            Reason(
                "state_changed",
                f"it read {said} from {old}; {label} defines it now",
                cells=(producer,),
                symbols=(name,),
            )
        )
