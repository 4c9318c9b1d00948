"""The one module that knows ipyflow: its probe and the shapes of its answers.

ipyflow traces each execution whose execute_request metadata carries ``cellId`` and keeps, per
cell id, the symbols the cell wrote and used and the cells it read them from. The probe in
``staleness/_inkernel/ipyflow_probe.py`` reads that record (``cell(id)`` for one cell after it
ran, ``snapshot()`` for all); this module parses its replies into the staleness models. The
recorded replies under ``tests/fixtures/ipyflow/`` pin the shapes, so an ipyflow upgrade that
changes them fails a test.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ipykeep.kernel.inkernel import IPYFLOW
from ipykeep.staleness.analysis_model import is_kernel_name
from ipykeep.staleness.errors import ProbeError
from ipykeep.staleness.models import DynamicCellInfo
from ipykeep.staleness.probes import check_protocol

_BUILTINS = frozenset(dir(builtins))

#: names ipyflow may report as used that belong to the kernel, not to the notebook
_KERNEL_NAMES = frozenset({"get_ipython", "In", "Out", "exit", "quit", "display"})


def cell_expr(cell_id: str) -> str:
    """Expression returning what ipyflow recorded for the latest run of ``cell_id``."""
    return IPYFLOW.call("cell", cell_id)


def snapshot_expr() -> str:
    return IPYFLOW.call("snapshot")


def tracing_expr(enabled: bool) -> str:
    """Expression turning ipyflow's tracing on or off for the next executions (returns JSON).

    ``mut_settings.dataflow_enabled`` is the switch ``%flow enable/disable`` flips (ipyflow-core
    0.0.231); ipyflow resyncs symbols defined while it was off when tracing resumes.
    """
    return (
        '(setattr(__import__("ipyflow.singletons", fromlist=["flow"]).flow().mut_settings, '
        f'"dataflow_enabled", {bool(enabled)!r}) or \'"ok"\')'
    )


@dataclass(frozen=True)
class IpyflowSnapshot:
    available: bool
    cells: Mapping[str, DynamicCellInfo]
    #: global name -> id of the cell that last updated it
    last_writer: Mapping[str, str]
    #: cell id -> ipyflow's execution counter of its latest run
    counters: Mapping[str, int]


def _names(values: Any) -> frozenset[str]:
    if not isinstance(values, list):
        raise ProbeError(f"ipyflow probe: expected a list of names, got {type(values).__name__}")
    # IPython's history names (``_``, ``_5``, ``Out``…) are bound by any cell that ends in an
    # expression; as notebook names they would make every such cell "restore" every other
    # Builtins (``int`` passed to ``np.zeros``) are reported as symbols too; a notebook that
    # rebinds one is still seen by static analysis.
    return frozenset(
        n
        for n in (str(v) for v in values)
        if n not in _KERNEL_NAMES and not is_kernel_name(n) and n not in _BUILTINS
    )


def _cell_info(record: Mapping[str, Any]) -> DynamicCellInfo:
    try:
        parents_raw = record["parents"]
        parents = {str(pid): _names(syms) for pid, syms in parents_raw.items()}
        return DynamicCellInfo(
            cell_id=str(record["cell_id"]),
            defined=_names(record["defined"]),
            used=_names(record["used"]),
            mutated=_names(record["mutated"]),
            parents={k: v for k, v in parents.items() if v},
        )
    except (KeyError, AttributeError, TypeError) as exc:
        raise ProbeError(
            f"ipyflow probe: a cell record lacks a field ({exc})",
            hint="the installed ipyflow changed shape; update ipykeep or pin ipyflow-core",
        ) from exc


def parse_cell(payload: Mapping[str, Any]) -> DynamicCellInfo | None:
    """The decoded reply of ``cell(id)``: None when ipyflow is off or never saw the cell."""
    check_protocol(payload, IPYFLOW.protocol, "ipyflow")
    if not payload.get("available"):
        return None
    record = payload.get("cell")
    return None if record is None else _cell_info(record)


def parse_snapshot(payload: Mapping[str, Any]) -> IpyflowSnapshot:
    """The decoded reply of ``snapshot()``."""
    check_protocol(payload, IPYFLOW.protocol, "ipyflow")
    if not payload.get("available"):
        return IpyflowSnapshot(False, {}, {}, {})
    records = payload.get("cells", [])
    cells = {str(r["cell_id"]): _cell_info(r) for r in records}
    counters = {str(r["cell_id"]): int(r["counter"]) for r in records}
    last_writer = {str(k): str(v) for k, v in payload.get("last_writer", {}).items()}
    return IpyflowSnapshot(True, cells, last_writer, counters)
