"""One live kernel and the client that drives it.

Launching is kept apart from driving (as jupyter_client's provisioning split does): a provider
(``providers/``: a local process, a kernel behind a Jupyter gateway, or one on a host reached
over SSH) starts the kernel and hands back a client with channels; this module routes every
shell reply and iopub message to the ``Execution`` that caused it, the same way for all of them.
Routing by parent msg_id lets the main shell and any number of ipykernel-7 subshells run at once
over one client.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import Any

from ipykeep.api.errors import (
    ExecutionLostError,
    ExecutionTimeoutError,
    KernelDiedError,
    KernelStartError,
    KernelUnresponsiveError,
)
from ipykeep.kernel import probe_bundle
from ipykeep.kernel.channels import route_replies
from ipykeep.kernel.execution import Execution
from ipykeep.kernel.inkernel import KERNEL_SETUP, InKernelModule, install_expression, install_order
from ipykeep.kernel.providers import KernelProvider, LaunchSpec, local_provider
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.kernel.providers.link import RemoteLink
from ipykeep.kernel.responsiveness import Responsiveness
from ipykeep.kernel.subshells import SubshellPool

log = logging.getLogger("ipykeep.kernel")

WARM_TRACEBACKS = KERNEL_SETUP.call("warm_tracebacks")

#: Seconds of iopub silence after the reply before a missing idle status is assumed lost.
IOPUB_QUIET = 3.0
#: Seconds the shell reply may trail the idle status before the execution is finished from its
#: iopub messages alone: waiting for a reply that never comes wedged the kernel. Replies that
#: arrive trail the idle status by a few ms (at most ~35 ms seen under 10-client load); the
#: losses once seen under load were the reader's missed wake-ups (see channels.CHANNEL_REPOLL).
REPLY_GRACE = 0.5
#: Seconds a subshell request may go unacknowledged (no busy status) before it is declared lost
#: and its subshell retired. Subshells are ipykeep's own, so nothing legitimate queues there.
SUBSHELL_START_TIMEOUT = 15.0
#: Seconds to wait for a re-established link to carry the kernel's output again.
LINK_PROBE_TIMEOUT = 20.0


async def pipelined(*steps: Awaitable[None]) -> None:
    """Run ``steps`` at once and wait for all of them; raise the first one's error, if any.

    Requests to one kernel's main shell are answered in the order they were sent, so steps that
    each send a request before their first wait reach the kernel in the order given, without
    one waiting a round trip for another's reply. Every step finishes before the error is
    raised: none is left running against a kernel the caller then shuts down.
    """
    outcomes = await asyncio.gather(*steps, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


class KernelProcess:
    """A started kernel: lifecycle through its provider, plus message routing."""

    def __init__(
        self,
        *,
        python: str,
        dataflow: DataflowMode,
        cwd: Path,
        name: str,
        provider: KernelProvider | None = None,
    ) -> None:
        self.python = python
        self.dataflow = dataflow
        self.cwd = cwd
        self.name = name
        self.provider: KernelProvider = provider or local_provider(
            LaunchSpec(name=name, python=python, dataflow=dataflow, cwd=cwd)
        )
        self.kc: Any = None
        self._pending: dict[str, Execution] = {}
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._idle: dict[str, asyncio.Future[None]] = {}
        self._control: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        #: the subshell each pending execution was sent to (None: the main shell)
        self._shell_of: dict[str, str | None] = {}
        self._link_tasks: set[asyncio.Task[None]] = set()  # see ``_link_up``
        self.alive = False
        self.generation = 0  # bumps on every (re)start
        self.installed_helpers: set[str] = set()
        self.on_death: Any = None  # callback(process) set by the owner
        self.on_foreign: Any = None  # callback(msg) for iopub from other clients (browser)
        self.on_notice: Any = None  # callback(text): something the user should be told
        self.subshells = SubshellPool(name, self._send_control)
        self.responsiveness = Responsiveness(name)
        self._link_ready = asyncio.Event()  # cleared while a re-established link is probed
        #: requests of ``send_silent`` not answered yet (the main shell answers them in order)
        self._silent_ahead: set[str] = set()
        self._link_ready.set()

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def unresponsive(self) -> str | None:
        """Why the kernel stopped answering (stopped process, no heartbeat), or None."""
        return self.responsiveness.reason

    def refuse_if_unresponsive(self) -> None:
        """Raise ``KernelUnresponsiveError`` while the kernel does not answer."""
        if self.responsiveness.reason is not None:
            raise KernelUnresponsiveError(self.responsiveness.reason, hint=self.responsiveness.fix)

    @property
    def pid(self) -> int | None:
        return self.provider.pid

    @property
    def connection_file(self) -> str | None:
        return self.provider.connection_file

    @property
    def location(self) -> str:
        return self.provider.location

    async def start(self, timeout: float = 60.0) -> None:
        self.kc = await self.provider.start(timeout)
        self.alive = True
        self.generation += 1
        self.installed_helpers = set(self.provider.preinstalled)
        self.subshells.reset()
        self.responsiveness.reset()
        self._tasks = [
            asyncio.create_task(self._route_iopub(), name=f"{self.name}-iopub"),
            asyncio.create_task(self._route_shell(), name=f"{self.name}-shell"),
            asyncio.create_task(self._route_control(), name=f"{self.name}-control"),
            asyncio.create_task(self._watch_alive(), name=f"{self.name}-alive"),
        ]
        # in this order, sent together (see ``pipelined``): the chdir precedes any other code
        steps = [self.install(KERNEL_SETUP, timeout=timeout)]
        if self.provider.kernel_cwd is not None:
            # A gateway starts kernels in its own directory (and a spare in the project's); the
            # in-kernel chdir makes relative paths in the notebook mean what they would locally.
            steps.append(self._chdir(self.provider.kernel_cwd))
        if self.dataflow == "ipyflow" and self.provider.kind == "gateway":
            steps.append(self._require_ipyflow())
        steps.append(self.warm_tracebacks())
        try:
            await pipelined(*steps)
        except BaseException:
            await self.shutdown(now=True)
            raise

    async def _require_ipyflow(self) -> None:
        """A gateway runs the server's kernel spec, which may be a plain ipykernel."""
        if not await self.eval_silent(
            "__import__('json').dumps('ipyflow' in __import__('sys').modules)"
        ):
            raise KernelStartError(
                f'the kernel at {self.location} does not run ipyflow, and dataflow is "ipyflow"',
                hint="set gateway_kernel_name to a kernel spec running "
                '`python -m ipyflow.kernel`, or dataflow = "static"',
            )

    async def _chdir(self, path: str) -> None:
        try:
            await self.eval_silent(f"__import__('json').dumps(__import__('os').chdir({path!r}))")
        except KernelDiedError as exc:
            raise KernelStartError(
                f"the kernel at {self.location} cannot work in {path}: {exc}",
                hint="create the directory where the kernel runs, "
                "or set `kernel_cwd` to a directory that exists there",
            ) from None

    async def _stop_tasks(self) -> None:
        self._tasks += list(self._link_tasks)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    async def shutdown(self, *, now: bool = False) -> None:
        await self._stop_tasks()
        self.alive = False
        await self.provider.shutdown(now=now)
        self.kc = None
        self._fail_pending("kernel shut down")

    async def restart(self) -> None:
        """Kill and start afresh (same process object, new generation)."""
        await self._stop_tasks()
        self.alive = False
        await self.provider.kill()
        self.kc = None
        self._fail_pending("kernel restarted")
        await self.start()

    def _fail_one(self, msg_id: str, why: str) -> None:
        if (ex := self._pending.pop(msg_id, None)) is not None:
            ex.finish("lost", note=why)
        for futures in (self._replies, self._idle):
            fut = futures.pop(msg_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(KernelDiedError(f"kernel {self.name}: {why}"))
                fut.exception()  # the waiter may take either one; neither is an unseen error

    def _fail_pending(self, why: str) -> None:
        for ex in list(self._pending.values()):
            ex.finish("lost", note=why)
        self._pending.clear()
        futures = (
            list(self._replies.values()) + list(self._idle.values()) + list(self._control.values())
        )
        for fut in futures:
            if not fut.done():
                fut.set_exception(KernelDiedError(f"kernel {self.name}: {why}"))
                fut.exception()  # a request's idle status may have no waiter left
        self._replies.clear()
        self._idle.clear()
        self._control.clear()

    async def _watch_alive(self) -> None:
        link: RemoteLink | None = getattr(self.provider, "link", None)
        if link is not None:
            link.on_down = lambda: self._link_down(link)
            link.on_up = self._link_up
        while True:
            await asyncio.sleep(0.5)
            try:
                alive = await self.provider.is_alive()
            except Exception:
                alive = False
            if not alive:
                self.alive = False
                self._fail_pending(self.provider.lost_reason or "kernel died")
                self._link_ready.set()  # held requests now fail: the kernel is not running
                if self.on_death:
                    self.on_death(self)
                return
            local = self.pid if self.provider.kind == "local" else None
            self.responsiveness.check(local_pid=local, client=self.kc)

    def _link_down(self, link: RemoteLink) -> None:
        """A remote kernel's connection dropped: hold new requests until it is back (they
        would be sent into the gap), keep the running ones, and say so."""
        self._link_ready.clear()
        if self.on_notice:
            self.on_notice(
                f"{link.where} dropped; it is being re-established for up to "
                f"{link.reconnect_for:g} s (remote_reconnect_s): the kernel keeps running "
                "there, running cells stay running, new requests wait"
            )

    def _link_up(self, notice: str, gap_note: str) -> None:
        """The connection is back: mark the gap in the output of the executions that ran across
        it (before what the kernel sends next), tell the user, and settle the rest in a task."""
        self._link_ready.clear()
        crossing = list(self._pending)
        for msg_id in crossing:
            self._pending[msg_id].add_note(gap_note)
        if self.on_notice:
            self.on_notice(notice)
        task = asyncio.create_task(self._after_reconnect(crossing), name=f"{self.name}-relink")
        self._link_tasks.add(task)
        task.add_done_callback(self._link_tasks.discard)

    async def _after_reconnect(self, crossing: list[str]) -> None:
        """Wait for output to flow again, let the held requests go, then find the executions
        that ended while the connection was down."""
        await self._probe_iopub()
        self._link_ready.set()
        shells: dict[str | None, list[str]] = {}
        for msg_id in crossing:
            shells.setdefault(self._shell_of.get(msg_id), []).append(msg_id)
        await asyncio.gather(*(self._fence(sid, ids) for sid, ids in shells.items()))

    async def _fence(self, subshell_id: str | None, msg_ids: list[str]) -> None:
        """An empty silent request on the shell the executions ran on: its reply follows the
        replies to every request sent there before it, so an execution still without one when
        it arrives ended while the connection was down (its reply went into the gap)."""
        try:
            fence_id, reply, idle = self._send_execute(
                "", silent=True, cell_id=None, subshell_id=subshell_id
            )
        except KernelDiedError:
            return
        try:
            await reply
        except Exception:
            return  # the kernel went away: its executions were failed with the reason
        finally:
            self._replies.pop(fence_id, None)
            if (fut := self._idle.pop(fence_id, None)) is not None and not fut.done():
                fut.cancel()
        for msg_id in msg_ids:
            waiting = self._replies.get(msg_id)
            if msg_id in self._pending and waiting is not None and not waiting.done():
                self._fail_one(
                    msg_id,
                    "it ended while the connection was down: its reply and its output after the "
                    "drop were not received, so its outcome is unknown; the kernel kept its "
                    "variables (check them, or run it again)",
                )

    async def _probe_iopub(self) -> None:
        """Wait until output reaches us again after a reconnect: zmq re-subscribes iopub
        asynchronously, and output published before that lands is dropped (slow joiner). As
        jupyter_client does on start, kernel_info is repeated until its status arrives; on the
        control channel, which a cell running on the main shell does not hold up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LINK_PROBE_TIMEOUT
        while loop.time() < deadline:
            msg = self.kc.session.msg("kernel_info_request", {})
            msg_id = msg["header"]["msg_id"]
            idle: asyncio.Future[None] = loop.create_future()
            self._idle[msg_id] = idle
            self.kc.control_channel.send(msg)
            try:
                await asyncio.wait_for(asyncio.shield(idle), 1.0)
                return
            except asyncio.TimeoutError:
                self._idle.pop(msg_id, None)
            except Exception:
                return  # the kernel went away: the alive watch reports it
        log.warning(
            "%s: no output from the kernel %g s after the link came back",
            self.name,
            LINK_PROBE_TIMEOUT,
        )

    # -- routing -----------------------------------------------------------------------------
    async def _route_iopub(self) -> None:
        while True:
            try:
                msg = await self.kc.get_iopub_msg()
            except asyncio.CancelledError:
                raise
            except Exception:  # pragma: no cover - socket closed during shutdown
                await asyncio.sleep(0.05)
                continue
            parent = msg.get("parent_header", {}).get("msg_id")
            ex = self._pending.get(parent)
            if ex is not None:
                ex.on_iopub(msg)
            elif self.on_foreign is not None and parent not in self._idle:
                self.on_foreign(msg)
            if (
                msg["header"]["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"
            ):
                fut = self._idle.pop(parent, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

    async def _route_shell(self) -> None:
        await route_replies(lambda **kw: self.kc.get_shell_msg(**kw), self._replies)

    async def _route_control(self) -> None:
        # One reader for the control channel: concurrent readers raced for each other's
        # replies ("internal error in execute: Empty").
        await route_replies(lambda **kw: self.kc.get_control_msg(**kw), self._control)

    # -- requests ----------------------------------------------------------------------------
    def _send_execute(
        self,
        code: str,
        *,
        silent: bool,
        cell_id: str | None,
        subshell_id: str | None,
        user_expressions: dict[str, str] | None = None,
    ) -> tuple[str, asyncio.Future[dict[str, Any]], asyncio.Future[None]]:
        if not self.alive:
            lost = self.provider.lost_reason
            raise KernelDiedError(
                f"kernel {self.name} is not running" + (f": {lost}" if lost else ""),
                hint="restart it (`ipykeep restart` / the restart_kernel tool) "
                "once it is reachable again"
                if lost
                else "start it again with `ipykeep start`",
            )
        self.refuse_if_unresponsive()  # nothing more is queued on a kernel that cannot answer
        content = {
            "code": code,
            "silent": silent,
            # Subshell code stays out of IPython's history: its sqlite history is written from
            # the main thread too, and IPython 8 reports concurrent writes into the output.
            "store_history": not silent and subshell_id is None,
            "user_expressions": user_expressions or {},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        msg = self.kc.session.msg("execute_request", content)
        if cell_id is not None:
            msg["metadata"]["cellId"] = cell_id
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        msg_id = msg["header"]["msg_id"]
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[dict[str, Any]] = loop.create_future()
        idle: asyncio.Future[None] = loop.create_future()
        self._replies[msg_id] = reply
        self._idle[msg_id] = idle
        self.kc.shell_channel.send(msg)
        return msg_id, reply, idle

    async def run(
        self,
        ex: Execution,
        *,
        subshell_id: str | None = None,
        timeout: float | None = None,
        untraced: bool = False,
    ) -> Execution:
        """Execute ``ex.code``; returns when the reply arrived and iopub went idle.

        Like nbclient, the reply and the idle status are awaited while the alive watcher fails
        them if the kernel dies. Nothing here cancels the execution: a caller that stops waiting
        leaves it running. ``ex.expressions`` travel as user_expressions (ipykeep's probes ride
        on the execution itself instead of costing round trips of their own); the kernel
        evaluates them only when the code succeeded. ``untraced`` sends the code silently
        through ``run_untraced`` (subshells of ipyflow kernels).

        Watchdogs keep a lost message from holding the shell: a reply missing after the idle
        status finishes the execution from its output after ``REPLY_GRACE``; a subshell request
        the kernel never acknowledges is declared lost after ``SUBSHELL_START_TIMEOUT``.
        """
        if untraced:
            # Empty silent code with the work in a user expression: ipyflow passes empty and
            # silent requests straight to IPython, and user expressions are plain evals (IPython's
            # AST transformers, where ipyflow instruments code, are not applied to them).
            code, expressions = "", {"ipykeep_untraced": KERNEL_SETUP.call("run_untraced", ex.code)}
        else:
            code, expressions = ex.code, probe_bundle.bundle(ex.expressions)
        await self._link_ready.wait()
        msg_id, reply, idle = self._send_execute(
            code,
            silent=untraced,
            cell_id=None if untraced else ex.cell_id or ex.handle,
            subshell_id=subshell_id,
            user_expressions=expressions,
        )
        ex.msg_id = msg_id
        ex.subshell = subshell_id is not None
        ex.queued_behind = subshell_id is None and bool(self._silent_ahead)
        self._pending[msg_id] = ex
        self._shell_of[msg_id] = subshell_id
        ex.start()
        try:
            msg = await self._await_reply(
                ex, msg_id, reply, idle, timeout, watch_start=subshell_id is not None
            )
            if msg is not None:
                ex.on_reply(msg["content"], split=None if untraced else probe_bundle.split)
            await self._drain_until_idle(ex, msg_id, idle)
            ex.finish(ex.outcome_after_idle())
        except KernelDiedError:
            ex.finish("lost", note="the kernel died while this ran")
        finally:
            self._pending.pop(msg_id, None)
            self._shell_of.pop(msg_id, None)
            self._replies.pop(msg_id, None)
            self._idle.pop(msg_id, None)
        return ex

    async def _await_reply(
        self,
        ex: Execution,
        msg_id: str,
        reply: asyncio.Future[dict[str, Any]],
        idle: asyncio.Future[None],
        timeout: float | None,
        *,
        watch_start: bool,
    ) -> dict[str, Any] | None:
        """The shell reply, or None when it never came although the execution went idle."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        while not reply.done():
            elapsed = loop.time() - began
            if idle.done():
                if idle.exception() is not None:
                    raise idle.exception()  # type: ignore[misc]
                try:
                    return await asyncio.wait_for(asyncio.shield(reply), REPLY_GRACE)
                except asyncio.TimeoutError:
                    self._replies.pop(msg_id, None)
                    log.warning(
                        "%s: no execute_reply for %s (subshell: %s) after idle; "
                        "finished from iopub",
                        self.name,
                        ex.handle,
                        ex.subshell,
                    )
                    # The output is complete (the idle status follows it), so this stays out of
                    # the output text; the archive keeps the note.
                    ex.notes.append(
                        "the kernel's reply never arrived; the state was taken from its messages"
                    )
                    ex.reply_lost = True
                    return None
            # A stopped kernel would hold this (and the caller) until cell_timeout, or forever.
            self.refuse_if_unresponsive()
            if timeout and elapsed >= timeout:
                raise ExecutionTimeoutError(
                    f"{ex.handle} did not finish within {timeout:g} s",
                    hint="it was interrupted; "
                    "raise cell_timeout in the configuration if it needs longer",
                )
            if watch_start and not ex.acknowledged and elapsed >= SUBSHELL_START_TIMEOUT:
                raise ExecutionLostError(
                    f"{ex.handle} was never started by the kernel "
                    f"(no reply or status within {SUBSHELL_START_TIMEOUT:g} s)",
                    hint="run it again; the kernel and its variables are unharmed",
                )
            step = 1.0 if timeout is None else max(0.01, min(1.0, timeout - elapsed))
            # FIRST_COMPLETED: the default (all completed) held every lost reply for a whole
            # step before the grace above even began.
            either: set[asyncio.Future[Any]] = {reply, idle}
            await asyncio.wait(either, timeout=step, return_when=asyncio.FIRST_COMPLETED)
        return reply.result()

    async def _drain_until_idle(
        self, ex: Execution, msg_id: str, idle: asyncio.Future[None]
    ) -> None:
        """After the reply, wait for the idle status while output keeps arriving.

        Outputs may trail the reply (they travel on another socket). If iopub stays quiet for
        ``IOPUB_QUIET`` seconds without the idle status, it was lost (as nbclient's
        ``iopub_timeout`` assumes): finish anyway rather than hold the shell forever.
        """
        while True:
            seen = len(ex.events)
            try:
                await asyncio.wait_for(asyncio.shield(idle), IOPUB_QUIET)
                return
            except asyncio.TimeoutError:
                if len(ex.events) == seen:
                    self._idle.pop(msg_id, None)
                    ex.add_note("the kernel's idle status never arrived; output may be incomplete")
                    return

    async def eval_silent(
        self,
        expression: str,
        *,
        setup: str = "",
        subshell_id: str | None = None,
        timeout: float = 30.0,
        decode: bool = True,
    ) -> Any:
        """Evaluate ``expression`` silently (no history, no ipyflow tracing).

        The expression must return a JSON string; it is decoded unless ``decode`` is False.
        """
        await self._link_ready.wait()
        sent = self._send_execute(
            setup,
            silent=True,
            cell_id=None,
            subshell_id=subshell_id,
            user_expressions={"r": expression},
        )
        return await self._silent_reply(sent, timeout, decode)

    def send_silent(
        self, expression: str, *, timeout: float = 30.0
    ) -> Coroutine[Any, Any, Any] | None:
        """``eval_silent`` in two halves, on the main shell: the request is sent before this
        returns — so the kernel answers it before any request sent afterwards — and the
        coroutine returned awaits its decoded answer. None (nothing sent) while the link to the
        kernel is being re-established: call ``eval_silent`` instead."""
        if not self._link_ready.is_set():
            return None
        sent = self._send_execute(
            "", silent=True, cell_id=None, subshell_id=None, user_expressions={"r": expression}
        )
        msg_id, reply, _ = sent
        self._silent_ahead.add(msg_id)
        reply.add_done_callback(lambda _: self._silent_ahead.discard(msg_id))
        return self._silent_reply(sent, timeout, True)

    async def _silent_reply(
        self,
        sent: tuple[str, asyncio.Future[dict[str, Any]], asyncio.Future[None]],
        timeout: float,
        decode: bool,
    ) -> Any:
        msg_id, reply, idle = sent
        try:
            msg = await asyncio.wait_for(reply, timeout)
        except asyncio.TimeoutError:
            self._replies.pop(msg_id, None)
            self._idle.pop(msg_id, None)
            raise ExecutionTimeoutError(
                f"helper call on {self.name} timed out after {timeout:g} s"
            ) from None
        finally:
            # silent requests still report busy/idle; the idle future is not needed
            fut = self._idle.pop(msg_id, None)
            if fut is not None and not fut.done():
                fut.cancel()
        content = msg["content"]
        if content.get("status") != "ok":
            raise KernelDiedError(
                f"helper code failed in {self.name}: "
                f"{content.get('ename')}: {content.get('evalue')}",
                hint="this is a bug in ipykeep's in-kernel helpers; please report it",
            )
        result = content.get("user_expressions", {}).get("r", {})
        if result.get("status") != "ok":
            raise KernelDiedError(
                f"helper expression failed in {self.name}: "
                f"{result.get('ename')}: {result.get('evalue')}",
                details={"traceback": result.get("traceback", [])[-3:]},
            )
        text = ast.literal_eval(result["data"]["text/plain"])
        return json.loads(text) if decode else text

    async def warm_tracebacks(self) -> None:
        """See ``_inkernel/kernel_setup.py``: keeps the first error after an import fast."""
        if self.alive:
            await self.eval_silent(WARM_TRACEBACKS, decode=False)

    async def install(
        self,
        *modules: InKernelModule,
        subshell_id: str | None = None,
        timeout: float = 30.0,
        force: bool = False,
    ) -> None:
        """Install in-kernel helpers (and those they require), each once per kernel process.

        ``force`` sends the install even for helpers this process installed, for a caller whose
        reply says the kernel lost one; the kernel still skips those it holds unchanged.
        """
        wanted = [
            m for m in install_order(modules) if force or m.name not in self.installed_helpers
        ]
        if not wanted:
            return
        expression = install_expression(*wanted)
        await self.eval_silent(expression, subshell_id=subshell_id, timeout=timeout, decode=False)
        self.installed_helpers.update(m.name for m in wanted)

    # -- subshells ---------------------------------------------------------------------------
    def _send_control(
        self, msg_type: str, content: dict[str, Any]
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a control request; the future resolves with its reply (see ``_route_control``)."""
        msg = self.kc.session.msg(msg_type, content)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._control[msg["header"]["msg_id"]] = fut
        try:
            self.kc.control_channel.send(msg)
        except Exception as exc:
            self._control.pop(msg["header"]["msg_id"], None)
            fut.set_exception(KernelDiedError(f"kernel {self.name}: control request failed: {exc}"))
        return fut

    async def acquire_subshell(self, limit: int) -> str | None:
        """A free subshell id, or None when all are busy (the caller then queues)."""
        return await self.subshells.acquire(limit, lambda: self.alive)

    def release_subshell(self, sid: str) -> None:
        self.subshells.release(sid)

    def retire_subshell(self, sid: str) -> None:
        """Stop using a subshell that lost a request (it may still be stuck on it)."""
        self.subshells.retire(sid)

    # -- signals -----------------------------------------------------------------------------
    async def interrupt(self) -> None:
        """SIGINT to a local or SSH kernel's process group; a gateway's interrupt endpoint."""
        if self.alive:
            await self.provider.interrupt()
