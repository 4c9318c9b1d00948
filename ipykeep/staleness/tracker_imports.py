"""Whether an import gives the object the kernel holds, or loads a module's changed source anew.

The interpreter caches modules, so re-running ``import x`` (or another cell's identical import)
binds the object already loaded: such a re-run changes nothing for the readers. A module whose
source file changed is dropped from the cache before the plan runs, and the first import after
that loads it anew: then every cell importing it binds a new object.
"""

from __future__ import annotations

from ipykeep.staleness.graph import Graph
from ipykeep.staleness.models import Reason
from ipykeep.staleness.tracker_state import (
    CellDraft,
    NameWrite,
    RunRecord,
    TrackerState,
    cell_label,
)


def imports_alike(graph: Graph, name: str, a: str, b: str) -> bool:
    """Whether cells ``a`` and ``b`` bind ``name`` by importing the same thing."""
    wanted = graph.by_id[a].analysis.imports.get(name)
    return wanted is not None and wanted == graph.by_id[b].analysis.imports.get(name)


def module_changed(draft: CellDraft) -> bool:
    """Whether the cell is planned because a module source file it read changed."""
    return any(r.kind == "file_changed" and (r.path or "").endswith(".py") for r in draft.reasons)


def same_import_binding(graph: Graph, name: str, a: str, b: str, draft_a: CellDraft) -> bool:
    """Whether re-running cell ``a`` binds ``name`` to what cell ``b`` left: both import the
    same thing under it (``from scipy import stats`` twice), which the interpreter caches,
    and ``a`` is not planned because a module source file changed (see ``reimports``)."""
    return imports_alike(graph, name, a, b) and not module_changed(draft_a)


def reimports(graph: Graph, name: str, a: str, b: str, draft_a: CellDraft) -> bool:
    """Whether re-running ``a`` loads new code for the module that ``b`` imports under
    ``name`` too: ``b``'s binding then changes when it re-runs (it finds ``a``'s newly loaded
    module in the interpreter's cache), so its readers must re-run after it."""
    return imports_alike(graph, name, a, b) and module_changed(draft_a)


def run_imported(state: TrackerState, run: RunRecord | None, name: str, wanted: str | None) -> bool:
    """Whether ``run`` (an ok run in this kernel) bound ``name`` by importing ``wanted``."""
    return (
        wanted is not None
        and run is not None
        and run.epoch == state.epoch
        and run.outcome == "ok"
        and run.imports.get(name) == wanted
    )


def imported_as(
    state: TrackerState, graph: Graph, name: str, write: NameWrite | None, cell_id: str
) -> bool:
    """Whether ``write`` of ``name`` was a cell run's import of exactly what ``cell_id``
    imports under that name, in this kernel."""
    if write is None or write.origin != "cell" or write.cell_id is None:
        return False
    run = state.runs.get(write.cell_id)
    wanted = graph.by_id[cell_id].analysis.imports.get(name)
    return run_imported(state, run, name, wanted) and (
        run is not None and write.version == run.version_of(name)
    )


def reloaded_since(state: TrackerState, name: str, cell_id: str) -> bool:
    """Whether another cell's import bound ``name`` to a new object after ``cell_id`` last
    ran: the module was loaded again (its source changed and it was dropped from the
    interpreter's cache), so what ``cell_id``'s readers read is not what it gives now."""
    latest = state.writers.get(name)
    run = state.runs.get(cell_id)
    if (
        latest is None
        or run is None
        or latest.origin != "cell"
        or latest.cell_id in (None, cell_id)
    ):
        return False
    other = state.runs.get(latest.cell_id or "")
    return (
        other is not None
        and other.seq > run.seq
        and other.observed is not None
        and name in other.observed.bound
    )


def kernel_holds_import(state: TrackerState, graph: Graph, name: str, cell_id: str) -> bool:
    """Whether the kernel holds ``name`` as bound by a cell's run importing exactly what
    ``cell_id`` imports under that name (so the object ``cell_id`` would give), and that
    object is the one ``cell_id``'s own readers saw (see ``reloaded_since``)."""
    return imported_as(state, graph, name, state.writers.get(name), cell_id) and not (
        reloaded_since(state, name, cell_id)
    )


def reload_reason(graph: Graph, name: str, importer: str) -> Reason:
    """Why a cell importing ``name`` as ``importer`` does must re-run after it, with its
    readers: ``importer`` loads (or loaded) the module's changed source (``reimports``,
    ``reloaded_since``)."""
    return Reason(
        "upstream",
        f"imports {name} as {cell_label(graph, importer)} does, which loads its changed source",
        cells=(importer,),
        symbols=(name,),
    )
