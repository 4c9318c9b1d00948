"""What the engine tells its collaborators about a kernel's life, in a fixed order.

``SessionObserver`` is a no-op base class: a collaborator overrides the events it cares about.
The engine calls its observers in the order it was given them: the composition root declares
that order once, as data (``daemon/composition.py``'s ``OBSERVER_ORDER``), so staleness
records a cell before anything that reads the record. The events:

* ``kernel_helpers``: the in-kernel helpers the observer installs into every kernel of a
  dataflow mode; a pre-started kernel is given them while it waits, so its adoption sends
  only what depends on the notebook.
* ``kernel_started`` / ``kernel_restarted``: a new kernel process is up (install probes). All
  observers are told at once and awaited together, so their requests reach the kernel back to
  back (in the observers' order: each sends its first request before it waits); an observer
  relies on another's set-up only through the order of the requests, never by waiting for it.
* ``warm_starting`` / ``warm_finished``: around the warm-up batch.
* ``warm_cells``: which cells the warm-up batch runs; each observer may narrow the list it is
  given (checkpoints restore the fresh cells' values, and only the rest runs).
* ``cell_expressions`` / ``scratch_expressions``: probe expressions evaluated with each
  execution (their results arrive in ``Execution.expression_results``).
* ``before_cell``: a notebook cell is about to run; with ``may_load`` (a plan being executed)
  an observer may bring the cell up to date itself — load a stored run of it — and finish
  ``ex``, returning True: the cell then does not run, and ``after_cell`` is not called for it.
* ``after_cell`` / ``after_scratch``: an execution ended (``origin`` says who ran scratch code).
  An observer may leave work of ``after_cell`` pending on the kernel (a request sent, its answer
  not awaited: the next cell's request queues behind it on the main shell) until
* ``batch_finished``: a batch ran its last cell, still holding the main shell: what the
  observer left pending for its cells is finished (not told when the batch was cancelled).
* ``annotate_plan``: a stale plan is about to be shown — by ``run_stale``, or as the reasons of
  ``status`` and ``list_cells`` (its JSON, changed in place: reasons may be added); returns the
  seconds the observer's annotations save.
* ``kernel_lost``: the process died; ``kernel_closing``: the session is being closed.
* ``foreign_message``: iopub traffic of another client of the kernel (a browser).
* ``stale_reasons``: why each stale cell is stale, or None when the observer does not judge
  staleness (with no judge, a cell is stale when its source changed since it ran); ``running``:
  cells about to run by hand, judged as cells that run (a cell held back because it would fail
  the same way again is not held back, and what it reads or changes in place is restored).
* ``kernel_summary``: one line for the kernel's status record, or None (the first wins).
* ``namespace_notes``: lines added to the ``namespace`` listing.
* ``shutdown``: the daemon exits.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ipykeep.engine.session import KernelSession
    from ipykeep.kernel.execution import Execution
    from ipykeep.kernel.inkernel import InKernelModule
    from ipykeep.kernel.providers.base import DataflowMode
    from ipykeep.project.notebook import Cell, NotebookSnapshot

ScratchOrigin = Literal["scratch", "browser"]


class SessionObserver:
    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return ()

    async def kernel_started(self, session: KernelSession) -> None:
        return None

    async def warm_starting(self, session: KernelSession) -> None:
        return None

    async def warm_finished(self, session: KernelSession) -> None:
        return None

    async def warm_cells(
        self, session: KernelSession, snap: NotebookSnapshot, cell_ids: list[str]
    ) -> list[str]:
        return cell_ids

    def cell_expressions(self, session: KernelSession, cell: Cell) -> dict[str, str]:
        return {}

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        return {}

    async def before_cell(
        self, session: KernelSession, cell: Cell, ex: Execution, may_load: bool
    ) -> bool:
        return False

    async def after_cell(self, session: KernelSession, cell: Cell, ex: Execution) -> None:
        return None

    async def batch_finished(self, session: KernelSession) -> None:
        return None

    def annotate_plan(
        self, session: KernelSession, snap: NotebookSnapshot, plan_json: dict[str, Any]
    ) -> float:
        return 0.0

    async def after_scratch(
        self, session: KernelSession, ex: Execution, origin: ScratchOrigin = "scratch"
    ) -> None:
        return None

    async def kernel_restarted(self, session: KernelSession) -> None:
        return None

    def kernel_lost(self, session: KernelSession) -> None:
        return None

    async def kernel_closing(self, session: KernelSession) -> None:
        return None

    def foreign_message(self, session: KernelSession, msg: dict[str, Any]) -> None:
        return None

    def stale_reasons(
        self, session: KernelSession, snap: NotebookSnapshot, running: Collection[str] = ()
    ) -> dict[str, list[dict[str, Any]]] | None:
        return None

    def kernel_summary(self, session: KernelSession) -> str | None:
        return None

    def namespace_notes(self, session: KernelSession) -> list[str]:
        return []

    async def shutdown(self) -> None:
        return None
