"""Inspection as an engine collaborator: typed summaries and the namespace listing, served over RPC.

The in-kernel module (``inspection/_inkernel/summarize.py``) is installed once per kernel
process and called silently through ``user_expressions``, so an inspection leaves no trace
(no execution count, no history, nothing for ipyflow to trace, no new globals). When the main
shell is busy the call goes to an ipykernel-7 subshell, so inspecting never waits for a long
cell; the time budget (``inspect_timeout``) is enforced inside the kernel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ipykeep.api.errors import IpykeepError, KernelBusyError, UnknownNameError, UsageError
from ipykeep.api.summaries import NamespaceListing, Summary
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.session import KernelSession
from ipykeep.inspection import probe
from ipykeep.inspection.errors import InspectionError
from ipykeep.kernel.inkernel import INSPECT

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine


_SHARED: dict[str, type[IpykeepError]] = {
    "unknown_name": UnknownNameError,
    "bad_argument": UsageError,
}


@contextlib.contextmanager
def _shared_errors() -> Iterator[None]:
    """The inspection package's errors as the shared classes the RPC envelope carries."""
    try:
        yield
    except InspectionError as exc:
        cls = _SHARED.get(exc.code, IpykeepError)
        raise cls(exc.message, hint=exc.hint, details=exc.details or None) from None


class InspectionService(SessionObserver):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def kernel_started(self, session: KernelSession) -> None:
        await session.process.install(INSPECT)

    async def kernel_restarted(self, session: KernelSession) -> None:
        await self.kernel_started(session)

    @staticmethod
    def _cell_of(session: KernelSession) -> dict[str, str]:
        return session.staleness.tracker.last_writers()

    async def _call(self, session: KernelSession, expression: str) -> str:
        budget = session.config.inspect_timeout
        subshell = None
        if session.scheduler.main_lock.locked() or session.running():
            subshell = await session.process.acquire_subshell(session.config.max_subshells)
            if subshell is None:
                raise KernelBusyError(
                    f"kernel {session.kernel_id} is busy and every subshell is in use",
                    hint="retry when a running execution finishes",
                )
        try:
            text = await session.process.eval_silent(
                expression, subshell_id=subshell, timeout=budget * 3 + 10, decode=False
            )
            if probe.needs_install(text):
                await session.process.install(INSPECT, subshell_id=subshell, force=True)
                text = await session.process.eval_silent(
                    expression, subshell_id=subshell, timeout=budget * 3 + 10, decode=False
                )
            return text
        finally:
            if subshell is not None:
                session.process.release_subshell(subshell)

    async def inspect(
        self, name: str, kernel_id: str | None = None, notebook: str | None = None
    ) -> Summary:
        """A typed summary of ``name`` (a variable, or a safe path like ``df["col"]``)."""
        session = self.engine.live(kernel_id, notebook)
        session.touch()
        expr = probe.inspect_expression(
            name,
            session.config.inspect_timeout,
            list(session.config.summarizers),
            self._cell_of(session),
        )
        text = await self._call(session, expr)
        with _shared_errors():
            return probe.parse_inspect_reply(text)

    async def namespace(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> NamespaceListing:
        """Every user variable with type, shape/length, approximate memory and defining cell."""
        session = self.engine.live(kernel_id, notebook)
        session.touch()
        expr = probe.namespace_expression(session.config.inspect_timeout, self._cell_of(session))
        text = await self._call(session, expr)
        with _shared_errors():
            listing = probe.parse_namespace_reply(text)
        for observer in self.engine.observers:  # checkpoints: what is saved, and its size
            listing.notes.extend(observer.namespace_notes(session))
        return listing
