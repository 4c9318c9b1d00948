"""Typed variable inspection and namespace listing (models, probe protocol, rendering)."""

from .models import ColumnSummary, NamespaceEntry, NamespaceListing, Summary
from .registry import summarizer
from .render import render_namespace, render_summary

__all__ = [
    "ColumnSummary",
    "NamespaceEntry",
    "NamespaceListing",
    "Summary",
    "render_namespace",
    "render_summary",
    "summarizer",
]
