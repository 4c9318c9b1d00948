"""``StalenessTracker.still_planned``: the answer that spares executing a plan a re-plan before
each cell must never say "still planned" of a cell a full re-plan would drop.

Each scenario executes its plan cell by cell as ``run_stale(execute=True)`` does: before a cell
runs, a full re-plan decides whether it still runs; wherever ``still_planned`` answers yes, the
re-plan must list the cell too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipykeep.staleness.models import Observed
from tests.staleness.sim import Sim
from tests.staleness.test_plan_fixed_point import edited, notebooks


def _execute_checking(sim: Sim, rounds: int = 1) -> tuple[int, int]:
    """Execute ``sim``'s plan one cell at a time, in up to ``rounds`` rounds as an execute does;
    (cells run, cells ``still_planned`` answered)."""
    ran = answered = 0
    for _ in range(rounds):
        plan = sim.plan()
        entries = {e.cell_id: e for e in plan.stale + plan.conditional}
        since = sim.tracker.seq
        for cid in plan.runnable_ids:
            kept = cid in sim.plan().cell_ids
            if sim.tracker.still_planned(cid, entries[cid].reasons, since):
                answered += 1
                assert kept, f"{cid}: still_planned said yes, a re-plan drops it"
            if kept:
                sim.run(cid)
                ran += 1
    return ran, answered


def _chain(n: int) -> Sim:
    sim = Sim([("c0", "v0 = 0")] + [(f"c{i}", f"v{i} = v{i - 1} + 1") for i in range(1, n)])
    sim.run_all()
    sim.edit("c0", "v0 = 1")
    return sim


def _fan(n: int) -> Sim:
    sim = Sim([("c0", "v0 = 0")] + [(f"c{i}", f"v{i} = v0 + {i}") for i in range(1, n)])
    sim.run_all()
    sim.edit("c0", "v0 = 1")
    return sim


def test_an_edit_flowing_down_a_chain_or_a_fan_needs_no_re_plan() -> None:
    for sim in (_chain(30), _fan(30)):
        assert _execute_checking(sim) == (30, 29)
        assert sim.plan().is_empty


def _print_only_edit() -> Sim:
    # the kernel sees x rebound to an equal value: its readers leave the plan
    sim = Sim(
        [("a", "x = [1, 2]\nprint('hi')"), ("b", "y = len(x)"), ("c", "z = y + 1")],
        observed={"a": Observed(bound=frozenset({"x"}))},
    )
    sim.run_all()
    sim.edit("a", "x = [1, 2]\nprint('hello')")
    sim.observed["a"] = Observed()
    return sim


def _redefinition() -> Sim:
    sim = Sim([("iris", "X = [1, 2, 3]"), ("use", "n = len(X)"), ("wine", "X = [4, 5]")])
    sim.run_all()
    sim.edit("use", "n = len(X) + 1")
    return sim


def _self_rebinding() -> Sim:
    sim = Sim([("load", "rows = [1, 2, 3, 4, 5]"), ("trim", "rows = rows[1:]"), ("n", "n = 1")])
    sim.run_all()
    sim.edit("trim", "rows = rows[2:]")
    return sim


def _scratch_clobber() -> Sim:
    sim = Sim([("a", "x = 1"), ("b", "y = x + 1"), ("c", "w = y * 2")])
    sim.run_all()
    sim.scratch("x = 5")
    return sim


def _diamond() -> Sim:
    sim = Sim(
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "z = x * 2"),
            ("d", "w = y + z"),
            ("e", "q = w - 1"),
        ]
    )
    sim.run_all()
    sim.edit("a", "x = 2")
    return sim


@pytest.mark.parametrize(
    "make", [_print_only_edit, _redefinition, _self_rebinding, _scratch_clobber, _diamond]
)
def test_still_planned_never_keeps_a_cell_a_re_plan_drops(make: Callable[[], Sim]) -> None:
    sim = make()
    _execute_checking(sim)
    assert sim.plan().is_empty


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_still_planned_agrees_with_a_re_plan_on_generated_notebooks(data: st.DataObject) -> None:
    """The generated notebooks of ``test_plan_fixed_point`` (aliases, in-place mutations,
    redefinitions, self-rebinding), run, edited (constants, inserted and deleted cells) and
    executed as an execute does, without a kernel."""
    base = data.draw(notebooks())
    before, after = data.draw(edited(base))
    imports = [("imports", "import numpy as np")]
    sim = Sim(imports + [(cid, stmt.code("")) for cid, stmt in before])
    sim.run_all()
    sim.sources = imports + [(cid, stmt.code("")) for cid, stmt in after]
    _execute_checking(sim, rounds=3)


def test_a_reader_whose_input_kept_its_value_is_left_to_the_re_plan() -> None:
    sim = _print_only_edit()
    assert _execute_checking(sim) == (1, 0)
    assert sim.plan().is_empty  # only the edited cell runs; nothing was answered early
