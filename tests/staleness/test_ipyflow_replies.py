"""The adapter's parser against replies recorded from a real ipyflow kernel (see
tests/staleness/test_ipyflow_adapter.py): an ipyflow upgrade that changes their shape fails here."""

import json
from pathlib import Path

import pytest

from ipykeep.staleness import ipyflow as ipyflow_adapter
from ipykeep.staleness.probes import ProbeError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ipyflow"


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_cell_reply() -> None:
    info = ipyflow_adapter.parse_cell(_load("cell_c-clean.json"))
    assert info is not None
    assert info.cell_id == "c-clean"
    assert info.used == {"df", "factor"}
    assert dict(info.parents) == {"c-load": frozenset({"df"}), "c-side": frozenset({"factor"})}


def test_helper_call_edge() -> None:
    info = ipyflow_adapter.parse_cell(_load("cell_c-side.json"))
    assert info is not None and info.parents == {"c-helper": frozenset({"read_side"})}


def test_snapshot_reply() -> None:
    snap = ipyflow_adapter.parse_snapshot(_load("snapshot.json"))
    assert snap.available
    assert list(snap.counters) == ["c-load", "c-helper", "c-side", "c-clean", "c-report"]
    assert snap.last_writer["df"] == "c-clean" and snap.last_writer["factor"] == "c-side"
    assert "pd" in snap.cells["c-load"].used


def test_unavailable_and_protocol() -> None:
    assert ipyflow_adapter.parse_cell({"protocol": 1, "available": False}) is None
    assert not ipyflow_adapter.parse_snapshot({"protocol": 1, "available": False}).available
    with pytest.raises(ProbeError, match="protocol"):
        ipyflow_adapter.parse_cell({"protocol": 99, "available": True, "cell": None})


def test_changed_shape_is_an_error() -> None:
    payload = _load("cell_c-clean.json")
    del payload["cell"]["parents"]
    with pytest.raises(ProbeError, match="lacks a field"):
        ipyflow_adapter.parse_cell(payload)
