"""Which checkpointed values to restore into a new kernel, and what must re-run (pure logic).

The idea: a checkpoint of each cell's latest run holds what the run bound or mutated, plus the
staleness evidence of that run (source, files read with their stamps, observed namespace
changes). Replaying those runs, in the order they happened, into a staleness tracker rebuilds
what the tracker knew when the kernel was lost; loading, for each name, the value its *last*
writer left makes the new kernel hold what the lost one held. The tracker's ordinary plan then
says what must re-run (source edits, changed files, upstream…) with its usual reasons, so
"fresh" here means exactly what it means for a live kernel.

A cheap cell (see ``cost``) has a manifest without values: it is replayed like the others, but
re-runs. One that read only other cheap cells re-runs before any value is loaded, so a
checkpointed cell's later change of its value wins; one that read a saved value (directly or
through such cells) re-runs after the values are loaded, in run order, and only where that
order gives it exactly what its run read and nothing loaded or re-run earlier must win over
what it writes (``late_cells_out_of_order``); otherwise it is not restored and re-runs by plan.

A cell that cannot be restored (a value that did not pickle, was over a limit, failed to load)
is not replayed, so it is ``never_run`` and re-runs; every cell that wrote one of its names is
dropped with it (its value would be half of a history), transitively.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipykeep.staleness import FileStamp, NotebookCell, StalenessTracker
from ipykeep.staleness.models import DynamicCellInfo, Observed, captured_names


@dataclass(frozen=True)
class CellCheckpoint:
    cell_id: str
    seq: int
    index: int
    source: str
    duration: float
    files: tuple[FileStamp, ...]
    written: tuple[str, ...]
    observed: Observed | None
    #: names the run wrote (bound, mutated, or guessed statically where evidence is partial)
    writes: frozenset[str]
    deleted: frozenset[str]
    #: name -> blob id of the value after the run
    values: Mapping[str, str] = field(default_factory=dict)
    sizes: Mapping[str, int] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    restorable: bool = True
    #: not checkpointed on purpose (see ``cost``): no values; restore re-runs it
    cheap: bool = False
    #: name the run read -> the cell whose write it saw (none recorded: read only cheap cells)
    inputs: Mapping[str, str] = field(default_factory=dict)
    #: saved name -> the other names bound to the same object when it was saved
    shared: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: what the runtime tracer (ipyflow) saw the run read and write: replayed with the run, so
    #: the rebuilt tracker relates cells as the lost kernel's did
    dynamic: DynamicCellInfo | None = None

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> CellCheckpoint:
        obs = data.get("observed")
        observed = None
        if isinstance(obs, dict):
            observed = Observed(
                bound=frozenset(obs.get("bound", ())),
                mutated=frozenset(obs.get("mutated", ())),
                deleted=frozenset(obs.get("deleted", ())),
                opaque=frozenset(obs.get("opaque", ())),
                states={str(k): str(v) for k, v in (obs.get("states") or {}).items()},
                read=frozenset(map(str, obs.get("read", ()))),
                uncompared=frozenset(obs.get("uncompared", ())),
                captured=captured_names(obs.get("captured", {})),
            )
        values = data.get("values") or {}
        return cls(
            cell_id=str(data["cell_id"]),
            seq=int(data["seq"]),
            index=int(data.get("index", 0)),
            source=str(data["source"]),
            duration=float(data.get("duration") or 0.0),
            files=tuple(
                FileStamp(str(f["path"]), f.get("mtime_ns"), f.get("size"))
                for f in data.get("files", ())
            ),
            written=tuple(map(str, data.get("written", ()))),
            observed=observed,
            writes=frozenset(map(str, data.get("writes", ()))),
            deleted=frozenset(observed.deleted) if observed else frozenset(),
            values={n: str(v["blob"]) for n, v in values.items()},
            sizes={n: int(v.get("size", 0)) for n, v in values.items()},
            failed={str(k): str(v) for k, v in (data.get("failed") or {}).items()},
            restorable=bool(data.get("restorable")) and observed is not None,
            cheap=bool(data.get("cheap")),
            inputs={str(k): str(v) for k, v in (data.get("inputs") or {}).items()},
            shared={
                n: frozenset(map(str, v["shared"])) for n, v in values.items() if v.get("shared")
            },
            dynamic=dynamic_from_json(str(data["cell_id"]), data.get("dynamic")),
        )

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())


def observed_json(observed: Observed) -> dict[str, Any]:
    return {
        "bound": sorted(observed.bound),
        "mutated": sorted(observed.mutated),
        "deleted": sorted(observed.deleted),
        "opaque": sorted(observed.opaque),
        "states": dict(observed.states),
        "read": sorted(observed.read),
        "uncompared": sorted(observed.uncompared),
        "captured": (
            None
            if observed.captured is None
            else {k: sorted(v) for k, v in observed.captured.items()}
        ),
    }


def dynamic_json(dynamic: DynamicCellInfo) -> dict[str, Any]:
    return {
        "defined": sorted(dynamic.defined),
        "used": sorted(dynamic.used),
        "mutated": sorted(dynamic.mutated),
        "parents": {k: sorted(v) for k, v in dynamic.parents.items()},
    }


def dynamic_from_json(cell_id: str, data: Any) -> DynamicCellInfo | None:
    if not isinstance(data, dict):
        return None
    return DynamicCellInfo(
        cell_id=cell_id,
        defined=frozenset(map(str, data.get("defined", ()))),
        used=frozenset(map(str, data.get("used", ()))),
        mutated=frozenset(map(str, data.get("mutated", ()))),
        parents={str(k): frozenset(map(str, v)) for k, v in (data.get("parents") or {}).items()},
    )


def candidates(
    checkpoints: Iterable[CellCheckpoint], cells: Sequence[NotebookCell]
) -> list[CellCheckpoint]:
    """Restorable checkpoints of code cells still in the notebook, in the order they ran."""
    code = {c.cell_id for c in cells if c.cell_type == "code"}
    return sorted(
        (cp for cp in checkpoints if cp.cell_id in code and cp.restorable), key=lambda cp: cp.seq
    )


def drop_with_cowriters(cps: Sequence[CellCheckpoint], dropped: set[str]) -> list[CellCheckpoint]:
    """``cps`` minus ``dropped`` cells and, transitively, every cell writing one of their names."""
    dropped = set(dropped)
    changed = True
    while changed:
        changed = False
        names = (
            set().union(*(cp.writes for cp in cps if cp.cell_id in dropped)) if dropped else set()
        )
        for cp in cps:
            if cp.cell_id not in dropped and cp.writes & names:
                dropped.add(cp.cell_id)
                changed = True
    return [cp for cp in cps if cp.cell_id not in dropped]


def rerun_after_loads(cps: Sequence[CellCheckpoint]) -> frozenset[str]:
    """Cheap cells whose run read a value no cheap cell re-makes before the loads: a saved one,
    directly or through other such cells (or one with no checkpoint at all, which
    ``late_cells_out_of_order`` then refuses)."""
    early = {cp.cell_id for cp in cps if cp.cheap}
    late: set[str] = set()
    for cp in cps:  # in run order: a writer ran before its readers
        if cp.cheap and any(
            w != cp.cell_id and (w not in early or w in late) for w in cp.inputs.values()
        ):
            late.add(cp.cell_id)
    return frozenset(late)


def late_cells_out_of_order(
    cps: Sequence[CellCheckpoint], late: frozenset[str], stale: set[str]
) -> set[str]:
    """Late cells (``rerun_after_loads``) whose re-run after the loads would not repeat their run.

    Restore re-runs early cheap cells, loads each name's last saved value, then re-runs the late
    cells in run order. A late cell repeats its run when every name it read holds, at that
    point, the write its run saw (the last early write of the name, or a late cell re-run
    before it), and no early cell wrote one of its names after it (a re-run would undo that).
    """
    last_early: dict[str, CellCheckpoint] = {}
    for cp in cps:
        if cp.cell_id not in late:
            for name in cp.writes | cp.deleted:
                last_early[name] = cp
    rerun: set[str] = set()
    out: set[str] = set()
    for cp in cps:
        if cp.cell_id not in late or cp.cell_id in stale:
            continue

        def sees(name: str, writer: str, cp: CellCheckpoint = cp) -> bool:
            if writer == cp.cell_id or writer in rerun:
                return True
            last = last_early.get(name)
            return (
                last is not None
                and last.cell_id == writer
                and writer not in stale
                and (last.cheap or name in last.values)
            )

        undone = any(last_early[n].seq > cp.seq for n in cp.writes | cp.deleted if n in last_early)
        if undone or not all(sees(n, w) for n, w in cp.inputs.items()):
            out.add(cp.cell_id)
        else:
            rerun.add(cp.cell_id)
    return out


def final_values(
    cps: Sequence[CellCheckpoint], late: frozenset[str] = frozenset()
) -> dict[str, tuple[str, str]]:
    """name -> (cell id, blob id): the value each name held after the last run that wrote it,
    leaving out the ``late`` cells (they re-run after the loads, in order)."""
    out: dict[str, tuple[str, str]] = {}
    for cp in cps:  # in run order: a later writer wins
        if cp.cell_id in late:
            continue
        for name in cp.deleted | (cp.writes if cp.cheap else frozenset()):
            out.pop(name, None)  # a cheap cell's value comes from its re-run
        for name, blob in cp.values.items():
            out[name] = (cp.cell_id, blob)
    return out


def aliases(shared: Mapping[str, Iterable[str]], seq: Mapping[str, int]) -> dict[str, str]:
    """name -> the name whose loaded object it must be bound to (one object under several names).

    ``seq``: for each name being loaded, the run order of the checkpoint its value comes from;
    ``shared``: for those names, the names that held the same object when it was saved. Two
    names hold one object at the end when the later of their two saves saw them share it: a
    name rebound after that save would have a later save of its own, and a mutation through
    either is saved for both (both names changed). Each group loads the value saved last (the
    object's latest content); the others are bound to it.
    """
    parent = {n: n for n in seq}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for name, others in shared.items():
        if name not in seq:
            continue
        for other in others:
            if other in seq and seq[other] <= seq[name]:
                a, b = root(name), root(other)
                if a != b:
                    parent[a] = b
    groups: dict[str, list[str]] = {}
    for n in seq:
        groups.setdefault(root(n), []).append(n)
    out: dict[str, str] = {}
    for members in groups.values():
        if len(members) > 1:
            keep = max(members, key=lambda n: (seq[n], n))
            out.update({n: keep for n in members if n != keep})
    return out


def replay(tracker: StalenessTracker, cps: Sequence[CellCheckpoint]) -> None:
    """Record the checkpointed runs in ``tracker`` as if the kernel had just run them.

    No ``stat``: the files are stamped as they were when the cell ran, so a file edited since
    shows as ``file_changed`` in the next plan.
    """
    for cp in cps:
        tracker.record_cell_run(
            cp.cell_id,
            cp.index,
            cp.source,
            "ok",
            files_read=cp.files,
            files_written=cp.written,
            dynamic=cp.dynamic,
            observed=cp.observed,
        )
