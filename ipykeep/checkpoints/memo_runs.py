"""Memoized runs in a live kernel: each notebook cell's run keyed after it ran, a stored run
loaded in place of a planned re-run, and plans annotated with the cells that would load.

The logic of keys and matches is ``memo.py``; this module reads the kernel's staleness
tracker (who last wrote each name), keeps the versions of the values the cells left
(``KernelCheckpoints.versions``), and talks to the kernel's loader.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from typing import Any

from ipykeep.api.checkpoints import CellCheckpointInfo
from ipykeep.api.errors import IpykeepError
from ipykeep.checkpoints import memo, planning
from ipykeep.checkpoints.state import HIDDEN, KernelCheckpoints, call_loader
from ipykeep.checkpoints.store import CheckpointError, CheckpointStore
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import MEMOGUARD
from ipykeep.project.notebook import Cell, NotebookSnapshot
from ipykeep.staleness import probes
from ipykeep.staleness.analysis import analyze_source
from ipykeep.staleness.hashing import source_hash
from ipykeep.staleness.models import Observed
from ipykeep.staleness.service import notebook_cells, stat_for
from ipykeep.staleness.state import staleness_of
from ipykeep.staleness.tracker_state import StatFn

#: the probe expression's key in an execution's results
GUARD_KEY = "ipykeep_memo"


def guard_expression(cell: Cell) -> str:
    """Evaluated with each notebook cell: what it read that a key cannot cover."""
    return MEMOGUARD.call("collect", memo.imported_packages(cell.source))


def _guard(ex: Execution) -> dict[str, Any] | None:
    result = (ex.expression_results or {}).get(GUARD_KEY)
    if result is None:
        return None
    with contextlib.suppress(IpykeepError, ValueError, TypeError):
        reply = probes.decode_expression_value(result)
        if isinstance(reply, dict):
            return reply
    return None


def note_start(st: KernelCheckpoints, session: KernelSession) -> None:
    """Before a notebook cell runs: who wrote each name (the run's inputs are keyed on it)."""
    st.before = dict(staleness_of(session).tracker.state.writers)


def _version_now(st: KernelCheckpoints, session: KernelSession) -> Any:
    writers = staleness_of(session).tracker.state.writers

    def version(name: str) -> str | None:
        return memo.version_of(name, writers.get(name), st.versions)

    return version


def key_run(
    st: KernelCheckpoints,
    session: KernelSession,
    cell: Cell,
    ex: Execution,
    observed: Observed,
    writes: list[str],
) -> tuple[dict[str, Any] | None, str | None]:
    """After a cell ran ok: its memo fields (key, the versions it read and left, outputs), or
    why it has no key. The versions of the names it wrote are kept either way (none when it has
    no key, so its readers have none either)."""
    tracker = staleness_of(session).tracker
    before, st.before = st.before, None
    fields, why = _key_fields(st, tracker, cell, ex, observed, writes, before)
    writers = tracker.state.writers
    if fields is not None:
        for name, version in fields["out"].items():
            w = writers.get(name)
            if w is not None and w.cell_id == cell.cell_id:
                st.versions[(name, w.seq)] = version
    if len(st.versions) > 2 * len(writers) + 64:
        # versions are looked up by (name, seq) of the current write, so one of a replaced
        # write is only memory: dropped once they outnumber the names, not after every cell
        # (a pass over every name per cell made executing a plan quadratic)
        st.versions = {
            k: v
            for k, v in st.versions.items()
            if (w := writers.get(k[0])) is not None and w.seq == k[1]
        }
    return fields, why


def _key_fields(
    st: KernelCheckpoints,
    tracker: Any,
    cell: Cell,
    ex: Execution,
    observed: Observed,
    writes: list[str],
    before: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, str | None]:
    if before is None:
        return None, "no record of the state it started from"
    why = memo.uncovered_in_source(cell.source)
    if why:
        return None, why
    guard = _guard(ex)
    if guard is None:
        return None, "what it read outside the namespace is unknown"
    if guard.get("uncovered"):
        return None, f"it read {guard['uncovered'][0]}"
    files, written = tracker.run_files(cell.cell_id)
    if written:
        return None, "it wrote files (loading it would not write them)"
    settings = [n for n in writes if n.startswith("<") and n not in HIDDEN]
    settings += [n for n in observed.changed if n.startswith("<") and n not in HIDDEN]
    if settings:
        return None, f"it changed a process-wide setting ({settings[0]})"
    imports = tracker.run_imports(cell.cell_id)
    names = set(tracker.run_inputs(cell.cell_id)) | observed.mutated | observed.read
    if memo.seeds_only(cell.source, writes, imports):
        names -= memo.RANDOM_STATES
    inputs: dict[str, str] = {}
    for name in sorted(names):
        version = memo.version_of(name, before.get(name), st.versions)
        if version is None:
            return None, f"it read {name}, whose value has no version (see docs)"
        inputs[name] = version
    libs = {str(k): (str(v) if v is not None else None) for k, v in guard.get("libs", {}).items()}
    key = memo.run_key(cell.source, inputs, files, libs)
    out = {n: memo.out_version(key, n, observed.states.get(n)) for n in writes}
    outputs = [o for o in ex.nbformat_outputs() if o.get("output_type") != "error"]
    fields: dict[str, Any] = {
        "key": key,
        "source_hash": source_hash(cell.source),
        "reads": inputs,
        "out": out,
        "libs": libs,
        "outputs": outputs,
    }
    if (
        ex.dropped_bytes
        or len(json.dumps(outputs)) > memo.MAX_OUTPUTS_BYTES
        or breaks_aliases(observed, writes)
    ):
        fields["outputs"] = None  # keyed (its readers stay keyed), but not loadable
    return fields, None


def breaks_aliases(observed: Observed, writes: list[str]) -> bool:
    """Whether loading the run would break an alias a fresh run has: a value it left holds an
    object of a name it did not write (a model holding its data frame, a dict holding a list),
    or it changed a value in place (loading binds the name to a stored copy, which the values
    holding the object, ``holder['data']``, would not see). Unknown counts as held."""
    if observed.captured is None:
        return True
    if any(name.isidentifier() for name in observed.mutated):
        return True
    own = set(writes)
    return any(held - own for name, held in observed.captured.items() if name in own)


def memo_path(store: CheckpointStore, fields: dict[str, Any] | None) -> str | None:
    """Where the run's memo entry goes (None: no entry, its outputs were not kept)."""
    if fields is None or fields.get("outputs") is None:
        return None
    return str(store.memo_manifest_path(fields["source_hash"], fields["key"]))


#: Stored runs the index keeps parsed, over all sources: past it, the sources looked up least
#: recently are let go (read from the store again when asked). A run's parsed manifest is a
#: few KB, and an agent's loop stores a run for each distinct input: held all, they were the
#: daemon's main growth per call.
CACHED_RUNS = 256


class MemoIndex:
    """The stored runs by normalized source, read from the store when asked and kept until
    their directory changes (plans ask on every ``status``), at most ``CACHED_RUNS`` of them."""

    def __init__(self, store: CheckpointStore, cached_runs: int = CACHED_RUNS) -> None:
        self.store = store
        self.cached_runs = cached_runs
        #: by source hash, least recently looked up first
        self._kept: OrderedDict[str, tuple[int, list[memo.MemoEntry]]] = OrderedDict()
        self._runs = 0

    def known(self, hashed: str) -> list[memo.MemoEntry] | None:
        """The stored runs when no file needs reading (none stored, or the ones read last are
        still current: one ``stat``), else None."""
        try:
            stamp = self.store.memo_dir(hashed).stat().st_mtime_ns
        except OSError:
            return []
        kept = self._kept.get(hashed)
        return kept[1] if kept is not None and kept[0] == stamp else None

    def lookup(self, hashed: str) -> list[memo.MemoEntry]:
        directory = self.store.memo_dir(hashed)
        try:
            stamp = directory.stat().st_mtime_ns
        except OSError:
            return []
        kept = self._kept.get(hashed)
        if kept is not None and kept[0] == stamp:
            self._kept.move_to_end(hashed)
            return kept[1]
        out = []
        for _, data in self.store.memo_manifests(hashed):
            entry = memo.MemoEntry.from_manifest(data)
            if entry is not None and entry.source_hash == hashed:
                out.append(entry)
        self._forget(hashed)
        self._kept[hashed] = (stamp, out)
        self._runs += len(out)
        while self._runs > self.cached_runs and len(self._kept) > 1:
            self._forget(next(iter(self._kept)))
        return out

    @property
    def cached(self) -> int:
        """Stored runs held parsed now."""
        return self._runs

    def _forget(self, hashed: str) -> None:
        kept = self._kept.pop(hashed, None)
        if kept is not None:
            self._runs -= len(kept[1])


def _may_write(session: KernelSession) -> Any:
    tracker = staleness_of(session).tracker

    def names(cell_id: str, source: str) -> set[str]:
        analysis = analyze_source(source)
        guessed = set(analysis.defs) | set(analysis.assigned_into) | set(analysis.mutates)
        return guessed | set(tracker.still_written_by(cell_id))

    return names


def annotate(
    index: MemoIndex,
    st: KernelCheckpoints,
    session: KernelSession,
    snap: NotebookSnapshot,
    plan_json: dict[str, Any],
) -> float:
    """Mark the plan's cells that would load from the memo (``memo`` on each entry, a
    ``loads_from_memo`` reason); returns the seconds saved against re-running them."""
    if not st.available or session.notebook is None:
        return 0.0
    cells = {c.cell_id: c for c in notebook_cells(snap)}
    entries = sorted(plan_json["stale"] + plan_json["conditional"], key=lambda e: e["index"])
    planned = [(e["cell_id"], cells[e["cell_id"]].source) for e in entries if e["cell_id"] in cells]
    if not planned:
        return 0.0
    found = memo.resolve(
        planned,
        index.lookup,
        _version_now(st, session),
        _may_write(session),
        stat_for(session),
        session.process.dataflow,
    )
    saved = 0.0
    for e in entries:
        entry = found.get(e["cell_id"])
        if entry is None:
            continue
        message = entry.describe(e["index"])
        e["memo"] = {
            "key": entry.key,
            "ran_at": entry.created,
            "kernel_id": entry.kernel_id,
            "load_s": entry.load_s,
            "run_s": round(entry.duration, 3),
            "saved_s": round(entry.duration - entry.load_s, 3),
        }
        e["reasons"] = [*e["reasons"], {"kind": "loads_from_memo", "message": message}]
        saved += entry.duration - entry.load_s
    return round(saved, 3)


def listing(
    index: MemoIndex, st: KernelCheckpoints, session: KernelSession, snap: NotebookSnapshot
) -> list[dict[str, Any]]:
    """Per code cell: the stored runs of its current source, newest first, and whether each
    matches the kernel's state now (for ``ipykeep checkpoints``)."""
    version = _version_now(st, session)
    stat = stat_for(session)
    out: list[dict[str, Any]] = []
    for cell in notebook_cells(snap):
        if cell.cell_type != "code":
            continue
        entries = sorted(index.lookup(source_hash(cell.source)), key=lambda e: -e.created)
        item: dict[str, Any] = {
            "cell_id": cell.cell_id,
            "index": cell.index,
            "runs": [
                {
                    "key": e.key,
                    "ran_at": e.created,
                    "kernel_id": e.kernel_id,
                    "run_s": round(e.duration, 3),
                    "bytes": e.checkpoint.bytes,
                    "loadable": e.loadable,
                    "matches_now": memo.matches(e, version, stat),
                }
                for e in entries
                if e.dataflow == session.process.dataflow
            ],
        }
        if cell.cell_id in st.unkeyed:
            item["not_memoized"] = st.unkeyed[cell.cell_id]
        if item["runs"] or "not_memoized" in item:
            out.append(item)
    return out


async def try_load(
    index: MemoIndex,
    st: KernelCheckpoints,
    session: KernelSession,
    cell: Cell,
    ex: Execution,
) -> bool:
    """Load ``cell``'s stored run in place of running it, when one matches now; True when the
    execution ``ex`` was finished that way (values, outputs, the tracker's record)."""
    if not st.available or session.notebook is None or not session.process.alive:
        return False
    store = index.store
    stat: StatFn = stat_for(session)
    hashed = source_hash(cell.source)
    # reading the stored runs goes to a thread; knowing there are none, or that the ones read
    # before are current, is one stat: no thread hop on the path between two cells
    entries = index.known(hashed)
    if entries is None:
        entries = await asyncio.to_thread(index.lookup, hashed)
    if not entries:
        return False
    poisoned = store.poisoned()
    usable = [e for e in entries if not set(e.checkpoint.values.values()) & set(poisoned)]
    entry = memo.choose(usable, _version_now(st, session), stat, session.process.dataflow)
    if entry is None:
        return False
    started = time.time()
    cp = entry.checkpoint
    same = planning.aliases(
        {n: cp.shared.get(n, ()) for n in cp.values}, dict.fromkeys(cp.values, 0)
    )
    load = [[n, b] for n, b in cp.values.items() if n not in same]
    deadline = session.config.restore_timeout
    try:
        reply = await session.process.eval_silent(
            call_loader("restore", load, deadline, sorted(cp.deleted), same),
            timeout=deadline + 60,
        )
    except IpykeepError:
        return False
    results = {str(k): str(v) for k, v in reply["results"].items()}
    bad = {n: r for n, r in results.items() if r != "ok"}
    for name, outcome in bad.items():
        blob = cp.values.get(name)
        if blob is None:
            continue
        if outcome.startswith("tampered:"):
            store.quarantine(blob)
        elif outcome.startswith("load_failed:"):
            store.mark_poisoned(blob, outcome)
    if bad:
        return False  # the cell runs: it rebinds what was loaded
    # the namespace monitor's baseline takes the loaded values in: the next cell is not
    # charged with them
    with contextlib.suppress(IpykeepError):
        await session.process.eval_silent(probes.statemon_collect_expr())
    tracker = staleness_of(session).tracker
    tracker.record_cell_run(
        cell.cell_id,
        cell.index,
        cell.source,
        "ok",
        files_read=cp.files,
        dynamic=cp.dynamic,
        observed=cp.observed,
    )
    writers = tracker.state.writers
    for name, version in entry.out.items():
        w = writers.get(name)
        if w is not None and w.cell_id == cell.cell_id:
            st.versions[(name, w.seq)] = version
    st.before = None
    _finish(ex, entry, cell, started)
    _remember(store, st, session, cell, entry)
    return True


def _finish(ex: Execution, entry: memo.MemoEntry, cell: Cell, started: float) -> None:
    ex.start()
    ex.started_at = started
    ex.add_note(f"loaded from memo: {entry.describe(cell.index)}")
    for out in entry.outputs:
        kind = out.get("output_type")
        if kind == "stream":
            content: dict[str, Any] = {"name": out.get("name", "stdout"), "text": _text(out)}
        elif kind in ("display_data", "execute_result"):
            content = {
                "data": out.get("data", {}),
                "metadata": out.get("metadata", {}),
                "execution_count": out.get("execution_count"),
            }
        else:
            continue
        ex.on_iopub({"header": {"msg_type": kind}, "content": content})
    ex.finish("ok")


def _text(out: dict[str, Any]) -> str:
    text = out.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)


def _remember(
    store: CheckpointStore,
    st: KernelCheckpoints,
    session: KernelSession,
    cell: Cell,
    entry: memo.MemoEntry,
) -> None:
    """The loaded run is the cell's latest checkpoint now (a restore after a crash loads it)."""
    assert session.notebook is not None
    manifest = {
        **entry.raw,
        "cell_id": cell.cell_id,
        "index": cell.index,
        "source": cell.source,
        "seq": time.time_ns(),
        "notebook": str(session.notebook),
    }
    path = store.cell_manifest_path(session.notebook, cell.cell_id)
    with contextlib.suppress(OSError, CheckpointError):
        store.write_manifest(path, manifest)
    cp = entry.checkpoint
    st.cells.pop(cell.cell_id, None)
    st.cells[cell.cell_id] = CellCheckpointInfo(
        cell_id=cell.cell_id,
        index=cell.index,
        restorable=True,
        bytes=cp.bytes,
        values=sorted(cp.values),
        sizes=dict(cp.sizes),
        failed={},
        cheap=False,
        recompute_s=round(cp.duration, 6),
    )
    st.cheap.pop(cell.cell_id, None)
