"""The plan-versus-fresh-run estimate (pure function)."""

from __future__ import annotations

from ipykeep.staleness.plan_cost import Overhead, estimate


def test_plan_sums_last_runs_and_fresh_adds_the_restart():
    cost = estimate(["b", "c"], ["a", "b", "c"], {"a": 1.0, "b": 2.0, "c": 3.0}, {}, restart_s=1.5)
    assert cost.plan_s == 5.0 and cost.fresh_s == 7.5 and not cost.fresh_is_cheaper
    assert cost.to_json() == {
        "plan_s": 5.0,
        "fresh_s": 7.5,
        "restart_s": 1.5,
        "fresh_is_cheaper": False,
    }


def test_fresh_is_cheaper_when_cells_got_slower_than_in_the_last_fresh_run():
    # warm-up measured b at 1 s; its later runs in this kernel took 9 s
    cost = estimate(
        ["a", "b"], ["a", "b"], {"a": 1.0, "b": 9.0}, {"a": 1.0, "b": 1.0}, restart_s=2.0
    )
    assert cost.plan_s == 10.0 and cost.fresh_s == 4.0 and cost.fresh_is_cheaper


def test_nothing_is_claimed_for_cells_never_measured():
    cost = estimate(["new"], ["a", "new"], {"a": 1.0}, {"a": 1.0}, restart_s=0.1)
    assert cost.unmeasured == ("new",) and cost.fresh_s is None and not cost.fresh_is_cheaper
    assert estimate(["a"], ["a"], {"a": 5.0}, {}, restart_s=None).fresh_s is None


def test_the_plan_table_offers_the_fresh_run_when_it_is_cheaper():
    from ipykeep.client.render import render_plan

    entry = {
        "cell_id": "b",
        "index": 1,
        "reasons": [{"kind": "upstream", "message": "uses a"}],
        "produces": ["y"],
        "last_duration_s": 9.0,
    }
    cheaper = {"plan_s": 10.0, "fresh_s": 4.0, "restart_s": 2.0, "fresh_is_cheaper": True}
    text = render_plan(
        {"stale": [entry], "fresh": [], "blocked": [], "executed": False, "cost": cheaper}
    )
    assert "(9.00 s last run)" in text and "~4.00 s to restart and run every cell" in text
    assert "ipykeep run-stale --execute --fresh" in text
    dearer = {**cheaper, "fresh_s": 30.0, "fresh_is_cheaper": False}
    assert "--fresh" not in render_plan(
        {"stale": [entry], "fresh": [], "blocked": [], "cost": dearer}
    )


def test_conditional_cells_are_costed_apart_from_the_plan():
    cost = estimate(
        ["a"], ["a", "b", "c"], {"a": 1.0, "b": 4.0}, {}, restart_s=0.5, conditional=["b", "c"]
    )
    # the plan costs what will run; the conditional cells what they add if they run
    assert cost.plan_s == 1.0 and cost.conditional_s == 4.0
    assert cost.to_json()["conditional_s"] == 4.0
    assert cost.to_json()["conditional_unmeasured"] == ["c"]


def test_the_plan_table_lists_conditional_cells_apart_with_their_condition():
    from ipykeep.client.render import render_plan

    edited = {"cell_id": "t", "index": 1, "reasons": [{"kind": "source_changed", "message": "e"}]}
    reader = {
        "cell_id": "r",
        "index": 2,
        "reasons": [{"kind": "upstream", "message": "uses total from cell 1 (edited)"}],
        "condition": "re-runs only if total changes",
        "last_duration_s": 2.0,
    }
    cost = {"plan_s": 0.1, "conditional_s": 2.0, "fresh_is_cheaper": False}
    text = render_plan(
        {"stale": [edited], "conditional": [reader], "fresh": [], "blocked": [], "cost": cost}
    )
    assert "stale: 1 cell(s)" in text
    assert "conditional: 1 cell(s), run only if their inputs change" in text
    assert "re-runs only if total changes" in text
    assert "+ up to ~2.00 s if the conditional cells run" in text
    assert "nothing is stale" not in render_plan(
        {"stale": [], "conditional": [reader], "fresh": [], "blocked": []}
    )


def test_the_daemons_work_per_cell_counts_in_both_estimates():
    # ten short cells; executing a plan costs the daemon 0.5 s per cell (ipyflow's records,
    # re-plans), a fresh run 0.05 s per cell: eight re-runs cost more than restarting
    last = {c: 0.1 for c in "abcdefghij"}
    cost = estimate(
        list("abcdefgh"),
        list("abcdefghij"),
        last,
        last,
        restart_s=1.0,
        overhead=Overhead(plan=0.5, fresh=0.05),
    )
    assert round(cost.plan_s, 6) == 4.8 and round(cost.fresh_s or 0, 6) == 2.5
    assert cost.fresh_is_cheaper
    assert cost.to_json()["per_cell_overhead_s"] == {"plan": 0.5, "fresh": 0.05}
    # without the daemon's work the same plan looks cheaper (0.8 s against 2.0 s)
    assert not estimate(list("abcdefgh"), list("abcdefghij"), last, last, 1.0).fresh_is_cheaper


def test_an_unmeasured_overhead_borrows_the_other_or_counts_nothing():
    assert Overhead(plan=None, fresh=0.2).per_cell() == (0.2, 0.2)
    assert Overhead(plan=0.3, fresh=None).per_cell() == (0.3, 0.3)
    assert Overhead().per_cell() == (0.0, 0.0)
    assert Overhead.measure(5.0, [1.0, 1.0]) == 1.5
    assert Overhead.measure(1.0, [2.0]) == 0.0  # clocks apart: never negative
    assert Overhead.measure(3.0, []) is None
