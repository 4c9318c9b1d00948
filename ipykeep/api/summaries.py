"""Typed records for variable summaries and namespace listings.

They mirror the JSON produced in the kernel by ``_inkernel/summarize.py`` (same protocol
version). Unknown fields are rejected so a drift between the two sides fails loudly in tests.
Dump with :meth:`compact` to keep answers small: unset fields and defaults are left out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JsonValue = Any


class _Compact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def compact(self) -> dict[str, Any]:
        """JSON-ready dict without None values or defaults (notes=[], degraded=False)."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)

    def compact_json(self) -> str:
        return self.model_dump_json(exclude_none=True, exclude_defaults=True)


class ColumnSummary(_Compact):
    """One column of a data frame (pandas, polars, pyarrow) or one xarray data variable."""

    name: JsonValue
    dtype: str
    nulls: int | None = None
    min: JsonValue = None
    max: JsonValue = None
    mean: JsonValue = None
    std: JsonValue = None
    unique: int | None = None
    #: Most frequent values as [value, count] pairs.
    top: list[list[JsonValue]] | None = None
    dims: list[str] | None = None
    error: str | None = None


class Summary(_Compact):
    """The common envelope plus kind-specific fields; only the fields of its kind are set."""

    name: str
    type: str
    #: dataframe, series, ndarray, polars_dataframe, tensor, arrow_table, xarray, scalar, text,
    #: container, module, class, function, object, or a custom summarizer's kind.
    kind: str
    degraded: bool = False
    degraded_reason: str | None = None
    notes: list[str] = Field(default_factory=list)
    memory_bytes: int | None = None
    #: The notebook cell that last defined the variable, when known.
    cell: str | None = None
    elapsed_ms: int | None = None

    shape: list[int] | None = None
    length: int | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    columns: list[ColumnSummary] | None = None
    columns_omitted: int | None = None
    more_columns: str | None = None
    dims: dict[str, int] | None = None
    coords: list[str] | None = None
    index: str | None = None
    series_name: JsonValue = None
    nulls: int | None = None
    stats: dict[str, JsonValue] | None = None
    #: Rows the statistics were computed from, when a sample of a large object was used.
    sample_rows: int | None = None
    sample: list[JsonValue] | None = None

    value: JsonValue = None
    lines: int | None = None
    preview: JsonValue = None
    key_types: dict[str, int] | None = None
    value_types: dict[str, int] | None = None
    item_types: dict[str, int] | None = None

    module: str | None = None
    file: str | None = None
    line: int | None = None
    version: str | None = None
    signature: str | None = None
    doc: str | None = None
    bases: list[str] | None = None
    methods: list[str] | None = None
    attributes: list[str] | None = None
    repr: str | None = None

    #: Label of the custom summarizer that produced ``custom``.
    summarizer: str | None = None
    custom: dict[str, JsonValue] | None = None


class NamespaceEntry(_Compact):
    name: str
    type: str
    kind: str
    shape: list[int] | None = None
    length: int | None = None
    dtype: str | None = None
    memory_bytes: int | None = None
    #: Short value for scalars and short strings.
    value: JsonValue = None
    cell: str | None = None
    degraded: bool = False
    degraded_reason: str | None = None


class NamespaceListing(_Compact):
    entries: list[NamespaceEntry]
    #: User variables in the kernel (may exceed ``len(entries)`` when the listing was capped).
    count: int
    degraded: bool = False
    notes: list[str] = Field(default_factory=list)
    elapsed_ms: int | None = None
