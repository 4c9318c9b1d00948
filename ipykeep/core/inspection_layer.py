"""Inspection in the engine: typed summaries and the namespace listing, served over RPC.

The in-kernel module (``inspection/_inkernel/summarize.py``) is installed once per kernel
process and called silently through ``user_expressions``, so an inspection leaves no trace
(no execution count, no history, nothing for ipyflow to trace, no new globals). When the main
shell is busy the call goes to an ipykernel-7 subshell, so inspecting never waits for a long
cell; the time budget (``inspect_timeout``) is enforced inside the kernel.
"""

from __future__ import annotations

from typing import Any

from ..inspection import probe
from ..inspection.models import NamespaceListing, Summary
from .engine import Engine, KernelEntry
from .errors import KernelBusyError


class InspectionLayer:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def rpc_methods(self) -> dict[str, Any]:
        return {"inspect": self.inspect, "namespace": self.namespace}

    async def kernel_started(self, engine: Engine, entry: KernelEntry) -> None:
        await entry.process.eval_silent(probe.install_expression(), decode=False)

    async def kernel_restarted(self, engine: Engine, entry: KernelEntry) -> None:
        await self.kernel_started(engine, entry)

    def _cell_of(self, entry: KernelEntry) -> dict[str, str]:
        tracker = entry.hooks.get("tracker")
        return tracker.last_writers() if tracker is not None else {}

    async def _call(self, entry: KernelEntry, expression: str) -> str:
        budget = entry.config.inspect_timeout
        subshell = None
        if entry.main_lock.locked() or entry.running():
            subshell = await entry.process.acquire_subshell(entry.config.max_subshells)
            if subshell is None:
                raise KernelBusyError(
                    f"kernel {entry.kernel_id} is busy and every subshell is in use",
                    hint="retry when a running execution finishes",
                )
        try:
            text = await entry.process.eval_silent(expression, subshell_id=subshell, timeout=budget * 3 + 10, decode=False)
            if probe.needs_install(text):
                await entry.process.eval_silent(probe.install_expression(), subshell_id=subshell, decode=False)
                text = await entry.process.eval_silent(expression, subshell_id=subshell, timeout=budget * 3 + 10, decode=False)
            return text
        finally:
            if subshell is not None:
                entry.process.release_subshell(subshell)

    async def inspect(self, name: str, kernel_id: str | None = None, notebook: str | None = None) -> Summary:
        """A typed summary of ``name`` (a variable, or a safe path like ``df["col"]``)."""
        entry = self.engine._live(kernel_id, notebook)
        entry.touch()
        expr = probe.inspect_expression(
            name, entry.config.inspect_timeout, list(entry.config.summarizers), self._cell_of(entry)
        )
        return probe.parse_inspect_reply(await self._call(entry, expr))

    async def namespace(self, kernel_id: str | None = None, notebook: str | None = None) -> NamespaceListing:
        """Every user variable with type, shape/length, approximate memory and defining cell."""
        entry = self.engine._live(kernel_id, notebook)
        entry.touch()
        expr = probe.namespace_expression(entry.config.inspect_timeout, self._cell_of(entry))
        listing = probe.parse_namespace_reply(await self._call(entry, expr))
        for plugin in self.engine.plugins:  # checkpoints: what is saved, and its size
            if hasattr(plugin, "namespace_notes"):
                listing.notes.extend(plugin.namespace_notes(entry))
        return listing
