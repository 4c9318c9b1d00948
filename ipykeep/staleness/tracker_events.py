"""Recording what happened in the kernel (a cell ran, scratch code ran) into the tracker state."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Literal

from ipykeep.staleness.analysis import analyze_scratch, analyze_source
from ipykeep.staleness.analysis_model import CellAnalysis
from ipykeep.staleness.graph import cell_effects
from ipykeep.staleness.hashing import effect_hash, source_hash
from ipykeep.staleness.models import DynamicCellInfo, FileStamp, Observed, Outcome
from ipykeep.staleness.tracker_imports import reloaded_since
from ipykeep.staleness.tracker_state import (
    NameWrite,
    RunRecord,
    StatFn,
    TrackerState,
    canonical_path,
    mentions,
    same_stamp,
)


def record_cell_run(
    state: TrackerState,
    cell_id: str,
    index: int,
    source: str,
    outcome: Outcome,
    files_read: Iterable[FileStamp] = (),
    dynamic: DynamicCellInfo | None = None,
    stat: StatFn | None = None,
    files_written: Iterable[str] = (),
    observed: Observed | None = None,
    error: str | None = None,
) -> None:
    """A notebook cell finished on the main shell (see ``StalenessTracker.record_cell_run``)."""
    state.seq += 1
    analysis = analyze_source(source)
    # what the kernel saw this run change; ``observed`` may gain the previous run's outputs
    seen = observed
    previous = state.runs.get(cell_id)
    if (
        observed is not None
        and previous is not None
        and previous.observed is not None
        and previous.epoch == state.epoch
        and previous.source_hash == source_hash(source)
    ):
        # a name bound without a visible assignment (``exec``, ``globals()[…]``) and rebound
        # to an equal value shows no change this time: it is still this cell's output
        observed = replace(
            observed, bound=observed.bound | (previous.observed.bound - observed.deleted)
        )
    reads, writes = code_effects(state, source, dynamic, observed, failed=outcome != "ok")
    files: dict[str, FileStamp] = {}
    if stat is not None:
        for path in analysis.paths + watched_paths_for(state, source):
            stamp = stat(path)
            # keyed by the stamp's own path: ``stat`` names a file as the runtime hook does
            # (absolute), so a literal and the run-time read of one file count once
            if stamp is not None:
                files[stamp.path] = stamp
            else:
                files[path] = FileStamp.missing(path)
    for stamp in files_read:
        files[stamp.path] = stamp
    written = set(files_written)
    if stat is not None:
        written.update(canonical_path(stat, p) for p in analysis.written_paths)
    run = RunRecord(
        cell_id=cell_id,
        seq=state.seq,
        version=state.seq,
        index=index,
        epoch=state.epoch,
        source_hash=source_hash(source),
        outcome=outcome,
        files=files,
        reads={name: state.writers.get(name) for name in reads},
        dynamic=dynamic,
        written=frozenset(written),
        observed=observed,
        imports=dict(analysis.imports),
        effect_hash=effect_hash(source),
        error=error if outcome == "failed" else None,
        environment=state.environment,
    )
    if previous is not None and is_restore(state, previous, run, writes):
        # judged on ``seen``: a name the previous run bound (``import random`` on its first
        # run) and this one found as it was is no redraw, or its readers would all re-run
        versions = {
            n: run.version if redrawn(state, cell_id, n, seen) else previous.version_of(n)
            for n in writes
        }
        run = replace(run, version=previous.version, versions=versions)
    else:
        run = replace(run, versions=value_versions(state, cell_id, run, writes, analysis, seen))
    if observed is not None and observed.states:
        # equal generator states are the same value, whoever set them
        versions = dict(run.versions)
        for name, digest in observed.states.items():
            if name in writes:
                key = (name, digest)
                versions[name] = state.state_versions.setdefault(
                    key, -len(state.state_versions) - 1
                )
        run = replace(run, versions=versions)
    state.runs[cell_id] = run
    for name in writes:
        state.writers[name] = NameWrite("cell", cell_id, state.seq, run.version_of(name))
    note_functions(state, source)


def record_scratch(
    state: TrackerState,
    source: str,
    origin: Literal["scratch", "browser"] = "scratch",
    dynamic: DynamicCellInfo | None = None,
    observed: Observed | None = None,
) -> None:
    """Code outside the notebook ran in the same kernel (agent scratch code, a browser)."""
    state.seq += 1
    _, writes = code_effects(state, source, dynamic, observed, analyze=analyze_scratch)
    if observed is not None:
        # a scratch rebinding to an equal value (or a guessed mutation that did not
        # happen) leaves the notebook's values as they were
        analysis = analyze_scratch(source)
        writes = (writes - analysis.defs) | observed.changed | (writes & analysis.assigned_into)
    for name in writes:
        state.writers[name] = NameWrite(origin, None, state.seq, state.seq, observed is not None)
    note_functions(state, source, analyze_scratch)


def kernel_restarted(state: TrackerState) -> None:
    """The kernel lost all its state: every earlier run stops counting."""
    state.epoch += 1
    state.writers.clear()
    state.functions.clear()


def carried_into(state: TrackerState, epoch: int) -> None:
    """The runs of ``state``'s epoch count in ``epoch``: their values are in that kernel."""
    state.runs = {
        cid: replace(run, epoch=epoch) if run.epoch == state.epoch else run
        for cid, run in state.runs.items()
    }
    state.epoch = epoch


def code_effects(
    state: TrackerState,
    source: str,
    dynamic: DynamicCellInfo | None,
    observed: Observed | None = None,
    failed: bool = False,
    analyze: Callable[[str], CellAnalysis] = analyze_source,
) -> tuple[set[str], set[str]]:
    """Names a piece of code reads from outside, and names it rebinds or mutates (``failed``:
    it raised, so what the kernel saw change is all it wrote)."""
    analysis = analyze(source)
    lookup = dict(state.functions)
    lookup.update(analysis.functions)
    reads, writes, _ = cell_effects(analysis, lookup, dynamic, observed, failed=failed)
    return reads, writes


def value_versions(
    state: TrackerState,
    cell_id: str,
    run: RunRecord,
    writes: set[str],
    analysis: CellAnalysis,
    observed: Observed | None,
) -> dict[str, int]:
    """Per name written: a new version, unless the kernel saw this cell rebind the name to
    the value its previous run had left there (same object, or an equal value with exact
    fingerprints), e.g. a print-only edit or an unchanged ``import numpy as np``."""
    out: dict[str, int] = {}
    for name in writes:
        prev = state.writers.get(name)
        if (
            observed is not None
            and name not in observed.changed
            and name not in observed.opaque
            and name not in analysis.assigned_into
            and name not in analysis.mutates
            and prev is not None
            and prev.origin == "cell"
            and prev.cell_id == cell_id
        ):
            out[name] = prev.version
        else:
            out[name] = run.version
    return out


def is_restore(state: TrackerState, previous: RunRecord, run: RunRecord, writes: set[str]) -> bool:
    """Whether ``run`` repeats ``previous`` on the same inputs to rebuild a clobbered value.

    Such a run gives the values it gave before (cells are taken to be deterministic), so
    cells that read them stay fresh. A repeat that rebuilt nothing clobbered is a plain
    re-run: its readers are told (``state_changed``), as the values are new objects.
    """
    if (
        previous.epoch != run.epoch
        or previous.outcome != "ok"
        or run.outcome != "ok"
        or previous.source_hash != run.source_hash
        or set(previous.reads) != set(run.reads)
    ):
        return False
    for name, seen in run.reads.items():
        before = previous.reads[name]
        if (seen is None) != (before is None):
            return False
        if seen is not None and before is not None:
            if (seen.origin, seen.cell_id, seen.version) != (
                before.origin,
                before.cell_id,
                before.version,
            ):
                return False
    for path, stamp in run.files.items():
        if path in previous.files and not same_stamp(previous.files[path], stamp):
            return False
    if any(reloaded_since(state, name, run.cell_id) for name in run.imports):
        return False  # its import gives the module another cell loaded anew since
    return any(
        (w := state.writers.get(name)) is None or w.cell_id != run.cell_id for name in writes
    )


def redrawn(state: TrackerState, cell_id: str, name: str, observed: Observed | None) -> bool:
    """Whether a restoring run gave ``name`` a new value: the kernel still held this cell's
    own value of it (nothing clobbered it), yet the evidence shows it rebound or changed, so
    the cell is not reproducible there (``stamp = time.time()``, an unseeded draw) and the
    readers of ``name`` must re-run. A value the fingerprints cannot compare (``opaque``,
    ``uncompared``: a fitted model made anew on the same inputs) proves no change: the cell
    re-ran on the same inputs, so it is taken to give the value it gave before."""
    if (
        observed is None
        or name not in observed.changed
        or name in observed.opaque
        or name in observed.uncompared
    ):
        return False
    latest = state.writers.get(name)
    return latest is not None and latest.origin == "cell" and latest.cell_id == cell_id


def note_functions(
    state: TrackerState, source: str, analyze: Callable[[str], CellAnalysis] = analyze_source
) -> None:
    """Keep the functions ``source`` defines (and forget names it rebinds to non-functions)."""
    analysis = analyze(source)
    for name in analysis.defs:
        if name in analysis.functions:
            state.functions[name] = analysis.functions[name]
        else:
            state.functions.pop(name, None)


def watched_paths_for(state: TrackerState, source: str) -> tuple[str, ...]:
    """The watched files ``source`` names."""
    return tuple(p for p in state.watched if mentions(source, p))


def value_restored(state: TrackerState, name: str, cell_id: str, source: str) -> bool:
    """``name`` holds again the value ``cell_id``'s last run left (see
    ``StalenessTracker.value_restored``)."""
    run = state.runs.get(cell_id)
    if (
        run is None
        or run.epoch != state.epoch
        or run.outcome != "ok"
        or run.source_hash != source_hash(source)
        or name not in run.versions
    ):
        return False
    state.writers[name] = NameWrite("cell", cell_id, run.seq, run.version_of(name))
    return True
