"""Restore into a new kernel: load the values of the cells still fresh, plan the rest; and
load into a live kernel the values a cell started from (for the debugger's replay).

See ``planning`` for the idea (replay the checkpointed runs into a staleness tracker, load each
name's last value). This module does the talking: it reads the manifests, asks the kernel to
load (authenticating every blob first), drops what failed, and tells the tracker and the engine
which cells now count as run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from ipykeep.api.checkpoints import RestoreReport
from ipykeep.api.errors import IpykeepError
from ipykeep.checkpoints import planning
from ipykeep.checkpoints.state import SMALL_VALUE, KernelCheckpoints, call, call_loader
from ipykeep.checkpoints.store import CheckpointStore
from ipykeep.engine.session import CellRun, KernelSession
from ipykeep.project.notebook import NotebookSnapshot
from ipykeep.staleness import StalenessTracker, probes
from ipykeep.staleness.service import notebook_cells, stat_for
from ipykeep.staleness.state import staleness_of

#: runs notebook cells in the kernel (the engine's batch); True when every one succeeded
RunCells = Callable[[list[str]], Awaitable[bool]]


def _drop_late_out_of_order(
    cps: list[planning.CellCheckpoint],
    late: frozenset[str],
    stale: set[str],
    dropped: set[str],
    why: dict[str, str],
) -> None:
    """Add to ``dropped`` the late cells whose re-run would not repeat their run, until what is
    left is consistent (dropping a cell drops its names' other writers, which late cells may
    have read)."""
    while True:
        kept = planning.drop_with_cowriters(cps, dropped)
        out = planning.late_cells_out_of_order(kept, late, stale) - dropped
        if not out:
            return
        dropped |= out
        for cid in out:
            why.setdefault(
                cid, "re-run after the loaded values, it would not see what its run read"
            )


async def _rerun(
    state: KernelCheckpoints, cheap: list[planning.CellCheckpoint], run: RunCells
) -> bool:
    """Re-run cheap cells, keeping their place in the run order (their manifests keep their
    ``seq``)."""
    state.keep_seq = {cp.cell_id: cp.seq for cp in cheap}
    try:
        return await run([cp.cell_id for cp in cheap])
    finally:
        state.keep_seq = {}


async def restore_lost(
    store: CheckpointStore,
    state: KernelCheckpoints,
    session: KernelSession,
    snap: NotebookSnapshot,
    run: RunCells,
) -> RestoreReport | None:
    """Re-run the cheap cells, load the values of the checkpointed cells still fresh; the
    staleness tracker learns they ran.

    Returns None when there is nothing to restore. The report lists restored cells, the
    cells that must re-run (with the plan's reasons) and those that could not be restored.
    """
    assert session.notebook is not None
    started = time.monotonic()
    manifests, bad = await asyncio.to_thread(store.cell_manifests, session.notebook)
    cells = notebook_cells(snap)
    # A run recorded in the other dataflow mode carries that mode's evidence (ipyflow's
    # edges, or none): replayed here it leaves plans that never settle, so switching the mode
    # is a clean start (warm-up runs every cell); manifests without a mode predate the field.
    mode = session.process.dataflow
    other_mode = [
        m for m in manifests if m.get("kind") == "cell" and m.get("dataflow", mode) != mode
    ]
    if other_mode:
        session.notices.append(
            f"checkpoints of {len(other_mode)} cell(s) were taken in dataflow="
            f"{other_mode[0]['dataflow']} mode, not restored: this kernel runs "
            f"dataflow={mode}, so warm-up runs every cell"
        )
        return None
    all_cps = [
        planning.CellCheckpoint.from_manifest(m) for m in manifests if m.get("kind") == "cell"
    ]
    cps = planning.candidates(all_cps, cells)
    not_restorable: dict[str, str] = {
        cp.cell_id: "; ".join(f"{n}: {why}" for n, why in sorted(cp.failed.items()))
        or "no namespace evidence"
        for cp in all_cps
        if not cp.restorable
    }
    if not cps:
        index = {c.cell_id: c.index for c in cells}
        for cid, why in not_restorable.items():  # said, not left to look never run
            if cid in index:
                session.notices.append(f"cell {index[cid]} ({cid}) not restored: {why}")
        return None
    stat = stat_for(session)
    scout = StalenessTracker()
    planning.replay(scout, cps)
    first = scout.plan(cells, stat)
    stale = set(first.cell_ids) | {e.cell_id for e in first.blocked}
    late = planning.rerun_after_loads(cps)
    finals = planning.final_values(cps, late)
    poisoned = store.poisoned()
    dropped: set[str] = set()
    for name, (cid, blob) in finals.items():
        if blob in poisoned:
            dropped.add(cid)
            not_restorable[cid] = f"{name}: its checkpoint is poisoned ({poisoned[blob]})"
    _drop_late_out_of_order(cps, late, stale, dropped, not_restorable)
    restored_cps = [cp for cp in cps if not (cp.cheap and cp.cell_id not in stale)]
    source = {cp.cell_id: cp for cp in restored_cps}
    # Values of cells that will re-run are loaded too when small: a re-run that rebinds a
    # name to the same object (``import time``) then leaves that name's readers fresh, as
    # in a kernel that was never lost. Large ones are skipped: their readers re-run anyway.
    load = [
        [n, blob]
        for n, (cid, blob) in finals.items()
        if cid not in dropped and (cid not in stale or source[cid].sizes.get(n, 0) <= SMALL_VALUE)
    ]
    # names of one object load once and are bound to it (values are saved per name)
    same = planning.aliases(
        {n: source[finals[n][0]].shared.get(n, ()) for n, _ in load},
        {n: source[finals[n][0]].seq for n, _ in load},
    )
    load = [item for item in load if item[0] not in same]
    # Cheap cells that read only cheap cells first: a checkpointed cell that later mutated
    # one of their values then has the last word when its values are loaded.
    cheap = [cp for cp in cps if cp.cheap and cp.cell_id not in stale and cp.cell_id not in late]
    if load and cheap:
        # the blobs authenticate on the kernel's threads while the cheap cells (imports,
        # mostly) run: hashing is the part of a large restore that needs no import
        with contextlib.suppress(IpykeepError):
            await session.process.eval_silent(call_loader("prefetch", sorted({b for _, b in load})))
    if cheap and not await _rerun(state, cheap, run):
        with contextlib.suppress(IpykeepError):
            await session.process.eval_silent(call_loader("discard"))
        return None  # a cheap cell failed to re-run: warm-up runs every cell instead
    in_run_order = cps
    cps = restored_cps
    deadline = session.config.restore_timeout
    results: dict[str, str] = {}
    if load:
        reply = await session.process.eval_silent(
            call_loader("restore", load, deadline, [], same), timeout=deadline + 60
        )
        results = {str(k): str(v) for k, v in reply["results"].items()}
    errors: list[str] = list(bad)
    for name, outcome in results.items():
        if outcome == "ok":
            continue
        cid, blob = finals[name]
        dropped.add(cid)
        not_restorable[cid] = f"{name}: {outcome}"
        if outcome.startswith(("tampered:", "load_failed:")):
            if outcome.startswith("tampered:"):
                store.quarantine(blob)
            else:
                store.mark_poisoned(blob, outcome)
            errors.append(f"checkpoint of {name} (cell {cid}) refused: {outcome}")
    _drop_late_out_of_order(in_run_order, late, stale, dropped, not_restorable)
    kept_all = planning.drop_with_cowriters(in_run_order, dropped)
    late_cps = [cp for cp in kept_all if cp.cell_id in late and cp.cell_id not in stale]
    survivors = planning.drop_with_cowriters(cps, dropped)
    kept = {cp.cell_id for cp in survivors}
    for cp in cps:
        if cp.cell_id not in kept and cp.cell_id not in not_restorable:
            not_restorable[cp.cell_id] = "wrote a name whose checkpoint could not be restored"
    orphans = [n for n, (cid, _) in finals.items() if cid not in kept and results.get(n) == "ok"]
    if orphans:
        await session.process.eval_silent(call_loader("restore", [], 1, orphans))
    if load:
        # the namespace monitor's baseline takes the loaded values in: a re-run rebinding one
        # to the same object is then no change (its readers stay fresh)
        with contextlib.suppress(IpykeepError):
            await session.process.eval_silent(probes.statemon_collect_expr())
    # The tracker learns every run in the order it happened, the re-run cheap cells' too (their
    # live re-runs came before the loads, or after them): a loaded cell's write of a name that a
    # re-run cell rebinds later is then not taken for the last one, and a loaded cell that read
    # a late cell's value not for one that ran before it. Before the late cells re-run as well:
    # their new manifests record whose values they read.
    tracker = staleness_of(session).tracker
    planning.replay(tracker, sorted([*survivors, *cheap], key=lambda cp: cp.seq))
    if late_cps:
        if not await _rerun(state, late_cps, run):
            return None  # a cheap cell failed to re-run: warm-up runs every cell instead
        planning.replay(tracker, sorted([*survivors, *cheap, *late_cps], key=lambda cp: cp.seq))
    index = {c.cell_id: c.index for c in cells}
    for cp in survivors:
        session.cell_runs[cp.cell_id] = CellRun(
            "restored", cp.source, "ok", None, index.get(cp.cell_id, cp.index)
        )
    plan = tracker.plan(cells, stat)
    rerun_ids = set(plan.cell_ids)
    restored = [cp for cp in survivors if cp.cell_id not in rerun_ids]
    elapsed = time.monotonic() - started
    report = RestoreReport(
        kernel_id=session.kernel_id,
        recomputed=[
            {
                "cell_id": cp.cell_id,
                "index": index.get(cp.cell_id, cp.index),
                "run_s": round(cp.duration, 3),
            }
            for cp in sorted([*cheap, *late_cps], key=lambda cp: cp.seq)
        ],
        restored=[
            {
                "cell_id": cp.cell_id,
                "index": index[cp.cell_id],
                "run_s": round(cp.duration, 3),
                "bytes": cp.bytes,
            }
            for cp in sorted(restored, key=lambda cp: index[cp.cell_id])
        ],
        rerun=[e.to_json() for e in plan.stale],
        blocked=[e.to_json() for e in plan.blocked],
        not_restorable=not_restorable,
        restore_s=round(elapsed, 3),
        saved_s=round(sum(cp.duration for cp in restored) - elapsed, 3),
        errors=errors,
    )
    state.last_restore = report
    if session.state == "warming":
        # results of the warm-up batch would take the notice; it is shown when warm-up ends
        state.pending_notice = report.summary()
    else:
        session.notices.append(report.summary())
    return report


async def load_before(
    store: CheckpointStore,
    session: KernelSession,
    snap: NotebookSnapshot,
    cell_id: str,
    names: list[str],
) -> tuple[list[str], dict[str, str]]:
    """Load ``names`` into the live kernel as the cells above ``cell_id`` left them.

    Each name gets the value its last writer above the cell saved (in run order), so the cell
    can run again from the state it started from. Returns the names loaded and, for each name
    not loaded, why (no checkpoint above holds it, or the loader's reason).
    """
    assert session.notebook is not None
    with contextlib.suppress(IpykeepError):  # the last cells' snapshots may still be writing
        await session.process.eval_silent(call("flush", 60), timeout=70)
    manifests, _bad = await asyncio.to_thread(store.cell_manifests, session.notebook)
    position = {c.cell_id: c.index for c in snap.cells}
    limit = position[cell_id]
    above = sorted(
        (
            cp
            for cp in (planning.CellCheckpoint.from_manifest(m) for m in manifests)
            if position.get(cp.cell_id, limit) < limit
        ),
        key=lambda cp: cp.seq,
    )
    # a cell's saved values load even when another of its values did not pickle
    finals = planning.final_values(above)
    poisoned = store.poisoned()
    why: dict[str, str] = {}
    load: list[list[str]] = []
    for name in names:
        if name not in finals:
            why[name] = "no checkpoint of a cell above holds its value"
        elif finals[name][1] in poisoned:
            why[name] = f"its checkpoint is poisoned ({poisoned[finals[name][1]]})"
        else:
            load.append([name, finals[name][1]])
    if not load:
        return [], why
    deadline = session.config.restore_timeout
    reply = await session.process.eval_silent(
        call_loader("restore", load, deadline, [], {}), timeout=deadline + 60
    )
    results = {str(k): str(v) for k, v in reply["results"].items()}
    why.update({n: outcome for n, outcome in results.items() if outcome != "ok"})
    loaded = [n for n, outcome in results.items() if outcome == "ok"]
    if loaded:
        # as after a restore: the namespace monitor's baseline takes the loaded values in (the
        # cell replayed next did not bind them), and the tracker learns whose values they are,
        # so their producers are not planned to restore what is already back
        with contextlib.suppress(IpykeepError):
            await session.process.eval_silent(probes.statemon_collect_expr())
        tracker = staleness_of(session).tracker
        source = {cp.cell_id: cp.source for cp in above}
        for name in loaded:
            writer = finals[name][0]
            tracker.value_restored(name, writer, source[writer])
    return loaded, why
