"""Typed variable inspection and namespace listing (models, probe protocol, custom summarizers)."""

from ipykeep.api.summaries import ColumnSummary, NamespaceEntry, NamespaceListing, Summary
from ipykeep.inspection.registry import summarizer

__all__ = [
    "ColumnSummary",
    "NamespaceEntry",
    "NamespaceListing",
    "Summary",
    "summarizer",
]
