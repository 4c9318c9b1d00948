"""What batches and scratch runs need of the engine, and nothing more.

``batch`` and ``scratch`` take this narrow interface instead of the engine, so neither can
reach the kernel registry or call back into the engine's other methods; the engine satisfies
it as it stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ipykeep.api.records import InterruptResult
    from ipykeep.engine.observer import SessionObserver
    from ipykeep.engine.session import KernelSession
    from ipykeep.kernel.execution import Execution
    from ipykeep.project.notebook import Cell


class ExecutionRunner(Protocol):
    @property
    def observers(self) -> tuple[SessionObserver, ...]:
        """The feature services, in the order they observe (told of every execution)."""
        ...

    def new_execution(self, session: KernelSession, code: str, kind: Any, **kw: Any) -> Execution:
        """A new tracked execution with a fresh handle (not started)."""
        ...

    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        """The probe expressions every observer evaluates with a notebook cell."""
        ...

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        """The probe expressions every observer evaluates with scratch ``code``."""
        ...

    async def interrupt_execution(self, session: KernelSession, ex: Execution) -> InterruptResult:
        """Interrupt ``ex``; kill and restart the kernel if it ignores the interrupt."""
        ...
