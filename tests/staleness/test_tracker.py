"""Staleness plans at the tracker level: each scenario drives a simulated notebook and checks the
exact set of planned cells and their reason kinds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ipykeep.staleness.models import DynamicCellInfo, FileStamp, NotebookCell
from ipykeep.staleness.tracker import StalenessTracker
from tests.staleness.sim import Sim, pipeline


def _edit_clean(sim: Sim) -> None:
    sim.run_all()
    sim.edit("clean", "clean = df.dropna(how='all')")


def _comment_edit(sim: Sim) -> None:
    sim.run_all()
    sim.edit("clean", "# drop the empty rows\nclean   =   df.dropna()   # keep the rest\n\n")


def _csv_changed(sim: Sim) -> None:
    sim.run_all()
    sim.touch("data.csv")


def _failed(sim: Sim) -> None:
    sim.failing.add("features")
    sim.run_all()


def _failed_then_fixed(sim: Sim) -> None:
    sim.failing.add("features")
    sim.run_all()
    sim.failing.clear()
    sim.run("features")


def _new_dependency(sim: Sim) -> None:
    sim.run_all()
    sim.edit("report", "summary = feats.describe()\nn = len(df)")


def _one_run_keeps_other_edits(sim: Sim) -> None:
    sim.run_all()
    sim.edit("clean", "clean = df.dropna(how='all')")
    sim.edit("report", "summary = feats.describe().T")
    sim.run("report")


def _rerun_upstream(sim: Sim) -> None:
    sim.run_all()
    sim.run("load")


def _kernel_restart(sim: Sim) -> None:
    sim.run_all()
    sim.tracker.kernel_restarted()


def _scratch_rebinds(sim: Sim) -> None:
    sim.run_all()
    sim.scratch("df = df.head(2)")


def _scratch_mutates(sim: Sim) -> None:
    sim.run_all()
    sim.scratch("df.drop(columns=['a'], inplace=True)")


def _scratch_new_name(sim: Sim) -> None:
    sim.run_all()
    sim.scratch("tmp = df.describe()\nprint(tmp)")


def _scratch_read_only(sim: Sim) -> None:
    sim.run_all()
    sim.scratch("df.head()\nlen(clean)")


def _new_cell(sim: Sim) -> None:
    sim.run_all()
    sim.insert(4, "extra", "top = feats.head()")


def _new_cell_redefines(sim: Sim) -> None:
    sim.run_all()
    sim.insert(1, "fix", "df = df[df.a > 0]")


def _delete_producer(sim: Sim) -> None:
    sim.run_all()
    sim.delete("features")


def _markdown_edit(sim: Sim) -> None:
    sim.insert(0, "title", "md:# Title")
    sim.run_all()
    sim.edit("title", "md:# A better title")
    sim.insert(3, "note", "md:some words")


def _warm_run_writes_file(sim: Sim) -> None:
    sim.sources.append(("save", 'summary.to_csv("out.csv")'))
    sim.writes["save"] = ["out.csv"]
    sim.run_all()


SCENARIOS: dict[str, tuple[Callable[[Sim], None], dict[str, set[str]]]] = {
    "warm run is at rest": (lambda s: s.run_all(), {}),
    "never run": (
        lambda s: None,
        {
            "load": {"never_run"},
            "clean": {"never_run", "upstream"},
            "features": {"never_run", "upstream"},
            "report": {"never_run", "upstream"},
        },
    ),
    "edit clean": (
        _edit_clean,
        {"clean": {"source_changed"}, "features": {"upstream"}, "report": {"upstream"}},
    ),
    "comment and whitespace edit": (_comment_edit, {}),
    "markdown edits": (_markdown_edit, {}),
    "warm run with a file written": (_warm_run_writes_file, {}),
    "csv changed": (
        _csv_changed,
        {
            "load": {"file_changed"},
            "clean": {"upstream"},
            "features": {"upstream"},
            "report": {"upstream"},
        },
    ),
    "failed then fixed": (_failed_then_fixed, {"report": {"state_changed"}}),
    "unexecuted edit adds a dependency": (_new_dependency, {"report": {"source_changed"}}),
    "running one cell keeps other edits": (
        _one_run_keeps_other_edits,
        {"clean": {"source_changed"}, "features": {"upstream"}, "report": {"upstream"}},
    ),
    "explicit re-run of upstream": (
        _rerun_upstream,
        {"clean": {"state_changed"}, "features": {"upstream"}, "report": {"upstream"}},
    ),
    "kernel restart": (
        _kernel_restart,
        {
            "load": {"kernel_restarted"},
            "clean": {"kernel_restarted", "upstream"},
            "features": {"kernel_restarted", "upstream"},
            "report": {"kernel_restarted", "upstream"},
        },
    ),
    "scratch rebinds df": (
        _scratch_rebinds,
        {
            "load": {"restores"},
            "clean": {"state_changed"},
            "features": {"upstream"},
            "report": {"upstream"},
        },
    ),
    "scratch mutates df": (
        _scratch_mutates,
        {
            "load": {"restores"},
            "clean": {"state_changed"},
            "features": {"upstream"},
            "report": {"upstream"},
        },
    ),
    "scratch defines a new name": (_scratch_new_name, {}),
    "scratch only reads": (_scratch_read_only, {}),
    "new cell": (_new_cell, {"extra": {"never_run"}}),
    "new cell redefines df": (
        _new_cell_redefines,
        {
            "fix": {"never_run"},
            "clean": {"upstream"},
            "features": {"upstream"},
            "report": {"upstream"},
        },
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_pipeline_scenarios(name: str) -> None:
    setup, expected = SCENARIOS[name]
    sim = pipeline()
    setup(sim)
    assert sim.kinds() == expected
    assert not sim.blocked()


def test_a_failed_cell_that_would_fail_again_is_reported_with_its_reader() -> None:
    sim = pipeline()
    _failed(sim)
    assert sim.kinds() == {}
    assert sim.blocked() == {"features": {"failed"}, "report": {"missing_producer"}}
    entry = sim.plan().entry("features")
    assert entry is not None and "would again" in entry.reasons[0].message
    # installing packages may make it succeed: it runs again, its reader after it
    sim.tracker.environment_changed()
    assert sim.kinds() == {"features": {"failed"}, "report": {"upstream"}}


def test_plan_then_run_reaches_rest() -> None:
    for name, (setup, _) in SCENARIOS.items():
        sim = pipeline()
        setup(sim)
        sim.failing.clear()
        sim.run_plan()
        assert sim.plan().is_empty, name


def test_edit_clean_messages_name_their_cause() -> None:
    sim = pipeline()
    _edit_clean(sim)
    plan = sim.plan()
    features = plan.entry("features")
    assert features is not None
    (reason,) = features.reasons
    assert reason.message == "uses clean from cell 1 (edited)"
    assert reason.cells == ("clean",) and reason.symbols == ("clean",)
    report = plan.entry("report")
    assert report is not None and report.reasons[0].message == "uses feats from cell 2 (stale)"
    assert [e.cell_id for e in plan.stale] == ["clean", "features", "report"]
    assert [f.cell_id for f in plan.fresh] == ["load"]
    assert features.produces == ("feats",)


def test_file_changed_reason_names_path() -> None:
    sim = pipeline()
    _csv_changed(sim)
    load = sim.plan().entry("load")
    assert load is not None
    assert load.reasons[0].path == "data.csv"
    assert "data.csv changed" in load.reasons[0].message


def test_deleted_file_is_a_change() -> None:
    sim = pipeline()
    sim.run_all()
    del sim.files["data.csv"]
    assert sim.kinds()["load"] == {"file_changed"}


def test_to_json_shape() -> None:
    sim = pipeline()
    _edit_clean(sim)
    js = sim.plan().to_json()
    assert set(js) == {"stale", "conditional", "fresh", "blocked"}
    first = js["stale"][0]
    assert set(first) == {"cell_id", "index", "reasons", "produces"}
    assert first["reasons"][0]["kind"] == "source_changed"
    assert js["fresh"] == [{"cell_id": "load", "index": 0}]


# ----------------------------------------------------------------------------- branches


def test_two_branches_do_not_touch_each_other() -> None:
    sim = Sim(
        [
            ("load", "import math\ndata = list(range(10))"),
            ("a1", "evens = [x for x in data if x % 2 == 0]"),
            ("b1", "odds = [x for x in data if x % 2]"),
            ("a2", "sum_evens = sum(evens)"),
            ("b2", "sum_odds = sum(odds)"),
        ]
    )
    sim.run_all()
    sim.edit("a1", "evens = [x for x in data if x % 4 == 0]")
    assert sim.kinds() == {"a1": {"source_changed"}, "a2": {"upstream"}}


# ----------------------------------------------------------------------------- files


def test_file_read_through_helper_in_another_cell() -> None:
    sim = Sim(
        [
            ("helpers", "import pandas as pd\ndef load(p):\n    return pd.read_csv(p)"),
            ("load", "df = load(PATH)"),
            ("use", "n = len(df)"),
        ]
    )
    sim.sources.insert(0, ("cfg", "PATH = 'data/in.csv'"))
    sim.files["/proj/data/in.csv"] = 1
    sim.reads["load"] = ["/proj/data/in.csv"]  # the audit hook charges the caller
    sim.run_all()
    assert sim.kinds() == {}
    sim.touch("/proj/data/in.csv")
    assert sim.kinds() == {"load": {"file_changed"}, "use": {"upstream"}}


def test_static_path_literal_counts_without_runtime_read() -> None:
    sim = Sim(
        [("load", 'import numpy as np\narr = np.load("weights.npy")'), ("use", "m = arr.mean()")]
    )
    sim.files["weights.npy"] = 1
    sim.run_all()
    assert sim.kinds() == {}
    sim.touch("weights.npy")
    assert sim.kinds() == {"load": {"file_changed"}, "use": {"upstream"}}


def test_file_written_then_read_by_a_later_cell() -> None:
    sim = Sim([("w", "a = 1"), ("r", "b = 2")])
    sim.writes["w"] = ["mid.csv"]
    sim.reads["r"] = ["mid.csv"]
    sim.run_all()
    assert sim.kinds() == {}
    sim.run("w")  # rewrites mid.csv
    assert sim.kinds() == {"r": {"file_changed"}}


def test_watch_path_named_by_a_cell() -> None:
    sim = Sim(
        [
            ("cfg", "import yaml\ncfg = yaml_load('settings.yaml')"),
            ("use", "x = cfg['a']"),
            ("other", "y = 1"),
        ]
    )
    sim.files["settings.yaml"] = 1
    sim.run_all()
    sim.tracker.watch("settings.yaml", sim.stat("settings.yaml"))
    assert sim.kinds() == {}
    sim.touch("settings.yaml")
    assert sim.kinds() == {"cfg": {"file_changed"}, "use": {"upstream"}}


def test_watch_path_no_cell_names_makes_every_cell_depend() -> None:
    sim = Sim([("a", "x = 1"), ("b", "y = x + 1")])
    sim.files["secret.bin"] = 1
    sim.run_all()
    sim.tracker.watch("secret.bin", sim.stat("secret.bin"))
    assert sim.kinds() == {}
    sim.touch("secret.bin")
    assert sim.kinds() == {"a": {"file_changed"}, "b": {"file_changed", "upstream"}}


# ----------------------------------------------------------------------------- redefinitions


def _redefined() -> Sim:
    return Sim(
        [
            ("a", "x = 1"),
            ("b", "y = x + 10"),
            ("c", "x = 2"),
            ("d", "z = x * 3"),
        ]
    )


def test_editing_earlier_definer_restores_later_one() -> None:
    sim = _redefined()
    sim.run_all()
    sim.edit("a", "x = 100")
    kinds = sim.kinds()
    assert kinds == {"a": {"source_changed"}, "b": {"upstream"}, "c": {"restores"}}
    c = sim.plan().entry("c")
    assert c is not None and c.reasons[0].message == "re-running cell 0 overwrites x"


def test_running_earlier_definer_alone_then_plan() -> None:
    sim = _redefined()
    sim.run_all()
    sim.edit("a", "x = 100")
    sim.run("a")
    assert sim.kinds() == {"b": {"state_changed"}, "c": {"restores"}}
    sim.run_plan()
    assert sim.plan().is_empty


def test_moved_reader_now_reads_other_definer() -> None:
    sim = _redefined()
    sim.run_all()
    sim.move("d", 2)  # d now sits between a and c
    kinds = sim.kinds()
    # d must read a's x, but the kernel holds c's: a restores first, then c has the last word
    assert kinds == {"a": {"restores"}, "d": {"moved"}, "c": {"restores"}}
    sim.run_plan()
    assert sim.plan().is_empty


def test_swapped_definers_is_moved() -> None:
    sim = Sim([("a", "x = 1"), ("b", "x = 2"), ("c", "y = 5")])
    sim.run_all()
    sim.move("b", 0)
    assert sim.kinds() == {"a": {"moved"}}


def test_independent_cells_swapped_stay_fresh() -> None:
    sim = Sim([("a", "x = 1"), ("b", "y = 2"), ("c", "z = x + y")])
    sim.run_all()
    sim.move("b", 0)
    assert sim.kinds() == {}


# ----------------------------------------------------------------------------- mutation


def _mutating() -> Sim:
    return Sim(
        [
            ("load", "import pandas as pd\ndf = pd.DataFrame({'a': [1, None]})"),
            ("peek", "head = df.head()"),
            ("clean", "df.dropna(inplace=True)"),
            ("feat", "df['b'] = df.a * 2"),
            ("report", "out = df.describe()"),
        ]
    )


def test_editing_in_place_mutation_restores_producer() -> None:
    sim = _mutating()
    sim.run_all()
    sim.edit("clean", "df.fillna(0, inplace=True)")
    kinds = sim.kinds()
    assert kinds == {
        "load": {"restores"},
        "clean": {"source_changed"},
        "feat": {"upstream"},
        "report": {"upstream"},
    }
    load = sim.plan().entry("load")
    assert load is not None and "changes df in place" in load.reasons[0].message


def test_mutation_chain_restores_every_earlier_mutator() -> None:
    sim = _mutating()
    sim.run_all()
    sim.edit("feat", "df['b'] = df.a * 3")
    assert sim.kinds() == {
        "load": {"restores"},
        "clean": {"restores"},
        "feat": {"source_changed"},
        "report": {"upstream"},
    }


def test_list_append_is_a_mutation() -> None:
    sim = Sim([("a", "lst = []"), ("b", "lst.append(1)"), ("c", "n = len(lst)")])
    sim.run_all()
    sim.run("b")  # appended twice now
    kinds = sim.kinds()
    assert kinds["a"] == {"restores"}
    assert kinds["b"] == {"state_changed"}
    sim.run_plan()
    assert sim.plan().is_empty


def test_function_mutating_a_global_counts_for_its_caller() -> None:
    sim = Sim(
        [
            ("a", "items = []"),
            ("f", "def add(v):\n    items.append(v)"),
            ("call", "add(3)"),
            ("use", "total = sum(items)"),
        ]
    )
    sim.run_all()
    sim.edit("call", "add(4)")
    assert sim.kinds() == {"a": {"restores"}, "call": {"source_changed"}, "use": {"upstream"}}


def test_function_body_reads_count_for_callers() -> None:
    sim = Sim(
        [
            ("k", "K = 3"),
            ("f", "def scale(v):\n    return v * K"),
            ("use", "r = scale(2)"),
            ("other", "s = 5"),
        ]
    )
    sim.run_all()
    sim.edit("k", "K = 4")
    assert sim.kinds() == {"k": {"source_changed"}, "use": {"upstream"}}


def test_editing_a_function_reruns_its_callers() -> None:
    sim = Sim([("f", "def g(v):\n    return v + 1"), ("use", "r = g(1)"), ("other", "t = 1")])
    sim.run_all()
    sim.edit("f", "def g(v):\n    return v + 2")
    assert sim.kinds() == {"f": {"source_changed"}, "use": {"upstream"}}


# ----------------------------------------------------------------------------- producers


def test_deleted_producer_blocks_dependents() -> None:
    sim = pipeline()
    sim.run_all()
    sim.delete("features")
    assert sim.kinds() == {}
    blocked = sim.plan().blocked
    assert [e.cell_id for e in blocked] == ["report"]
    assert blocked[0].reasons[0].kind == "missing_producer"
    assert "feats" in blocked[0].reasons[0].message


def test_reader_moved_above_its_only_producer_is_blocked() -> None:
    sim = pipeline()
    sim.run_all()
    sim.move("report", 0)
    assert sim.blocked() == {"report": {"missing_producer"}}


def test_name_only_from_scratch_is_missing_producer() -> None:
    sim = Sim([("a", "y = helper + 1")])
    sim.scratch("helper = 41")
    sim.run_all()
    assert sim.blocked() == {"a": {"missing_producer"}}


def test_builtins_are_not_missing() -> None:
    sim = Sim([("a", "print(len([1]))\nx = sorted({1})")])
    sim.run_all()
    assert sim.plan().is_empty and not sim.plan().blocked


# ----------------------------------------------------------------------------- other


def test_unparseable_cell_is_planned_and_defines_nothing() -> None:
    sim = Sim([("a", "x = 1"), ("b", "y = x +"), ("c", "z = 3")])
    sim.failing.add("b")
    sim.run_all()
    assert sim.kinds() == {}
    assert sim.blocked() == {"b": {"failed"}}


def test_cell_states() -> None:
    sim = pipeline()
    sim.failing.add("report")
    sim.run("load", "clean", "report")
    states = sim.tracker.cell_states(sim.cells(), sim.stat)
    assert states == {"load": "ok", "clean": "ok", "features": "never_run", "report": "stale"}
    sim2 = pipeline()
    sim2.failing.add("report")
    sim2.run_all()
    assert sim2.tracker.cell_states(sim2.cells(), sim2.stat)["report"] == "failed"


def test_dynamic_info_adds_edges() -> None:
    # a read static analysis cannot see (through getattr on globals()) reported by the tracer
    tracker = StalenessTracker()
    cells = [
        NotebookCell("a", 0, "code", "x = 1"),
        NotebookCell("b", 1, "code", "y = globals()['x'] + 1"),
    ]
    stat = lambda p: None  # noqa: E731
    tracker.record_cell_run("a", 0, cells[0].source, "ok")
    dyn = DynamicCellInfo("b", defined=frozenset({"y"}), used=frozenset({"x"}))
    tracker.record_cell_run("b", 1, cells[1].source, "ok", dynamic=dyn)
    assert tracker.plan(cells, stat).is_empty
    edited = [NotebookCell("a", 0, "code", "x = 2"), cells[1]]
    plan = tracker.plan(edited, stat)
    assert [e.cell_id for e in plan.stale] == ["a", "b"]
    assert plan.stale[1].reasons[0].kind == "upstream"


def test_interrupted_counts_as_failed() -> None:
    tracker = StalenessTracker()
    cells = [NotebookCell("a", 0, "code", "import time\ntime.sleep(10)")]
    tracker.record_cell_run("a", 0, cells[0].source, "interrupted")
    entry = tracker.plan(cells, lambda p: None).stale[0]
    assert entry.reasons[0].kind == "failed" and "interrupted" in entry.reasons[0].message


def test_plan_for_sixty_cells_lists_the_downstream_half() -> None:
    """The 60-cell chain of the ``plan_inspect`` benchmark (its time is measured there)."""
    sources = [
        ("c0", "import pandas as pd\nimport numpy as np\ndf0 = pd.DataFrame({'a': range(100)})")
    ]
    for i in range(1, 60):
        src = (
            f"def f{i}(v):\n    return v + df{i - 1}.a.sum()\n"
            f"df{i} = df{i - 1}.assign(b{i}=df{i - 1}.a * {i})\n"
            f"stats{i} = {{k: f{i}(k) for k in range(3)}}\n"
            f"df{i}['c'] = np.log1p(df{i}.a)  # mutation\n"
        )
        sources.append((f"c{i}", src))
    sim = Sim(sources)
    sim.run_all()
    sim.edit("c30", sim.source("c30") + "extra = 1\n")
    plan = sim.plan()
    assert [e.cell_id for e in plan.stale] == [f"c{i}" for i in range(30, 60)]


def test_stamps_compare_by_mtime_and_size() -> None:
    tracker = StalenessTracker()
    cells = [NotebookCell("a", 0, "code", "x = 1")]
    tracker.record_cell_run("a", 0, "x = 1", "ok", [FileStamp("f", 5, 7)])
    assert tracker.plan(cells, lambda p: FileStamp(p, 5, 7)).is_empty
    assert not tracker.plan(cells, lambda p: FileStamp(p, 5, 8)).is_empty
    assert not tracker.plan(cells, lambda p: None).is_empty


def test_scratch_code_has_an_analysis_cache_of_its_own() -> None:
    """A long session's one-off snippets (an agent's scratch code) neither push the notebook's
    cells out of their analysis cache nor grow the daemon's memory up to its size."""
    from ipykeep.staleness.analysis import analyze_scratch, analyze_source

    sim = pipeline()
    sim.run_all()
    analyze_source.cache_clear()
    analyze_scratch.cache_clear()
    for i in range(1_000):
        sim.scratch(f"probe_{i} = {i} * 2")
    assert analyze_source.cache_info().currsize == 0
    assert analyze_scratch.cache_info().currsize == analyze_scratch.cache_info().maxsize == 256
    sim.edit("clean", "clean = df.dropna(how='all')")
    assert sim.kinds() == {
        "clean": {"source_changed"},
        "features": {"upstream"},
        "report": {"upstream"},
    }
