"""Inspection as an engine collaborator: typed summaries and the namespace listing, served over RPC.

The in-kernel module (``inspection/_inkernel/summarize.py``) is installed once per kernel
process and called silently through ``user_expressions``, so an inspection leaves no trace
(no execution count, no history, nothing for ipyflow to trace, no new globals). When the main
shell is busy the call goes to an ipykernel-7 subshell, so inspecting never waits for a long
cell; the time budget (``inspect_timeout``) is enforced inside the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ipykeep.api import inspection as inspection_api
from ipykeep.api.spec import Bindings, bind
from ipykeep.api.summaries import NamespaceListing, Summary
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.session import KernelSession
from ipykeep.inspection import probe
from ipykeep.kernel.inkernel import INSPECT, InKernelModule
from ipykeep.kernel.providers.base import DataflowMode

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine


class InspectionService(SessionObserver):
    def __init__(
        self, engine: Engine, defining_cells: Callable[[KernelSession], dict[str, str]]
    ) -> None:
        self.engine = engine
        #: name -> the cell that last defined it; staleness knows, handed over by the composition
        #: root so inspection imports no other feature
        self._cell_of = defining_cells

    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return (INSPECT,)

    async def kernel_started(self, session: KernelSession) -> None:
        await session.process.install(*self.kernel_helpers(session.process.dataflow))

    async def kernel_restarted(self, session: KernelSession) -> None:
        await self.kernel_started(session)

    async def _call(self, session: KernelSession, expression: str) -> str:
        budget = session.config.inspect_timeout
        subshell = await session.side_subshell()
        try:
            text: str = await session.process.eval_silent(
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
        return probe.parse_inspect_reply(text)

    async def namespace(
        self, kernel_id: str | None = None, notebook: str | None = None
    ) -> NamespaceListing:
        """Every user variable with type, shape/length, approximate memory and defining cell."""
        session = self.engine.live(kernel_id, notebook)
        session.touch()
        expr = probe.namespace_expression(session.config.inspect_timeout, self._cell_of(session))
        text = await self._call(session, expr)
        listing = probe.parse_namespace_reply(text)
        for observer in self.engine.observers:  # checkpoints: what is saved, and its size
            listing.notes.extend(observer.namespace_notes(session))
        return listing

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (
            bind(inspection_api.INSPECT, self.inspect),
            bind(inspection_api.NAMESPACE, self.namespace),
        )
