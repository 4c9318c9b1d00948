"""Checkpoints as an engine collaborator: background snapshots after each notebook cell, restore
of a lost kernel's fresh cells at start, and named checkpoints with rollback.

A ``SessionObserver`` (``kernel_started``, ``after_cell``, ``batch_finished``,
``kernel_restarted``, ``kernel_closing``, ``warm_cells``, ``warm_finished``, ``kernel_summary``,
``namespace_notes``)
with three RPC methods (``checkpoint``, ``restore``, ``checkpoints``) that the composition root
lists. It is attached after the staleness service: it reads the staleness tracker's record of
the cell that just ran. Its per-kernel state is a ``KernelCheckpoints`` in the session's feature
states.

When restore happens: on ``start`` of a notebook that has cell checkpoints — a new kernel after
``stop``, after the daemon was killed or the machine rebooted, or the same kernel id when its
kernel process died — warm-up restores the fresh cells' values and runs only the plan. An
explicit ``restart`` drops the state as it always did (the user asked for a clean kernel).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from ipykeep.api import checkpoints as checkpoints_api
from ipykeep.api.checkpoints import (
    CellCheckpointInfo,
    CheckpointListing,
    ForkDiff,
    ForkResult,
    NamedCheckpointResult,
    RestoreReport,
    RollbackResult,
    than_rerunning,
)
from ipykeep.api.errors import IpykeepError, KernelBusyError
from ipykeep.api.spec import Bindings, bind
from ipykeep.checkpoints import (
    closing,
    cost,
    forks,
    manifest_writer,
    memo_runs,
    planning,
    remote,
)
from ipykeep.checkpoints.limits import Limits, collect
from ipykeep.checkpoints.restore import load_before, restore_lost
from ipykeep.checkpoints.state import FLUSH_ON_CLOSE_S, HIDDEN, KernelCheckpoints, call_loader
from ipykeep.checkpoints.state import call as _call
from ipykeep.checkpoints.store import (
    CheckpointError,
    CheckpointStore,
    TamperedCheckpointError,
    UnknownCheckpointError,
)
from ipykeep.client import checkpoint_words
from ipykeep.engine.engine import Engine
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import (
    CHECKPOINT,
    CHECKPOINT_BLOB,
    CHECKPOINT_LOAD,
    MEMOGUARD,
    InKernelModule,
)
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.project.layout import private_dir
from ipykeep.project.notebook import Cell, NotebookSnapshot, read_notebook
from ipykeep.staleness import probes
from ipykeep.staleness.hashing import source_hash
from ipykeep.staleness.models import Observed
from ipykeep.staleness.state import staleness_of

log = logging.getLogger("ipykeep.checkpoints")


class CheckpointService(SessionObserver):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = CheckpointStore(engine.paths.state)
        self.memo_index = memo_runs.MemoIndex(self.store)
        #: kernel id -> what checkpoints do in that kernel (kept after close: status reads it)

    # -- per-kernel state --------------------------------------------------------------------
    def state(self, session: KernelSession) -> KernelCheckpoints:
        return session.features.of(KernelCheckpoints)

    def _scope(self, session: KernelSession) -> Path:
        """Checkpoints are kept per notebook (scratch kernels: per working directory)."""
        return session.notebook if session.notebook is not None else session.cwd / "<scratch>"

    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return (CHECKPOINT_BLOB, CHECKPOINT, CHECKPOINT_LOAD, MEMOGUARD)

    async def _install(self, session: KernelSession) -> None:
        st = self.state(session)
        if not session.config.checkpoints:
            st.available, st.reason = False, "checkpoints are off (checkpoints = false)"
            return
        kind = getattr(getattr(session.process, "provider", None), "kind", "local")
        if kind not in ("local", "ssh"):
            # the kernel writes and reads the store itself: on the project's disk, or (SSH) on its
            # host's
            st.available, st.reason = (
                False,
                f"checkpoints need a local or SSH kernel (this one runs on {kind})",
            )
            return
        limits = Limits.from_config(session.config)
        try:
            _ = self.store.key  # created (0600) before the kernel reads it
            root = remote.remote_root(session, self.store)
            await session.process.install(*self.kernel_helpers(session.process.dataflow))
            # an SSH kernel's key travels in this request only (see ``remote``)
            reply = await session.process.eval_silent(
                remote.configure_call(self.store, root, limits, session.config)
            )
        except IpykeepError as exc:
            st.available, st.reason = False, exc.message
            log.warning("checkpoints unavailable in %s: %s", session.kernel_id, exc.message)
            return
        st.available = bool(reply.get("available"))
        st.reason = str(reply.get("reason") or "")
        st.remote_root = str(reply["root"]) if root is not None and st.available else None
        st.versions.clear()  # a new process: no value of the last one is in it
        st.memo = False
        if st.available and st.remote_root is None:
            # memoized runs live in the project's store: a kernel on another host has none
            with contextlib.suppress(IpykeepError, OSError):
                private_dir(self.store.root / "memo")
                await session.process.eval_silent(MEMOGUARD.call("install"))
                st.memo = True

    # -- engine hooks ------------------------------------------------------------------------
    async def kernel_started(self, session: KernelSession) -> None:
        await self._install(session)
        if self.state(session).available:
            self._collect_soon(session)

    async def kernel_restarted(self, session: KernelSession) -> None:
        # No restore here: ``restart`` drops the state on purpose. ``start`` of a notebook whose
        # kernel died restarts it and warms it, and warm-up restores (``warm_cells``).
        # Named checkpoints keep their tracker copies: restoring one whole into the new process
        # brings back what its cells had left, and the copy is carried into the new epoch.
        await self._install(session)

    async def kernel_closing(self, session: KernelSession) -> None:
        """``stop``, ``close`` or idle expiry: let the writers finish the last snapshots first."""
        await closing.flush_last_snapshots(self, session)

    async def warm_cells(
        self, session: KernelSession, snap: NotebookSnapshot, cell_ids: list[str]
    ) -> list[str]:
        """At start: restore what is still fresh; warm-up then runs only the plan."""
        if not self.state(session).available or session.notebook is None:
            return cell_ids
        try:
            report = await self.restore_lost(session, snap)
        except IpykeepError as exc:
            session.notices.append(f"checkpoints not restored: {exc.message}")
            return cell_ids
        if report is None:
            return cell_ids
        return [c["cell_id"] for c in report.rerun]

    def kernel_summary(self, session: KernelSession) -> str | None:
        """One line for ``status``: the cells in each checkpoint state, and their size."""
        st = self.state(session)
        if not st.available:
            return None  # why: `ipykeep checkpoints`
        cells = list(st.cells.values())
        origin = session.features.of(forks.ForkOrigin)
        fork = f"fork of {origin.parent}; " if origin.parent else ""
        if not cells and st.last_restore is None:
            return fork.rstrip("; ") or None
        text = fork + checkpoint_words.summary(cells)
        if st.last_restore is not None:
            text += (
                f"; at start {len(st.last_restore.restored)} cell(s) were restored from "
                f"checkpoints ({than_rerunning(st.last_restore.saved_s, 1)})"
            )
        return text

    def namespace_notes(self, session: KernelSession) -> list[str]:
        """For ``namespace``: the status line, each checkpointed variable's size, and what could
        not be saved."""
        st = self.state(session)
        if not st.available or not st.cells:
            return []
        return checkpoint_words.namespace_notes(st.cells.values())

    async def warm_finished(self, session: KernelSession) -> None:
        st = self.state(session)
        if st.pending_notice:
            session.notices.append(st.pending_notice)
            st.pending_notice = None
        if st.available and st.cells and session.process.alive:
            # what start reports as checkpointed must be on disk: wait for the writer (it is
            # done by now unless the values are big) and hear which writes failed
            with contextlib.suppress(IpykeepError):
                await session.process.eval_silent(
                    _call("flush", FLUSH_ON_CLOSE_S), timeout=FLUSH_ON_CLOSE_S + 30
                )
                failures = await session.process.eval_silent(_call("take_failures"))
                self._write_failed(session, failures)

    def _write_failed(self, session: KernelSession, failures: Any) -> dict[str, str]:
        """Take in the writes the kernel's writer reports failed (``[path, why]`` pairs): the
        cells they were of are no longer counted as checkpointed, and the agent is told.
        Returns why, by manifest path."""
        found = {str(path): str(why) for path, why in failures or () if path}
        st = self.state(session)
        if not found or session.notebook is None:
            return found
        for cell_id, info in list(st.cells.items()):
            why = found.get(str(self.store.cell_manifest_path(session.notebook, cell_id)))
            if why is None:
                continue
            lost = {n: why for n in info.values} or {"<values>": why}
            st.cells[cell_id] = info.model_copy(
                update={
                    "restorable": False,
                    "bytes": 0,
                    "values": [],
                    "sizes": {},
                    "failed": {**info.failed, **lost},
                }
            )
            session.notices.append(
                f"checkpoint of cell {info.index} ({cell_id}) not saved: {why}; "
                "after a restart it re-runs instead of being restored"
            )
        return found

    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        if not self.state(session).memo:
            return {}
        return {memo_runs.GUARD_KEY: memo_runs.guard_expression(cell)}

    async def before_cell(
        self, session: KernelSession, cell: Cell, ex: Execution, may_load: bool
    ) -> bool:
        """Note who wrote each name (the run is keyed on it); in a plan being executed, load
        the cell's stored run instead of running it when one matches (``memo_runs``)."""
        st = self.state(session)
        if not st.memo:
            return False
        memo_runs.note_start(st, session)
        if not may_load:
            return False
        if st.manifest_queue:  # a stored run of this source waiting for the writer: written
            await manifest_writer.written_in(st, self.store.memo_dir(source_hash(cell.source)))
        return await memo_runs.try_load(self.memo_index, st, session, cell, ex)

    def annotate_plan(
        self, session: KernelSession, snap: NotebookSnapshot, plan_json: dict[str, Any]
    ) -> float:
        st = self.state(session)
        if not st.memo:
            return 0.0
        try:
            return memo_runs.annotate(self.memo_index, st, session, snap, plan_json)
        except (OSError, ValueError, KeyError) as exc:  # a plan is shown without memo notes
            log.warning("memo lookup for %s failed: %s", session.kernel_id, exc)
            return 0.0

    async def after_cell(self, session: KernelSession, cell: Cell, ex: Execution) -> None:
        st = self.state(session)
        await self.batch_finished(session)  # the cell above's snapshot first: kept in run order
        if not st.available or session.notebook is None or not session.process.alive:
            return
        path = self.store.cell_manifest_path(session.notebook, cell.cell_id)
        observed = self._observed(ex)
        tracker = staleness_of(session).tracker
        if ex.state != "ok" or observed is None or tracker is None:
            # the last checkpoint no longer describes this cell's values
            with contextlib.suppress(OSError):
                path.unlink()
            remote.withdraw(st, path)
            st.cells.pop(cell.cell_id, None)
            st.cheap.pop(cell.cell_id, None)
            return
        writes = [
            n for n in tracker.still_written_by(cell.cell_id) if n.isidentifier() or n in HIDDEN
        ]
        # a hidden state an import cell writes (it seeds numpy's global generator) is recreated
        # by re-running the cell, as a fresh run would: the cell still only imports (without
        # this, such a slow cell was never cheap, and every fast cell reading ``np`` was pickled
        # while the kernel was held, ~20 ms for a 2M-row frame on every run)
        named = [n for n in writes if n not in HIDDEN]
        imports_only = bool(named) and set(named) <= set(tracker.run_imports(cell.cell_id))
        inputs = tracker.run_inputs(cell.cell_id)
        decision = cost.decide(
            cell.cell_id,
            ex.duration or 0.0,
            inputs.values(),
            st.cheap,
            session.config.checkpoint_min_cell_s,
            st.snapshot_s.get(cell.cell_id),
            imports_only,
        )
        fields, unkeyed = (
            memo_runs.key_run(st, session, cell, ex, observed, writes) if st.memo else (None, None)
        )
        st.unkeyed.pop(cell.cell_id, None)
        if unkeyed:
            st.unkeyed[cell.cell_id] = unkeyed
        files, written = tracker.run_files(cell.cell_id)
        seq = st.keep_seq.pop(cell.cell_id, None) or time.time_ns()
        if st.remote_root is not None:
            remote.issue(st, path, seq)
        meta: dict[str, Any] = {
            "path": str(path),
            "manifest": {
                "v": 1,
                "kind": "cell",
                "notebook": str(session.notebook),
                "dataflow": session.process.dataflow,
                "cell_id": cell.cell_id,
                "index": cell.index,
                "source": cell.source,
                "seq": seq,
                "duration": ex.duration or 0.0,
                "files": [f.to_json() for f in files],
                "written": list(written),
                # whose values the run read: a cheap reader of a saved value re-runs after it loads
                "inputs": {n: w for n, w in inputs.items() if w is not None},
                "observed": planning.observed_json(observed),
                "writes": writes,
                "kernel_id": session.kernel_id,
                "cheap": decision.cheap,
                "recompute_s": decision.recompute_s,
                "dynamic": planning.dynamic_json(d)
                if (d := tracker.run_dynamic(cell.cell_id)) is not None
                else None,
                "memo": fields,
            },
        }
        if not decision.cheap and (memo_file := memo_runs.memo_path(self.store, fields)):
            meta["memo_path"] = memo_file
        st.cheap.pop(cell.cell_id, None)
        previous = st.cells.get(cell.cell_id)
        if decision.cheap:  # a manifest without values: restore re-runs the cell (see ``cost``)
            # an import-only cell costs restore the same either way: nothing for its readers
            st.cheap[cell.cell_id] = cost.CheapCell(
                0.0 if imports_only else ex.duration or 0.0, decision.chain
            )
        try:
            if decision.cheap and (previous is None or previous.cheap):
                # written here, not by the kernel: no round trip, the kernel is not held at all
                # (when the kernel's writer may still hold an older snapshot of this cell, the
                # manifest goes through it instead, so the newer one is written last)
                manifest = {
                    **meta["manifest"],
                    "values": {},
                    "failed": {},
                    "restorable": True,
                    "created": time.time(),
                }
                manifest_writer.write_later(self.store, st, session, path, manifest)
                reply: dict[str, Any] = {}
            else:
                snapshot = _call("snapshot", json.dumps(meta), [] if decision.cheap else writes)
                timeout = session.config.checkpoint_snapshot_budget_s * 4 + 30
                answer = (
                    None
                    if decision.cheap
                    else session.process.send_silent(snapshot, timeout=timeout)
                )
                if answer is not None:  # sent: the kernel takes it before the next cell,
                    # which need not wait for the answer (taken in by the next ``after_cell``)
                    st.snapshot_reply = session.scheduler.spawn(
                        self._snapshot_taken(session, cell, decision, answer)
                    )
                    return
                reply = await session.process.eval_silent(snapshot, timeout=timeout)
            if decision.cheap and (memo_file := memo_runs.memo_path(self.store, fields)):
                # no values: the entry keys its readers (what a re-run of the cell leaves)
                entry = {
                    **meta["manifest"],
                    "values": {},
                    "failed": {},
                    "restorable": True,
                    "created": time.time(),
                }
                manifest_writer.write_later(self.store, st, session, Path(memo_file), entry)
        except (IpykeepError, OSError) as exc:
            log.warning("checkpoint of %s failed: %s", cell.cell_id, getattr(exc, "message", exc))
            return
        await self._took(session, cell, decision, reply)

    async def batch_finished(self, session: KernelSession) -> None:
        """The last cell's snapshot answer is taken in (what it saved, what failed)."""
        pending = self.state(session).snapshot_reply
        if pending is not None:
            self.state(session).snapshot_reply = None
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

    async def _snapshot_taken(
        self,
        session: KernelSession,
        cell: Cell,
        decision: cost.Decision,
        answer: Coroutine[Any, Any, Any],
    ) -> None:
        try:
            reply = await answer
        except (IpykeepError, OSError) as exc:
            log.warning("checkpoint of %s failed: %s", cell.cell_id, getattr(exc, "message", exc))
            return
        await self._took(session, cell, decision, reply)

    async def _took(
        self, session: KernelSession, cell: Cell, decision: cost.Decision, reply: dict[str, Any]
    ) -> None:
        """What the cell's checkpoint saved (``reply``: the kernel's answer to ``snapshot``;
        empty for a manifest written here)."""
        st = self.state(session)
        if st.remote_root is not None:  # an SSH kernel's finished manifests (see ``remote``)
            await asyncio.to_thread(remote.deliver, self.store, st, reply.get("manifests"))
            if "seconds" in reply:
                session.scheduler.spawn(self._settle(session))
        if not decision.cheap and "seconds" in reply:
            st.snapshot_s[cell.cell_id] = float(reply["seconds"])
        self._write_failed(session, reply.get("write_failures"))  # earlier cells' writes
        sizes = {str(k): int(v) for k, v in (reply.get("sizes") or {}).items()}
        failed = {str(k): str(v) for k, v in (reply.get("failed") or {}).items()}
        st.cells.pop(cell.cell_id, None)  # kept in run order: the latest writer of a name last
        st.cells[cell.cell_id] = CellCheckpointInfo(
            cell_id=cell.cell_id,
            index=cell.index,
            restorable=not failed,
            bytes=sum(sizes.values()),
            values=sorted(sizes),
            sizes=sizes,
            failed=failed,
            snapshot_s=float(reply.get("seconds") or 0.0),
            cheap=decision.cheap,
            recompute_s=decision.recompute_s,
        )
        if st.collect_schedule.note_snapshot(
            sum(sizes.values()), Limits.from_config(session.config).max_project_bytes
        ):
            self._collect_soon(session)

    async def _settle(self, session: KernelSession) -> None:
        try:
            await remote.settle(session, self.store, self.state(session))
        except (IpykeepError, OSError) as exc:
            log.warning(
                "checkpoint manifests of %s not fetched yet: %s",
                session.kernel_id,
                getattr(exc, "message", exc),
            )

    @staticmethod
    def _observed(ex: Execution) -> Observed | None:
        result = (ex.expression_results or {}).get("ipykeep_state")
        if result is None:
            return None
        with contextlib.suppress(IpykeepError, ValueError, TypeError):
            return probes.parse_statemon(probes.decode_expression_value(result))
        return None

    def _collect_soon(self, session: KernelSession) -> None:
        limits = Limits.from_config(session.config)

        async def run() -> None:
            with contextlib.suppress(Exception):
                report = await asyncio.to_thread(collect, self.store, limits)
                self.state(session).collect_schedule.collected(report)
            if self.state(session).remote_root is not None and session.process.alive:
                with contextlib.suppress(Exception):
                    await remote.collect(session, self.store, limits)

        session.scheduler.spawn(run())

    async def restore_lost(
        self, session: KernelSession, snap: NotebookSnapshot
    ) -> RestoreReport | None:
        pending = self.state(session).manifest_write
        if pending is not None:  # the manifests written last are read now
            with contextlib.suppress(Exception):
                await asyncio.shield(pending)

        async def run(cell_ids: list[str]) -> bool:
            return (await self.engine.run_batch(session, snap, cell_ids)).ok

        return await restore_lost(self.store, self.state(session), session, snap, run)

    # -- RPC methods -------------------------------------------------------------------------
    async def load_before(
        self, session: KernelSession, snap: NotebookSnapshot, cell_id: str, names: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """Load ``names`` as the cells above ``cell_id`` left them (see ``restore.load_before``);
        handed to the debugger's replay by the composition root."""
        state = self.state(session)
        if not state.available or session.notebook is None:
            why = state.reason or "this kernel has no notebook"
            return [], {n: f"checkpoints are not available: {why}" for n in names}
        await self._settle(session)
        return await load_before(self.store, session, snap, cell_id, names)

    def _ready(self, kernel_id: str | None, notebook: str | None) -> KernelSession:
        session = self.engine.live(kernel_id, notebook)
        st = self.state(session)
        if not st.available:
            raise CheckpointError(
                f"checkpoints are not available in kernel {session.kernel_id}: "
                f"{st.reason or 'not set up'}",
                hint="set checkpoints = true and install cloudpickle in the kernel's environment",
            )
        return self._idle(session)

    @staticmethod
    def _idle(session: KernelSession) -> KernelSession:
        if session.scheduler.main_lock.locked() or session.running():
            raise KernelBusyError(
                f"kernel {session.kernel_id} is running code; "
                "a copy of its state now would be half of one",
                hint="wait for the running cell to finish (or interrupt it), then retry",
            )
        return session

    async def checkpoint(
        self, name: str | None = None, kernel_id: str | None = None, notebook: str | None = None
    ) -> NamedCheckpointResult:
        """Save every user variable of the kernel under ``name`` (default: a timestamp)."""
        session = self._ready(kernel_id, notebook)
        name = name or time.strftime("ckpt-%Y%m%d-%H%M%S")
        path = self.store.named_manifest_path(self._scope(session), name)
        st = self.state(session)
        async with session.scheduler.main_lock:
            if st.remote_root is not None:
                remote.issue(st, path, None)
            names = await session.process.eval_silent(_call("user_names"))
            meta = {
                "path": str(path),
                "manifest": {
                    "v": 1,
                    "kind": "named",
                    "name": name,
                    "names": names,
                    "kernel_id": session.kernel_id,
                    "notebook": str(session.notebook) if session.notebook else None,
                },
            }
            budget = session.config.restore_timeout
            reply = await session.process.eval_silent(
                _call("snapshot", json.dumps(meta), names), timeout=budget + 60
            )
            done = await session.process.eval_silent(_call("flush", budget), timeout=budget + 30)
            failures = await session.process.eval_silent(_call("take_failures"))
            if st.remote_root is not None:  # what the snapshot's reply carried, then this one
                await asyncio.to_thread(remote.deliver, self.store, st, reply.get("manifests"))
                await remote.take(session, self.store, st)
        why = self._write_failed(session, [*(reply.get("write_failures") or ()), *failures])
        if str(path) in why:
            raise CheckpointError(
                f"checkpoint {name!r} was not saved: {why[str(path)]}",
                hint="free space where the checkpoint store is (.ipykeep/checkpoints) and "
                "checkpoint again; nothing of it can be restored",
            )
        if not done:
            raise CheckpointError(
                f"checkpoint {name!r} was not written within {budget:g} s",
                hint="retry; see `ipykeep status`",
            )
        tracker = staleness_of(session).tracker
        with contextlib.suppress(
            Exception
        ):  # a tracker that cannot be copied: rollback records a change instead
            self.state(session).named[name] = (
                session.process.generation,
                copy.deepcopy(tracker),
                dict(session.cell_runs),
            )
        sizes = {str(k): int(v) for k, v in (reply.get("sizes") or {}).items()}
        return NamedCheckpointResult(
            kernel_id=session.kernel_id,
            name=name,
            values=sorted(sizes),
            bytes=sum(sizes.values()),
            failed=reply.get("failed") or {},
            seconds=float(reply.get("seconds") or 0.0),
        )

    async def restore(
        self, name: str, kernel_id: str | None = None, notebook: str | None = None
    ) -> RollbackResult:
        """Roll the kernel's variables back to checkpoint ``name``; names made since are deleted."""
        session = self._ready(kernel_id, notebook)
        path = self.store.named_manifest_path(self._scope(session), name)
        try:
            manifest = self.store.read_manifest(path)
        except UnknownCheckpointError:
            known = sorted(
                m.get("name", "?") for m in self.store.named_manifests(self._scope(session))[0]
            )
            raise UnknownCheckpointError(
                f"no checkpoint named {name!r} for {self._scope(session).name}",
                hint=f"known: {', '.join(known) or 'none'}; "
                "make one with `ipykeep checkpoint NAME`",
            ) from None
        values = {n: v["blob"] for n, v in (manifest.get("values") or {}).items()}
        for blob in values.values():
            if self.store.is_poisoned(blob):
                raise TamperedCheckpointError(
                    f"checkpoint {name!r} holds a poisoned value; nothing was changed",
                    hint="make a new checkpoint; this one cannot be loaded",
                )
        started = time.monotonic()
        async with session.scheduler.main_lock:
            current = await session.process.eval_silent(_call("user_names"))
            keep = set(manifest.get("names") or [])
            delete = sorted(n for n in current if n not in keep and n not in HIDDEN)
            # every blob authenticates before anything changes: a refused rollback leaves the
            # kernel as it was
            check = await session.process.eval_silent(
                call_loader("verify", list(values.values())),
                timeout=session.config.restore_timeout + 60,
            )
            if any(str(why).startswith("outdated:") for why in check.values()):
                raise CheckpointError(
                    f"checkpoint {name!r} was written in an earlier checkpoint format "
                    "by an older ipykeep and "
                    "cannot be restored; nothing was changed",
                    hint=f"make a new one: `ipykeep checkpoint {name}`",
                )
            if check:
                for blob in check:
                    self.store.quarantine(blob)
                raise TamperedCheckpointError(
                    f"checkpoint {name!r} refused: {len(check)} value(s) "
                    "do not authenticate under this project's key "
                    "(modified, or not written by this project); nothing was changed",
                    hint="make a new checkpoint; delete the damaged one from .ipykeep/checkpoints",
                )
            # one snapshot: names that shared an object then share it again
            same = planning.aliases(
                {n: v.get("shared") or () for n, v in manifest["values"].items()},
                dict.fromkeys(values, 0),
            )
            reply = await session.process.eval_silent(
                call_loader(
                    "restore",
                    [[n, b] for n, b in values.items() if n not in same],
                    session.config.restore_timeout,
                    delete,
                    same,
                ),
                timeout=session.config.restore_timeout + 60,
            )
            # the next cell must not be charged with the rollback's changes
            with contextlib.suppress(IpykeepError):
                await session.process.eval_silent(probes.statemon_collect_expr())
        results = {str(k): str(v) for k, v in reply["results"].items()}
        loaded = sorted(n for n, r in results.items() if r == "ok")
        failed = {n: r for n, r in results.items() if r != "ok"}
        saved = self.state(session).named.get(name)
        unsaved = {**(manifest.get("failed") or {}), **failed}
        restarted = saved is not None and saved[0] != session.process.generation
        # In the same process a value that was not saved is still the one the checkpoint saw (a
        # rollback leaves it); after a restart it is gone, so every value must have come back.
        whole = not (unsaved if restarted else failed)
        if saved is not None and saved[1] is not None and whole:
            # What the notebook's cells left is back as it was, even in a kernel restarted since
            # the checkpoint (its cells are no longer lost to the restart).
            tracker = copy.deepcopy(saved[1])
            if restarted:
                tracker.carried_into(staleness_of(session).tracker.epoch)
            staleness_of(session).tracker = tracker
            session.cell_runs.clear()
            session.cell_runs.update(saved[2])
        else:
            tracker = staleness_of(session).tracker
            if tracker is not None:
                tracker.record_scratch(
                    f"# restore checkpoint {name}",
                    observed=Observed(
                        bound=frozenset(n for n in loaded if n.isidentifier()),
                        deleted=frozenset(delete),
                    ),
                )
        lost = staleness_of(session).tracker.lost_to_restart()
        still_lost = None
        if lost:
            why = (
                f"not every value came back ({', '.join(sorted(unsaved)[:5])})"
                if unsaved
                else "this daemon has no record of what the cells had run when it was made"
            )
            still_lost = (
                f"{len(lost)} cell(s) stay in the stale plan as lost in the kernel restart: {why}"
            )
        return RollbackResult(
            kernel_id=session.kernel_id,
            name=name,
            restored=loaded,
            deleted=delete,
            not_rolled_back=unsaved,
            seconds=round(time.monotonic() - started, 3),
            still_lost=still_lost,
        )

    async def checkpoints(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> CheckpointListing:
        """What is checkpointed for the kernel's notebook, and how big it is."""
        session = self.engine.session(kernel_id, notebook)
        st = self.state(session)
        scope = self._scope(session)
        named, _ = await asyncio.to_thread(self.store.named_manifests, scope)
        cells: list[CellCheckpointInfo] = list(st.cells.values())
        if session.notebook is not None and not cells:
            manifests, _ = await asyncio.to_thread(self.store.cell_manifests, session.notebook)
            for m in manifests:
                cp = planning.CellCheckpoint.from_manifest(m)
                cells.append(
                    CellCheckpointInfo(
                        cell_id=cp.cell_id,
                        index=cp.index,
                        restorable=cp.restorable,
                        bytes=cp.bytes,
                        values=sorted(cp.values),
                        sizes=dict(cp.sizes),
                        failed=dict(cp.failed),
                    )
                )
        return CheckpointListing(
            kernel_id=session.kernel_id,
            enabled=st.available,
            reason=st.reason or None,
            cells=sorted(cells, key=lambda c: c.index),
            named=[
                {
                    "name": m.get("name"),
                    "created": m.get("created"),
                    "values": len(m.get("values") or {}),
                    "bytes": sum(int(v.get("size", 0)) for v in (m.get("values") or {}).values()),
                }
                for m in sorted(named, key=lambda m: m.get("created", 0))
            ],
            store_bytes=await asyncio.to_thread(self.store.usage),
            last_restore=st.last_restore,
            memo=await asyncio.to_thread(self._memo_listing, session)
            if st.memo and session.notebook is not None
            else [],
        )

    def _memo_listing(self, session: KernelSession) -> list[dict[str, Any]]:
        assert session.notebook is not None
        return memo_runs.listing(
            self.memo_index, self.state(session), session, read_notebook(session.notebook)
        )

    async def fork_kernel(
        self, name: str | None = None, kernel_id: str | None = None, notebook: str | None = None
    ) -> ForkResult:
        """A new kernel with this kernel's variables, bound to a copy of its notebook (its
        checkpoint way checks that checkpoints are available: ``checkpoint`` does)."""
        return await forks.fork(self, self._idle(self.engine.live(kernel_id, notebook)), name)

    async def diff_fork(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> ForkDiff:
        """Which cells and variables of a fork differ from its parent's."""
        return await forks.diff(self, self.engine.live(kernel_id, notebook))

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (
            bind(checkpoints_api.CHECKPOINT, self.checkpoint),
            bind(checkpoints_api.RESTORE, self.restore),
            bind(checkpoints_api.CHECKPOINTS, self.checkpoints),
            bind(checkpoints_api.FORK_KERNEL, self.fork_kernel),
            bind(checkpoints_api.DIFF_FORK, self.diff_fork),
        )
