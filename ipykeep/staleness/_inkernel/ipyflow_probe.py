"""Reads ipyflow's dataflow record for the current kernel session.

Sent into an ipyflow kernel as source and installed once as a module; only ipyflow and the
standard library are used, and every public function returns a JSON string. ipyflow names a
cell by the ``cellId`` of its execute_request metadata; executions without one get integer
placeholder ids and are left out. Symbols are reported by their top-level name (``df`` for
``df.col``), and ``mutated`` lists names whose members (attributes, items) a cell wrote.
"""

import json

PROTOCOL_VERSION = 1


def _flow_and_cells():
    try:
        from ipyflow.data_model.cell import cells
        from ipyflow.flow import NotebookFlow
        from ipyflow.singletons import flow
    except Exception:
        return None, None
    if not NotebookFlow.initialized():
        return None, None
    return flow(), cells()


_KERNEL_NAMES = frozenset({"display", "fake_edge_sym", "get_ipython", "In", "Out"})


def _split(sym):
    """(top-level name, whether the symbol is a member of something) for a Symbol.

    Symbols local to a function (its parameters and variables) are not module names and give
    an empty name, as do ipyflow's internal ones (``<pandas>`` module stand-ins, the fake edge).
    """
    try:
        if not sym.containing_scope.is_globally_accessible:
            return "", False
        name = sym.readable_name
    except Exception:
        return "", False
    cut = len(name)
    for sep in (".", "["):
        pos = name.find(sep)
        if 0 <= pos < cut:
            cut = pos
    base = name[:cut]
    if not base.isidentifier() or base in _KERNEL_NAMES:
        return "", False
    return base, cut < len(name)


def _names(syms):
    return sorted({n for n in (_split(s)[0] for s in syms) if n})


def _cell_record(cell, flow_):
    fake = getattr(flow_, "fake_edge_sym", None)
    defined: set[str] = set()
    mutated: set[str] = set()
    for sym in list(cell.dynamic_writes):
        base, member = _split(sym)
        if base:
            (mutated if member else defined).add(base)
    parents = {}
    for pid, syms in dict(cell.raw_dynamic_parents).items():
        if isinstance(pid, str):
            parents[pid] = _names(s for s in syms if s is not fake)
    children = {}
    for cid, syms in dict(cell.raw_dynamic_children).items():
        if isinstance(cid, str):
            children[cid] = _names(s for s in syms if s is not fake)
    return {
        "cell_id": cell.cell_id,
        "counter": cell.cell_ctr,
        "error": cell.is_error,
        "defined": sorted(defined),
        "mutated": sorted(mutated - defined),
        "used": _names(s for s in cell.used_symbols if s is not fake),
        "parents": parents,
        "children": children,
    }


def _unavailable():
    return json.dumps({"protocol": PROTOCOL_VERSION, "available": False})


def cell(cell_id):
    """The latest execution of one cell, or ``"cell": null`` when ipyflow never saw it."""
    flow_, cells_ = _flow_and_cells()
    if flow_ is None:
        return _unavailable()
    found = cells_.from_id_nullable(cell_id)
    record = _cell_record(found, flow_) if found is not None else None
    return json.dumps({"protocol": PROTOCOL_VERSION, "available": True, "cell": record})


def snapshot():
    """Every cell ipyflow knows by id, and which cell last updated each global symbol."""
    flow_, cells_ = _flow_and_cells()
    if flow_ is None:
        return _unavailable()
    records = []
    for c in list(cells_.current_cells_for_each_id()):
        if isinstance(c.cell_id, str):
            records.append(_cell_record(c, flow_))
    records.sort(key=lambda r: r["counter"])
    last_writer = {}
    for sym in list(flow_.global_scope.all_symbols_this_indentation()):
        try:
            if sym.is_anonymous or not isinstance(sym.name, str) or not sym.name.isidentifier():
                continue
            ctr = sym.timestamp.cell_num
            writer = cells_.at_counter(ctr).cell_id if ctr > 0 else None
        except Exception:
            continue
        if isinstance(writer, str):
            last_writer[sym.name] = writer
    return json.dumps(
        {
            "protocol": PROTOCOL_VERSION,
            "available": True,
            "cells": records,
            "last_writer": dict(sorted(last_writer.items())),
        }
    )
