"""The tracer's edges only add to the floor: static analysis of each cell's current source plus
the kernel's evidence of its last run. Each case feeds two trackers the same runs, one with
ipyflow's record of each run (as ``ipyflow`` mode does) and one without (as ``static`` mode
does), edits the notebook, and checks the exact plan with the tracer and that it holds every
cell the plan without it holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ipykeep.staleness.models import DynamicCellInfo, NotebookCell, Observed, Plan
from ipykeep.staleness.tracker import StalenessTracker


def _stat(path: str) -> None:
    return None


def _dyn(
    cell_id: str, **names: frozenset[str] | set[str] | Mapping[str, frozenset[str]]
) -> DynamicCellInfo:
    fields = {k: (v if k == "parents" else frozenset(v)) for k, v in names.items()}  # type: ignore[arg-type]
    return DynamicCellInfo(cell_id, **fields)  # type: ignore[arg-type]


def _plans(
    sources: Sequence[tuple[str, str]],
    dynamic: Mapping[str, DynamicCellInfo],
    edits: Mapping[str, str],
    observed: Mapping[str, Observed] | None = None,
    scratch: str | None = None,
) -> tuple[Plan, Plan]:
    """(plan with the tracer's records, plan without them) after running every cell and editing."""
    observed = observed or {}
    plans = []
    for traced in (True, False):
        tracker = StalenessTracker()
        for i, (cid, src) in enumerate(sources):
            tracker.record_cell_run(
                cid,
                i,
                src,
                "ok",
                dynamic=dynamic.get(cid) if traced else None,
                observed=observed.get(cid),
            )
        if scratch is not None:
            tracker.record_scratch(scratch)
        cells = [
            NotebookCell(cid, i, "code", edits.get(cid, src))
            for i, (cid, src) in enumerate(sources)
        ]
        plans.append(tracker.plan(cells, _stat))
    return plans[0], plans[1]


def _assert_floor(traced: Plan, static: Plan, expected: Sequence[str]) -> None:
    assert traced.cell_ids == tuple(expected), traced
    assert not traced.blocked, traced.blocked
    assert set(static.cell_ids) <= set(traced.cell_ids)


def test_tracer_seeing_a_cell_read_its_own_new_value_does_not_block_it() -> None:
    # ``raw = …`` then ``raw.loc[…] = None``: the tracer reports raw used and mutated by the cell
    # that binds it; with no cell above defining raw, that must not block raw and its readers
    sources = [
        ("imp", "import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(42)"),
        ("size", "N = 600\nREGIONS = ['n', 's']"),
        (
            "raw",
            "raw = pd.DataFrame({'r': rng.choice(REGIONS, N)})\n"
            "raw.loc[rng.choice(N, 6, replace=False), 'r'] = None",
        ),
        ("use", "total = len(raw)"),
    ]
    dynamic = {
        "raw": _dyn(
            "raw",
            used={"raw", "REGIONS", "N", "pd", "np", "rng"},
            mutated={"raw"},
            parents={"imp": frozenset({"np", "pd", "rng"}), "size": frozenset({"REGIONS", "N"})},
        ),
        "use": _dyn("use", used={"raw", "rng"}, parents={"raw": frozenset({"raw", "rng"})}),
    }
    traced, static = _plans(sources, dynamic, {"size": "N = 700\nREGIONS = ['n', 's']"})
    _assert_floor(traced, static, ["size", "raw", "use"])


def test_a_name_only_the_tracer_saw_read_does_not_block_the_cell() -> None:
    # the tracer reports an ancestor of a value (tmp, set by scratch code) as read by a cell
    # whose source never names it: the cell stays planned as static analysis plans it
    sources = [("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y * 2")]
    dynamic = {"c": _dyn("c", used={"y", "tmp"})}
    traced, static = _plans(sources, dynamic, {"a": "x = 2"}, scratch="tmp = 5")
    _assert_floor(traced, static, ["a", "b", "c"])


def test_a_tracer_binding_does_not_remove_an_item_assignment() -> None:
    # ``d['k'] = x`` ran with the value d already held (the kernel saw no change) and the tracer
    # filed d as defined: d stays the cell's output, so the reader below follows it
    sources = [("a", "d = {'k': 1}"), ("x0", "x = 1"), ("b", "d['k'] = x"), ("c", "v = d['k']")]
    dynamic = {"b": _dyn("b", defined={"d"}, used={"x"})}
    nothing = Observed(frozenset(), frozenset(), frozenset(), frozenset())
    observed = {
        "b": nothing,
        "a": Observed(frozenset({"d"}), frozenset(), frozenset(), frozenset()),
    }
    traced, static = _plans(sources, dynamic, {"x0": "x = 2"}, observed=observed)
    _assert_floor(traced, static, ["a", "x0", "b", "c"])


def test_a_tracer_only_write_does_not_hide_the_producer_from_readers() -> None:
    # the tracer files X as written by b (which never names it): c still reads a's X through b
    sources = [("a", "X = 1"), ("b", "y = 2"), ("c", "z = X + 1")]
    dynamic = {"b": _dyn("b", defined={"y", "X"})}
    traced, static = _plans(sources, dynamic, {"a": "X = 2"})
    _assert_floor(traced, static, ["a", "b", "c"])


def test_tracer_edges_still_add_to_the_floor() -> None:
    # a read static analysis cannot see (``globals()['x']``) is still planned from the tracer
    sources = [("a", "x = 1"), ("b", "y = globals()['x'] + 1")]
    dynamic = {"b": _dyn("b", defined={"y"}, used={"x"})}
    traced, static = _plans(sources, dynamic, {"a": "x = 2"})
    _assert_floor(traced, static, ["a", "b"])
    assert static.cell_ids == ("a",)


def test_a_tracer_read_of_a_name_the_cell_does_not_name_is_no_edge() -> None:
    # the tracer reports x (an ancestor of a value, or a comprehension variable it filed as a
    # symbol) used by c, whose source never names it, while a real x is bound above: editing
    # x's cell must not plan c ("uses x from cell x0")
    sources = [("x0", "x = 1"), ("a", "y = 2"), ("c", "z = y * 2")]
    dynamic = {"c": _dyn("c", used={"y", "x"}, parents={"x0": frozenset({"x"}), "a": {"y"}})}
    traced, static = _plans(sources, dynamic, {"x0": "x = 5"})
    _assert_floor(traced, static, ["x0"])
    assert static.cell_ids == ("x0",)
