"""Store or recompute: which cells are cheap (pure logic)."""

from __future__ import annotations

from ipykeep.checkpoints.cost import CheapCell, decide


def test_a_fast_cell_reading_nothing_saved_is_cheap() -> None:
    d = decide("a", 0.2, [None, "a"], {}, 1.0)
    assert d.cheap and d.recompute_s == 0.2 and d.chain == frozenset()


def test_a_slow_cell_is_saved() -> None:
    assert not decide("a", 1.5, [], {}, 1.0).cheap


def test_the_cheap_upstream_chain_counts() -> None:
    cheap = {"a": CheapCell(0.4, frozenset()), "b": CheapCell(0.4, frozenset({"a"}))}
    d = decide("c", 0.3, ["b"], cheap, 1.0)
    assert not d.cheap and d.chain == {"a", "b"} and abs(d.recompute_s - 1.1) < 1e-9
    assert decide("c", 0.1, ["b", "a"], cheap, 1.0).cheap  # a counted once


def test_a_fast_reader_of_a_saved_value_is_cheap_its_chain_starting_there() -> None:
    cheap = {"b": CheapCell(0.5, frozenset())}
    d = decide("c", 0.01, ["saved", "b"], cheap, 1.0)
    assert d.cheap and d.chain == {"b"} and abs(d.recompute_s - 0.51) < 1e-9


def test_threshold_zero_saves_every_cell() -> None:
    assert not decide("a", 0.0, [], {}, 0.0).cheap


def test_a_cell_whose_last_snapshot_cost_more_than_its_run_is_cheap() -> None:
    assert decide("a", 1.5, [], {}, 1.0, snapshot_s=2.0).cheap
    assert not decide("a", 1.5, [], {}, 1.0, snapshot_s=0.2).cheap
    assert not decide("a", 1.5, ["saved"], {}, 1.0, snapshot_s=0.2).cheap


def test_an_import_only_cell_is_cheap_however_slow() -> None:
    assert decide("imports", 3.0, [], {}, 1.0, imports_only=True).cheap
    # and counts for nothing in its readers' chains (the service records it with duration 0)
    assert decide("use", 0.2, ["imports"], {"imports": CheapCell(0.0, frozenset())}, 1.0).cheap
