"""Plans with runtime evidence, restores before re-reads, transitive blocking and IPython's
own names: tracker-level scenarios (the kernel-level ones are in
tests/staleness/test_staleness_evidence.py)."""

from __future__ import annotations

from ipykeep.staleness.models import Observed
from tests.staleness.sim import Sim


def test_self_rebinding_edit_restores_its_input_first() -> None:
    sim = Sim(
        [("load", "rows = [1, 2, 3, 4]"), ("trim", "rows = rows[1:]"), ("n", "n = len(rows)")]
    )
    sim.run_all()
    sim.edit("trim", "rows = rows[2:]")
    assert sim.kinds() == {"load": {"restores"}, "trim": {"source_changed"}, "n": {"upstream"}}
    entry = sim.plan().entry("load")
    assert entry is not None and "its own earlier result" in entry.reasons[0].message
    sim.run_plan()
    assert sim.plan().is_empty


def test_reader_of_a_redefined_name_restores_the_earlier_definer() -> None:
    sim = Sim(
        [
            ("iris", "X = load_iris()"),
            ("fit", "m = fit(X)"),
            ("synth", "X = make_data()"),
            ("fit2", "m2 = fit(X)"),
        ]
    )
    sim.run_all()
    sim.edit("fit", "m = fit(X, C=2)")
    # fit must see iris's X, but the kernel holds synth's: iris re-runs, then synth restores
    assert sim.kinds() == {"iris": {"restores"}, "fit": {"source_changed"}, "synth": {"restores"}}
    assert sim.plan().cell_ids == ("iris", "fit", "synth")
    sim.run_plan()
    assert sim.plan().is_empty


def test_del_below_an_edited_reader() -> None:
    sim = Sim([("a", "x = 1"), ("b", "y = x + 1"), ("c", "del x")])
    sim.run_all()
    sim.edit("b", "y = x + 2")
    assert sim.kinds() == {"a": {"restores"}, "b": {"source_changed"}, "c": {"restores"}}
    sim.run_plan()
    assert sim.plan().is_empty


def test_blocking_is_transitive_and_never_run_readers_are_not_planned() -> None:
    sim = Sim([("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y + 1"), ("d", "w = z + 1")])
    sim.run_all()
    sim.delete("a")
    sim.insert(3, "e", "v = z * 2")  # never run, reads a blocked cell's name
    plan = sim.plan()
    assert plan.is_empty
    assert sim.blocked() == {
        "b": {"missing_producer"},
        "c": {"missing_producer"},
        "e": {"missing_producer", "never_run"},
        "d": {"missing_producer"},
    }
    assert "e" not in plan.cell_ids
    states = sim.tracker.cell_states(sim.cells(), sim.stat)
    assert states["d"] == "stale"  # not "ok": a fresh run fails before it


def test_ipython_history_names_are_not_notebook_names() -> None:
    sim = Sim(
        [("a", "x = 1\nx"), ("b", "y = 2\ny"), ("c", "z = _ + Out[1] + _2"), ("d", "q = 5\nq")]
    )
    sim.run_all()
    sim.edit("a", "x = 3\nx")
    assert sim.kinds() == {"a": {"source_changed"}}
    assert sim.blocked() == {}


def test_except_name_is_not_a_global() -> None:
    sim = Sim(
        [
            ("a", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    msg = str(e)"),
            ("b", "e = 5"),
            ("c", "f = e"),
        ]
    )
    sim.run_all()
    sim.edit("a", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    msg = repr(e)")
    # c does not read e from a; but re-running a deletes the global e, which b then restores
    assert sim.kinds() == {"a": {"source_changed"}, "b": {"restores"}}


def test_unchanged_import_in_an_edited_cell_does_not_stale_its_users() -> None:
    sim = Sim(
        [("imp", "import numpy as np\nk = 3"), ("use", "a = np.arange(4)"), ("k2", "kk = k * 2")]
    )
    sim.run_all()
    sim.edit("imp", "import numpy as np\nk = 4")
    assert sim.kinds() == {"imp": {"source_changed"}, "k2": {"upstream"}}
    sim.edit("imp", "import pandas as np\nk = 4")  # the import itself changed
    assert sim.kinds() == {"imp": {"source_changed"}, "use": {"upstream"}, "k2": {"upstream"}}


def test_observed_mutation_through_a_library_call_and_an_alias() -> None:
    sim = Sim(
        [
            ("mk", "import heapq\nh = []"),
            ("push", "heapq.heappush(h, 3)"),
            ("top", "t = h[0]"),
            ("base", "base = [1]\nview = base"),
            ("app", "view.append(2)"),
            ("n", "n = len(base)"),
        ],
        observed={
            "push": Observed(mutated=frozenset({"h"})),
            "app": Observed(mutated=frozenset({"view", "base"})),
        },
    )
    sim.run_all()
    sim.edit("push", "heapq.heappush(h, 1)")
    assert sim.kinds() == {"mk": {"restores"}, "push": {"source_changed"}, "top": {"upstream"}}
    sim.run_plan()
    assert sim.plan().is_empty
    sim.edit("app", "view.append(3)")
    assert sim.kinds() == {"base": {"restores"}, "app": {"source_changed"}, "n": {"upstream"}}


def test_random_generator_draws_chain_the_cells_that_draw() -> None:
    sim = Sim(
        [
            ("rng", "rng = make_rng(42)"),
            ("d1", "a = rng.normal()"),
            ("d2", "b = rng.normal()"),
            ("other", "c = 5"),
            ("d3", "d = rng.normal()"),
        ],
        observed={k: Observed(mutated=frozenset({"rng"})) for k in ("d1", "d2", "d3")},
    )
    sim.run_all()
    sim.edit("d1", "a = rng.normal() * 2")
    assert sim.kinds() == {
        "rng": {"restores"},
        "d1": {"source_changed"},
        "d2": {"upstream"},
        "d3": {"upstream"},
    }


def test_set_index_without_inplace_is_not_a_mutation() -> None:
    sim = Sim(
        [("load", "df = make()"), ("idx", "by_a = df.set_index('a')"), ("use", "n = len(df)")]
    )
    sim.run_all()
    sim.edit("idx", "by_a = df.set_index('b')")
    assert sim.kinds() == {"idx": {"source_changed"}}
    sim.edit("idx", "df.set_index('b', inplace=True)")
    assert set(sim.kinds()) == {"load", "idx", "use"}


def test_observation_clears_a_guessed_mutation() -> None:
    cells = [
        ("load", "obj = make()"),
        ("k", "k = 1"),
        ("look", "v = obj.update_view(k)"),  # named like a mutator; the kernel saw it was not
        ("use", "n = len(obj)"),
    ]
    guessed = Sim(list(cells))
    guessed.run_all()
    guessed.edit("k", "k = 2")
    assert guessed.kinds() == {
        "load": {"restores"},
        "k": {"source_changed"},
        "look": {"upstream"},
        "use": {"upstream"},
    }
    seen = Sim(list(cells), observed={"look": Observed(bound=frozenset({"v"}))})
    seen.run_all()
    seen.edit("k", "k = 2")
    assert seen.kinds() == {"k": {"source_changed"}, "look": {"upstream"}}


def test_rebinding_to_an_equal_value_keeps_readers_fresh() -> None:
    sim = Sim(
        [("a", "x = [1, 2]\nprint('hi')"), ("b", "y = len(x)")],
        observed={"a": Observed(bound=frozenset({"x"}))},
    )
    sim.run_all()
    sim.edit("a", "x = [1, 2]\nprint('hello')")
    # before it runs, the reader is conditional: the edit only changed what the cell shows
    plan = sim.plan()
    assert sim.kinds() == {"a": {"source_changed"}}
    assert [(e.cell_id, e.condition) for e in plan.conditional] == [
        ("b", "re-runs only if x changes")
    ]
    sim.observed["a"] = Observed()  # the kernel saw x rebound to an equal value
    sim.run("a")
    assert sim.plan().is_empty
    sim.edit("a", "x = [1, 3]")
    sim.observed["a"] = Observed(bound=frozenset({"x"}))
    sim.run("a")
    assert sim.kinds() == {"b": {"state_changed"}}


def test_scratch_mutation_seen_only_at_run_time() -> None:
    sim = Sim([("a", "rows = [[1], [2]]"), ("b", "n = sum(r[0] for r in rows)")])
    sim.run_all()
    sim.scratch("for r in rows:\n    r[0] = 0", observed=Observed(mutated=frozenset({"rows"})))
    # n was computed from a's rows; restoring rows is all it takes
    assert sim.kinds() == {"a": {"restores"}}
    sim.run_plan()
    assert sim.plan().is_empty
    # without evidence, a scratch rebinding re-runs the readers too (aliases may have changed)
    sim.scratch("rows = []")
    assert sim.kinds() == {"a": {"restores"}, "b": {"state_changed"}}


def test_shell_command_may_rewrite_files_read_below() -> None:
    sim = Sim(
        [("sh", "!python make_data.py > data.csv"), ("load", "df = load()"), ("other", "k = 1")],
        files={"data.csv": 1},
        reads={"load": ["data.csv"]},
    )
    sim.run_all()
    assert sim.plan().is_empty
    sim.edit("sh", "!python make_data.py --rows 10 > data.csv")
    assert sim.kinds() == {"sh": {"source_changed"}, "load": {"upstream"}}
    entry = sim.plan().entry("load")
    assert entry is not None and "shell command" in entry.reasons[0].message


def test_name_bound_by_exec_stays_an_output_when_rebound_to_an_equal_value() -> None:
    sim = Sim(
        [("g", 'globals()["g"] = 5'), ("use", "s = g + 1")],
        observed={"g": Observed(bound=frozenset({"g"}))},
    )
    sim.run_all()
    sim.observed["g"] = Observed()  # re-run: g rebound to an equal value, no change seen
    sim.run("g")
    assert sim.plan().is_empty and sim.blocked() == {}


def test_a_call_through_an_imported_module_is_no_mutation_of_it() -> None:
    # statsmodels' glm.ipynb: editing the data cell planned the import cell and every cell
    # reading ``sm``, as if ``sm.datasets.star98.load()`` had changed the module
    sim = Sim(
        [
            ("imp", "import statsmodels.api as sm"),
            ("load", "data = sm.datasets.star98.load()\ndata.exog = sm.add_constant(data.exog)"),
            ("note", "print(sm.datasets.scotland.NOTE)"),
            ("fit", "res = sm.GLM(data.endog, data.exog).fit()"),
        ],
        observed={"load": Observed(bound=frozenset({"data"}))},
    )
    sim.run_all()
    assert sim.plan().is_empty
    sim.edit(
        "load",
        "data = sm.datasets.star98.load()\ndata.exog = sm.add_constant(data.exog, prepend=True)",
    )
    assert sim.kinds() == {"load": {"source_changed"}, "fit": {"upstream"}}
    sim.run_plan()
    assert sim.plan().is_empty
    # assigning into a module still changes it
    sim.edit("load", "sm.flag = 1\ndata = sm.datasets.star98.load()")
    assert "note" in sim.kinds()


def test_the_same_import_in_two_cells_gives_one_module() -> None:
    # glm.ipynb imports ``from scipy import stats`` at the top and again further down
    sim = Sim(
        [
            ("imp", "from scipy import stats"),
            ("data", "v = [1.0, 2.0, 4.0]"),
            ("z", "z = stats.zscore(v)"),
            ("again", "from scipy import stats\nw = stats.norm.cdf(0)"),
        ]
    )
    sim.run_all()
    sim.edit("z", "z = stats.zscore(v, ddof=1)")
    # the kernel holds ``stats`` from the second import: the same module the first gives
    assert sim.kinds() == {"z": {"source_changed"}}
    sim.run_plan()
    assert sim.plan().is_empty  # z read ``stats`` as ``again`` left it: the same module
    # an edit of the first import re-runs it; the second keeps the last word only if it differs
    sim.edit("imp", "from scipy import stats\nimport math")
    assert sim.kinds() == {"imp": {"source_changed"}}
    sim.edit("imp", "from scipy import special as stats")
    assert sim.kinds() == {
        "imp": {"source_changed"},
        "z": {"upstream", "state_changed"},
        "again": {"restores"},
    }


def test_a_changed_local_module_imported_twice_reaches_the_second_importers_readers() -> None:
    # the first import reads helpers.py; the second finds the module cached and reads nothing.
    # When helpers.py changes, the first import re-runs with the new code, and the second must
    # re-run after it (and its readers), as the same-import rule must not hide the new module
    sim = Sim(
        [
            ("first", "import helpers\na = helpers.f()"),
            ("second", "import helpers"),
            ("use", "b = helpers.f()"),
        ],
        files={"helpers.py": 1},
        reads={"first": ["helpers.py"]},
    )
    sim.run_all()
    assert sim.plan().is_empty
    sim.touch("helpers.py")
    assert sim.kinds() == {"first": {"file_changed"}, "second": {"upstream"}, "use": {"upstream"}}
    sim.run_plan()
    assert sim.plan().is_empty


def test_print_only_edit_makes_its_readers_conditional_not_planned() -> None:
    sim = Sim(
        [
            ("x", "x = [1, 2, 3]"),
            ("t", "total = sum(x)\nprint('total', total)"),
            ("r", "r = total * 2"),
            ("q", "q = r + 1"),
        ]
    )
    sim.run_all()
    sim.edit("t", "total = sum(x)\nprint(f'the total is {total}')")
    plan = sim.plan()
    assert plan.cell_ids == ("t",)
    assert [(e.cell_id, e.condition) for e in plan.conditional] == [
        ("r", "re-runs only if total changes"),
        ("q", "re-runs only if cell 2 re-runs"),
    ]
    assert plan.runnable_ids == ("t", "r", "q")
    # an edit of what the cell computes makes its readers certain
    sim.edit("t", "total = sum(x) + 1\nprint(f'the total is {total}')")
    assert sim.plan().cell_ids == ("t", "r", "q") and sim.plan().conditional == ()


def test_restoring_run_that_redraws_a_value_makes_its_readers_stale() -> None:
    # ``x2`` re-runs to restore x; its ``stamp = time.time()`` comes out different, which
    # the evidence shows: the reader of stamp must re-run, as no fresh run has z != stamp * 2
    cells = [
        ("imp", "import time"),
        ("x", "x = [1, 2]"),
        ("s", "s = sum(x)"),
        ("x2", "x = [5]; stamp = time.time()"),
        ("z", "z = stamp * 2"),
    ]
    sim = Sim(list(cells))
    sim.run_all()
    sim.edit("s", "s = sum(x) + 1")
    assert sim.plan().cell_ids == ("x", "s", "x2")
    sim.observed["x2"] = Observed(bound=frozenset({"x", "stamp"}))
    sim.run("x", "s", "x2")
    assert sim.kinds() == {"z": {"state_changed"}}
    sim.run("z")
    assert sim.plan().is_empty


def test_restoring_run_that_makes_an_uncomparable_value_anew_keeps_its_readers() -> None:
    # ``x2`` re-runs to restore x and fits its model anew on the same inputs: the kernel shows
    # ``fitted`` rebound, but cannot compare the new object with the old one, so nothing proves
    # the cell redrew it and its reader stays fresh (it would re-run for a proven change)
    sim = Sim(
        [
            ("x", "x = [1, 2]"),
            ("s", "s = sum(x)"),
            ("x2", "x = [5]; fitted = fit(x)"),
            ("z", "z = fitted.params"),
        ]
    )
    sim.run_all()
    sim.edit("s", "s = sum(x) + 1")
    assert sim.plan().cell_ids == ("x", "s", "x2")
    sim.observed["x2"] = Observed(
        bound=frozenset({"x", "fitted"}), uncompared=frozenset({"x", "fitted"})
    )
    sim.run("x", "s", "x2")
    assert sim.plan().is_empty
    sim.edit("s", "s = sum(x) + 2")
    sim.observed["x2"] = Observed(bound=frozenset({"x", "fitted"}))
    sim.run("x", "s", "x2")
    assert sim.kinds() == {"z": {"state_changed"}}


def test_unseeded_generator_is_not_rebuilt_by_re_importing_numpy() -> None:
    sim = Sim(
        [
            ("imp", "import numpy as np"),
            ("x", "x = [1, 2]"),
            ("s", "s = sum(x)"),
            ("x2", "x = [5]; stamp = np.random.random()"),
            ("z", "z = stamp * 2"),
        ],
        observed={
            "imp": Observed(bound=frozenset({"np", "<numpy.random>"})),
            "x2": Observed(bound=frozenset({"x", "stamp"}), mutated=frozenset({"<numpy.random>"})),
        },
    )
    sim.run_all()
    sim.edit("s", "s = sum(x) + 1")
    plan = sim.plan()
    # the import is not re-run (it cannot reset the generator); the drawing cell says so and
    # its reader comes along, as its draw will differ
    assert plan.cell_ids == ("x", "s", "x2", "z")
    x2 = plan.entry("x2")
    assert x2 is not None
    assert any("cannot rebuild" in r.message for r in x2.reasons if r.kind == "state_changed")
    sim.run_plan()
    assert sim.plan().is_empty


def test_reader_of_a_changed_setting_stays_planned_once_the_setter_re_ran() -> None:
    # a setting is not a generator: that no cell seeds it says nothing about its reader, which
    # formatted with the old options and must re-run after the edited setter did
    sim = Sim(
        [
            ("imp", "import numpy as np"),
            ("opts", "np.set_printoptions(precision=2)"),
            ("w", "weights = np.array([0.123456, 2.5])"),
            ("rep", 'report = f"weights: {weights}"'),
        ],
        observed={
            "imp": Observed(bound=frozenset({"np"})),
            "opts": Observed(
                mutated=frozenset({"<numpy.printoptions>"}),
                states={"<numpy.printoptions>": "precision=2"},
            ),
            "w": Observed(bound=frozenset({"weights"})),
            "rep": Observed(bound=frozenset({"report"}), read=frozenset({"<numpy.printoptions>"})),
        },
    )
    sim.run_all()
    sim.edit("opts", "np.set_printoptions(precision=4)")
    assert sim.kinds() == {"opts": {"source_changed"}, "rep": {"upstream"}}
    sim.observed["opts"] = Observed(
        mutated=frozenset({"<numpy.printoptions>"}),
        states={"<numpy.printoptions>": "precision=4"},
    )
    sim.run("opts")
    assert sim.kinds() == {"rep": {"state_changed"}}
    entry = sim.plan().entry("rep")
    assert entry is not None
    assert entry.reasons[0].message == "numpy print options was changed by re-running cell 1"
    sim.run("rep")
    assert sim.plan().is_empty


def test_a_restoring_re_import_keeps_the_module_and_the_equal_draws_keep_their_readers() -> None:
    # the first run bound ``random`` (it was new); the restoring re-run finds the same module
    # there, which the kernel does not report as a change: the module keeps its version, so
    # the cells drawing after the edited one are not re-run for it
    sim = Sim(
        [
            ("r0", "import random\nrandom.seed(1)"),
            ("r1", "p = random.random()"),
            ("r2", "q = random.random()"),
        ],
        observed={
            "r0": Observed(
                bound=frozenset({"random"}),
                mutated=frozenset({"<random>"}),
                states={"<random>": "seeded"},
            ),
            "r1": Observed(
                bound=frozenset({"p"}), mutated=frozenset({"<random>"}), states={"<random>": "1"}
            ),
            "r2": Observed(
                bound=frozenset({"q"}), mutated=frozenset({"<random>"}), states={"<random>": "2"}
            ),
        },
    )
    sim.run_all()
    sim.edit("r1", "p = random.random() + 1")  # the same draws: r2's comes out the same
    assert sim.kinds() == {"r0": {"restores"}, "r1": {"source_changed"}, "r2": {"upstream"}}
    sim.observed["r0"] = Observed(mutated=frozenset({"<random>"}), states={"<random>": "seeded"})
    sim.run("r0", "r1")
    assert sim.plan().is_empty
