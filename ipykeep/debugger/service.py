"""The debugger as an engine collaborator: pdb commands served over RPC, pauses followed.

The debugger itself runs in the kernel (``_inkernel/debug.py``: ``bdb`` on the main thread),
installed once per kernel process with IPython hooks that cost nothing while no breakpoint is
set. A paused execution holds the main shell, so every command goes to an ipykernel-7 subshell
(as inspection does) and the paused thread takes its orders from there. While breakpoints are
armed, a watcher follows the running main-shell execution so that its record says where it is
paused. Replay re-runs a failed notebook cell under the debugger from the state it started
from — the live state, or the values clobbered since loaded from the checkpoints of the cells
above (a loader the composition root hands over) — stopping where it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ipykeep.api import debugger as debugger_api
from ipykeep.api.debugger import DebugFrame, DebugResult
from ipykeep.api.errors import IpykeepError, KernelBusyError, UnknownCellError, UsageError
from ipykeep.api.spec import Bindings, bind
from ipykeep.debugger import commands
from ipykeep.debugger.errors import DebugStateError
from ipykeep.debugger.state import INSTALL_HOOKS, KernelDebug, call
from ipykeep.engine.observer import ScratchOrigin, SessionObserver
from ipykeep.engine.session import KernelSession
from ipykeep.engine.session_records import execution_record
from ipykeep.kernel.driver import pipelined
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import DEBUG, InKernelModule
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.project.notebook import Cell, NotebookSnapshot, read_notebook

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

log = logging.getLogger(__name__)

#: Seconds a step/next/continue waits for the execution to pause again or finish.
RESUME_WAIT_S = 10.0
#: Seconds a replay waits for the re-run cell to reach the failure.
REPLAY_WAIT_S = 60.0
#: A failed cell stale only for these reasons reads the state it started from.
REPLAYABLE_REASONS = frozenset({"failed", "source_changed"})
#: Reasons of a cell above that loading checkpointed values undoes (or that follow from it).
RESTORABLE = frozenset({"restores", "upstream", "state_changed"})

#: Loads names into the live kernel as the cells above a cell left them (checkpoints' part).
LoadBefore = Callable[
    [KernelSession, NotebookSnapshot, str, list[str]], Awaitable[tuple[list[str], dict[str, str]]]
]
#: Seconds one watcher call waits in the kernel for a change.
WATCH_WAIT_S = 2.0


class DebuggerService(SessionObserver):
    def __init__(self, engine: Engine, load_before: LoadBefore) -> None:
        self.engine = engine
        #: checkpoints restore the values a replayed cell started from; handed over by the
        #: composition root so the debugger imports no other feature
        self._load_before = load_before

    def state(self, session: KernelSession) -> KernelDebug:
        return session.features.of(KernelDebug)

    # -- observer events ----------------------------------------------------------------------
    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return (DEBUG,)

    async def kernel_started(self, session: KernelSession) -> None:
        # sent together: the kernel answers them in order, so the hooks find the module
        await pipelined(
            session.process.install(*self.kernel_helpers(session.process.dataflow)),
            session.process.eval_silent(INSTALL_HOOKS, decode=False),
        )

    async def kernel_restarted(self, session: KernelSession) -> None:
        state = self.state(session)
        state.armed = False  # breakpoints lived in the old process
        if state.watcher is not None:
            state.watcher.cancel()
        await self.kernel_started(session)

    async def kernel_closing(self, session: KernelSession) -> None:
        state = self.state(session)
        for task in (state.watcher, state.replay):
            if task is not None:
                task.cancel()

    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        self._follow(session)
        return {}

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        self._follow(session)
        return {}

    async def after_cell(self, session: KernelSession, cell: Cell, ex: Execution) -> None:
        ex.paused = None

    async def after_scratch(
        self, session: KernelSession, ex: Execution, origin: ScratchOrigin = "scratch"
    ) -> None:
        ex.paused = None

    # -- the one RPC method ------------------------------------------------------------------
    async def debug(
        self,
        command: str,
        handle: str | None = None,
        kernel_id: str | None = None,
        notebook: str | None = None,
    ) -> DebugResult:
        """Run one pdb-style command in the kernel's debugger (see ``commands.py``)."""
        session = self.engine.live(kernel_id, notebook)
        session.touch()
        parsed = commands.parse(command)
        if parsed.op == "replay":
            return await self._replay(session, command, parsed.arg)
        kind = self._context_kind(session, handle)
        arg: Any = parsed.arg
        if parsed.op in ("break", "clear") and isinstance(arg, commands.Breakpoint):
            arg = self._target(session, arg)
        if parsed.op == "break" and arg is None:
            parsed = commands.Command("status")
        reply = await self._call(session, parsed.op, arg, kind)
        state = self.state(session)
        if parsed.op in ("break", "clear", "catch"):
            status = reply["status"]
            state.armed = bool(status["breakpoints"] or status["stop_on_raise"])
            self._follow(session)
        result = self._result(session, command, reply, named=kind is not None)
        if kind == "post_mortem" and result.handle != handle:
            raise DebugStateError(
                f"the frames of {handle} are gone: a kernel keeps those of its last failure "
                f"only ({result.handle or 'one that ran outside ipykeep'})",
                hint=f"debug {result.handle} instead, or replay the failed cell"
                if result.handle
                else "replay the failed cell to get its frames back",
            )
        if parsed.op in commands.RESUMING:
            await self._attach_finished(session, result, handle)
        return result

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (bind(debugger_api.DEBUG, self.debug),)

    # -- talking to the in-kernel debugger ----------------------------------------------------
    async def _call(
        self, session: KernelSession, op: str, arg: Any = None, kind: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        wait_s = float(kw.get("wait_s", RESUME_WAIT_S))
        budget = session.config.inspect_timeout
        expression = call(
            op,
            arg,
            kind,
            budget_s=budget,
            summarizers=list(session.config.summarizers),
            wait_s=wait_s,
        )
        subshell = await session.side_subshell()
        timeout = budget * 3 + wait_s + 10
        try:
            await session.process.install(DEBUG, subshell_id=subshell)
            text: str = await session.process.eval_silent(
                expression, subshell_id=subshell, timeout=timeout, decode=False
            )
        finally:
            if subshell is not None:
                session.process.release_subshell(subshell)
        reply: dict[str, Any] = json.loads(text)
        return reply

    def _context_kind(self, session: KernelSession, handle: str | None) -> str | None:
        """Which frames ``handle`` names: its pause or its post-mortem (None: whichever is)."""
        if handle is None:
            return None
        ex = session.executions.get(handle)
        if ex is None:
            raise DebugStateError(
                f"kernel {session.kernel_id} has no execution {handle}",
                hint="name an execution by the handle a run returned (c12), or leave it out",
            )
        if not ex.finished:
            if ex.subshell:
                raise DebugStateError(
                    f"{handle} runs on a subshell, which the debugger does not follow",
                    hint="only executions on the main shell (notebook cells, scratch code run "
                    "while the kernel is idle) pause at breakpoints",
                )
            return "paused"
        if ex.state not in ("failed", "interrupted"):
            raise DebugStateError(
                f"{handle} finished {ex.state}: there is nothing to examine after the fact",
                hint="set a breakpoint (`break CELL:LINE`) and run it again",
            )
        return "post_mortem"

    # -- breakpoint targets --------------------------------------------------------------------
    def _target(self, session: KernelSession, bp: commands.Breakpoint) -> dict[str, Any]:
        if bp.function is not None:
            return {"function": bp.function}
        if bp.text is not None:
            return {"text": bp.text}
        assert bp.location is not None and bp.line is not None
        location = bp.location
        if location.endswith(".py") or "/" in location:
            path = (session.cwd / location).resolve()
            if not path.is_file():
                raise UsageError(
                    f"no file {location} (looked at {path})",
                    hint="give a path relative to the notebook's directory, or absolute",
                )
            return {"file": str(path), "line": bp.line}
        if session.notebook is None:
            raise UsageError(
                f"kernel {session.kernel_id} has no notebook, so no cell {location}",
                hint="break FUNCTION or break FILE:LINE",
            )
        cell = read_notebook(session.notebook).resolve(location)
        # the source names the file the cell runs as: its functions stop there when called
        return {"cell_id": cell.cell_id, "line": bp.line, "source": cell.source}

    # -- results -------------------------------------------------------------------------------
    def _main_execution(self, session: KernelSession) -> Execution | None:
        running = [
            ex
            for ex in session.executions.values()
            if not ex.finished and not ex.subshell and ex.kind in ("cell", "scratch")
        ]
        return running[-1] if running else None

    def _handle_of(self, session: KernelSession, status: dict[str, Any], state: str) -> str | None:
        if state == "paused":
            ex = self._main_execution(session)
            return ex.handle if ex is not None else None
        msg_id = (status.get("post_mortem") or {}).get("msg_id")
        for ex in session.executions.values():
            if msg_id is not None and ex.msg_id == msg_id:
                return ex.handle
        return None

    def _mark(self, session: KernelSession, status: dict[str, Any]) -> None:
        ex = self._main_execution(session)
        if ex is None:
            return
        where = status.get("where") if status.get("state") == "paused" else None
        ex.paused = describe(where) if where else None

    def _result(
        self, session: KernelSession, command: str, reply: dict[str, Any], named: bool = False
    ) -> DebugResult:
        """``named``: the command named an execution (its frames are wanted, not what runs)."""
        status = reply["status"]
        self._mark(session, status)
        # The in-kernel debugger only knows of runs it follows (armed); the daemon knows every
        # main-shell execution: one running unpaused is "running", whatever the kernel says.
        running = self._main_execution(session) if status["state"] != "paused" else None
        if running is not None and running.started_at is None:
            running = None
        if running is not None:
            status = {**status, "state": "running", "reason": _running_reason(running)}
        if not reply.get("ok"):
            if running is not None and command.split()[:1] in (["where"], ["w"], ["bt"]):
                return _running_result(
                    command,
                    running.handle,
                    status,
                    [
                        "not paused, so no frames: `break CELL:LINE` (or FUNCTION) pauses "
                        "it where it passes next; `interrupt` stops it"
                    ],
                )
            raise DebugStateError(str(reply.get("error")), hint=_hint(status))
        if running is not None and (
            not reply.get("context") or (reply["context"] == "post_mortem" and not named)
        ):
            # what runs comes before the last failure's frames (named by handle, they answer)
            return _running_result(command, running.handle, status)
        state = reply.get("context") or status["state"]
        notes = []
        if reply.get("eval_error"):
            notes.append(f"evaluation failed: {reply['eval_error']}")
        where = reply.get("where") or status.get("where")
        frames = reply.get("frames")
        reason = status.get("reason")
        if state == "post_mortem":
            reason = (status.get("post_mortem") or {}).get("error") or reason
        return DebugResult(
            command=command,
            state=state,
            handle=self._handle_of(session, status, state),
            reason=reason,
            where=DebugFrame.model_validate(where) if where else None,
            frames=[DebugFrame.model_validate(f) for f in frames] if frames else None,
            frame=reply.get("frame"),
            value=reply.get("value"),
            locals=reply.get("locals"),
            source=reply.get("source"),
            breakpoints=list(status.get("breakpoints") or []),
            stop_on_raise=bool(status.get("stop_on_raise")),
            notes=notes,
        )

    async def _attach_finished(
        self, session: KernelSession, result: DebugResult, handle: str | None
    ) -> None:
        """After a resume: say whether the execution is still going, or how it ended."""
        if result.state == "paused":
            return
        ex = session.executions.get(handle) if handle else None
        if ex is None:
            ex = self._main_execution(session) or self._latest(session)
        if ex is None:
            return
        if not ex.finished:
            await ex.wait(2.0)
        replay = self.state(session).replay
        if ex.finished and replay is not None and not replay.done():
            # the replay's run_cells records the cell's run (its reads, its checkpoint) only
            # after the execution ends: answer once that is in, so the next plan sees it
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(replay), 10.0)
        if ex.finished:
            record = execution_record(session, ex)
            text = record.output.text
            result.handle = ex.handle
            result.notes.append(f"{ex.handle} finished {ex.state}")
            if text:
                result.notes.append(f"output: {text[-1500:]}")
            if record.error is not None:
                result.notes.append(f"error: {record.error.ename}: {record.error.evalue}")
        else:
            result.notes.append(
                f"{ex.handle} is still running; `status` (or read_cell) says when it pauses"
            )

    @staticmethod
    def _latest(session: KernelSession) -> Execution | None:
        main = [ex for ex in session.executions.values() if not ex.subshell]
        return main[-1] if main else None

    # -- following pauses ----------------------------------------------------------------------
    def _follow(self, session: KernelSession) -> None:
        """While anything is armed, keep one watcher on the main shell's executions."""
        state = self.state(session)
        if not state.armed or (state.watcher is not None and not state.watcher.done()):
            return
        state.watcher = asyncio.create_task(self._watch(session), name="ipykeep-debug-watch")

    async def _watch(self, session: KernelSession) -> None:
        view: Any = None
        quiet = 0
        while not session.closed and session.process.alive:
            if self._main_execution(session) is None:
                quiet += 1
                if quiet > 40:  # two seconds without a run on the main shell
                    return
                await asyncio.sleep(0.05)
                continue
            quiet = 0
            try:
                reply = await self._call(session, "wait", view, wait_s=WATCH_WAIT_S)
            except KernelBusyError:
                await asyncio.sleep(0.2)
                continue
            except IpykeepError as exc:
                log.info("debugger watcher of %s stopped: %s", session.kernel_id, exc)
                return
            self._mark(session, reply["status"])
            view = reply["status"]["view"]

    # -- replay --------------------------------------------------------------------------------
    async def _replay(
        self, session: KernelSession, command: str, target: tuple[str | None, int | None]
    ) -> DebugResult:
        if session.notebook is None:
            raise UsageError(
                f"kernel {session.kernel_id} has no notebook: only notebook cells replay",
                hint="set a breakpoint and run the code again",
            )
        if session.running():
            raise KernelBusyError(
                f"kernel {session.kernel_id} is running {', '.join(session.running())}",
                hint="wait for it, or interrupt it, then replay",
            )
        snap = read_notebook(session.notebook)
        ref, line = target
        cell = snap.resolve(ref) if ref is not None else self._last_failed_cell(session, snap)
        run = session.cell_runs.get(cell.cell_id)
        failed = session.executions.get(run.handle) if run else None
        ename = (failed.error or {}).get("ename") if failed and failed.state == "failed" else None
        if line is None and ename is None:
            raise DebugStateError(
                f"cell {cell.index} ({cell.cell_id}) did not fail in its last run",
                hint=f"give the line to stop at: replay {cell.cell_id} LINE",
            )
        unfixable, clobbered = self._inputs_changed(session, snap, cell)
        if unfixable:
            raise DebugStateError(
                f"cannot replay cell {cell.index}: the state it started from is gone "
                f"({'; '.join(unfixable)}); nothing was run",
                hint="run the stale cells (run_stale), run the cell, then debug its failure; "
                "the post-mortem of the last failure is still available (`where`)",
            )
        origin = "the live state (no value it reads changed since it started)"
        if clobbered:
            loaded, why = await self._load_before(session, snap, cell.cell_id, sorted(clobbered))
            if why:
                done = f"restored {', '.join(loaded)}; " if loaded else ""
                raise DebugStateError(
                    f"cannot replay cell {cell.index}: values it started from could not be "
                    f"restored ({'; '.join(f'{n}: {w}' for n, w in sorted(why.items()))}); "
                    f"{done}nothing was run",
                    hint="run the stale cells (run_stale), run the cell, then debug its "
                    "failure; the post-mortem of the last failure is still available (`where`)",
                )
            origin = f"its checkpointed start state ({', '.join(loaded)} restored)"
        spec = {"cell_id": cell.cell_id, "line": line, "types": [ename] if line is None else []}
        await self._call(session, "replay", spec)
        self.state(session).armed = True
        task = asyncio.create_task(
            self.engine.run_cells([cell.cell_id], session.kernel_id, wait_for_write=False)
        )
        self.state(session).replay = task
        reply = await self._await_pause(session, task)
        result = self._result(session, command, reply)
        where = f"line {line}" if line is not None else f"the {ename} it raised"
        result.notes.insert(
            0,
            f"replayed cell {cell.index} ({cell.cell_id}) from {origin}, stopping at {where}",
        )
        if result.state != "paused":
            await self._attach_finished(session, result, None)
            result.notes.append("the replay did not pause: this run did not reach that point")
        await self._disarm_if_idle(session)
        return result

    def _inputs_changed(
        self, session: KernelSession, snap: NotebookSnapshot, cell: Cell
    ) -> tuple[list[str], set[str]]:
        """How the live state differs from the one ``cell`` started from, by the staleness
        judge: (reasons no checkpoint can undo, names whose values a checkpoint can restore).

        Nothing differs when the cell is stale only because it failed (or was edited: the
        current source is what replays). A value clobbered since (by the failed run itself
        mutating it, or by scratch code) is a name to restore from the checkpoint of the cell
        above that wrote it; anything else (an upstream cell edited and re-run, a file changed)
        cannot be undone.
        """
        # judged as a cell that runs: a failed cell held back from the plan (it would fail
        # the same way again) still needs what its failed run changed in place restored
        reasons = self.engine.stale_reasons(session, snap, running=(cell.cell_id,)) or {}
        above = {c.cell_id for c in snap.code_cells if c.index < cell.index}
        position = {c.cell_id: c.index for c in snap.cells}

        def clobbered_before_the_replay(r: dict[str, Any]) -> bool:
            # by the cell itself, a cell above it, or something else (scratch code); a cell
            # below that will redo a mutation does not change what the cell started from
            by = [str(c) for c in r.get("cells") or ()]
            return not by or any(position.get(c, -1) <= cell.index for c in by)

        names: set[str] = set()
        for cid in above:
            for r in reasons.get(cid, []):
                if r.get("kind") == "restores" and clobbered_before_the_replay(r):
                    names.update(map(str, r.get("symbols") or ()))
        only_restoring = {
            cid
            for cid in above
            if reasons.get(cid)
            and all(
                r.get("kind") in RESTORABLE
                and (r.get("kind") != "restores" or clobbered_before_the_replay(r))
                for r in reasons[cid]
            )
        }
        unfixable = []
        for r in reasons.get(cell.cell_id, []):
            kind = r.get("kind")
            if kind in REPLAYABLE_REASONS:
                continue
            if kind in ("state_changed", "restores") and r.get("symbols"):
                names.update(map(str, r["symbols"]))
            elif kind == "upstream" and set(map(str, r.get("cells") or ())) <= only_restoring:
                continue  # restoring those cells' values is what undoes it
            else:
                unfixable.append(str(r.get("message") or kind))
        return unfixable, names

    async def _await_pause(self, session: KernelSession, task: asyncio.Task[Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REPLAY_WAIT_S
        view: Any = None
        while True:
            reply = await self._call(session, "wait", view, wait_s=0.5)
            status = reply["status"]
            if status["state"] == "paused" or loop.time() > deadline:
                return reply
            if task.done():
                with contextlib.suppress(Exception):
                    task.result()
                return await self._call(session, "status")
            view = status["view"]

    async def _disarm_if_idle(self, session: KernelSession) -> None:
        status = (await self._call(session, "status"))["status"]
        self.state(session).armed = bool(status["breakpoints"] or status["stop_on_raise"]) or (
            status["state"] == "paused"
        )
        self._follow(session)

    def _last_failed_cell(self, session: KernelSession, snap: NotebookSnapshot) -> Cell:
        ids = snap.by_id()
        failed = [
            (session.executions[r.handle].finished_at or 0.0, cid)
            for cid, r in session.cell_runs.items()
            if r.state == "failed" and cid in ids and r.handle in session.executions
        ]
        if not failed:
            raise UnknownCellError(
                "no notebook cell failed in this kernel",
                hint="name the cell to replay: replay CELL LINE",
            )
        return ids[max(failed)[1]]


def describe(where: dict[str, Any]) -> str:
    """``cell abc line 3`` or ``lib.py:12 in load``: where a paused execution stands."""
    if where.get("cell_id"):
        return f"cell {where['cell_id']} line {where['line']}"
    return f"{where.get('file')}:{where.get('line')} in {where.get('function')}"


def _running_result(
    command: str, handle: str, status: dict[str, Any], notes: list[str] | None = None
) -> DebugResult:
    """The answer while a main-shell cell runs unpaused: its handle, no frames."""
    return DebugResult(
        command=command,
        state="running",
        handle=handle,
        reason=status["reason"],
        breakpoints=list(status.get("breakpoints") or []),
        stop_on_raise=bool(status.get("stop_on_raise")),
        notes=notes or [],
    )


def _running_reason(ex: Execution) -> str:
    what = f"cell {ex.cell_id}" if ex.cell_id else f"{ex.kind} code"
    since = f" for {time.time() - ex.started_at:.0f} s" if ex.started_at is not None else ""
    return f"{ex.handle} is running ({what}){since}"


def _hint(status: dict[str, Any]) -> str:
    state = status.get("state")
    if state == "paused":
        return "the execution is paused: where, p EXPR, step, next, continue"
    if state == "post_mortem":
        return "the last failure's frames are kept: where, up, down, p EXPR, locals"
    if state == "running":
        return "an execution is running; it pauses at a breakpoint (status shows it)"
    return "run code that fails (then `where`), or set a breakpoint (`break CELL:LINE`)"
