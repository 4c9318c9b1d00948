"""Staleness: which notebook cells must run so the kernel matches a fresh run of the notebook.

Pure logic (no I/O, no asyncio): source hashing, static def/ref analysis, the dataflow graph,
the per-kernel tracker that turns execution events into plans, and the host side of the
in-kernel probes (their sources live in ``_inkernel/``).
"""

from ipykeep.staleness.models import (
    DynamicCellInfo,
    FileStamp,
    FreshCell,
    NotebookCell,
    Observed,
    Plan,
    PlanEntry,
    Reason,
)
from ipykeep.staleness.tracker import StalenessTracker

__all__ = [
    "DynamicCellInfo",
    "FileStamp",
    "FreshCell",
    "NotebookCell",
    "Observed",
    "Plan",
    "PlanEntry",
    "Reason",
    "StalenessTracker",
]
