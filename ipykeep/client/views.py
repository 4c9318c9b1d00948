"""Attribute access over a record's JSON, so one renderer serves records and plain dicts.

The daemon sends every record as ``model_dump(mode="json", exclude_none=True)``: each field is
present except those that are None. ``view()`` of that JSON therefore answers every attribute
a renderer reads exactly as the typed record would (a missing field is None), which lets the
thin CLI render results without importing pydantic or the record models.
"""

from __future__ import annotations

from typing import Any


class RecordView(dict[str, Any]):
    """A dict whose keys also read as attributes; a missing key reads as None."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return view(self.get(name))


def view(value: Any) -> Any:
    """``value`` with every nested dict readable by attribute (lists are copied, scalars kept)."""
    if isinstance(value, RecordView):
        return value
    if isinstance(value, dict):
        return RecordView(value)
    if isinstance(value, list):
        return [view(v) for v in value]
    return value
