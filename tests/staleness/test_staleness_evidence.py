"""Staleness on real kernels for the patterns static rules get wrong, in both dataflow modes.

Each test asserts the exact plan, the cells executed, equality with a fresh top-to-bottom run
in a separate interpreter, and an empty plan afterwards (helpers from
test_staleness_acceptance). The classes: self-rebinding and redefinition (restore before
re-read), mutation only the runtime sees (library calls, aliases, random generators,
``globals()``/``exec``), inputs found at run time (local modules, listed directories), false
positives (IPython's history names, ``except … as e``, an unchanged import, ``set_index``,
read-only pandas indexing, a print-only edit) and transitive blocking.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    blocked_kinds,
    engine,
    execute_exactly,
    kinds,
    make_nb,
    ran,
    reason,
    rebuild_kinds,
)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]


# ----------------------------------------------------------------------------- restores


@pytest.mark.parametrize("mode", MODES)
async def test_self_rebinding_edit_restores_its_input(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("load", "rows = [1, 2, 3, 4, 5]"),
            ("trim", "rows = rows[1:]"),
            ("n", "n = len(rows)"),
        ],
    )
    await nb.start()
    nb.edit("trim", "rows = rows[2:]")
    plan = await nb.plan()
    assert kinds(plan) == {"load": {"restores"}, "trim": {"source_changed"}, "n": {"upstream"}}
    assert reason(plan, "load", "restores")["symbols"] == ["rows"]
    await execute_exactly(nb, ["load", "trim", "n"])
    await nb.assert_fresh("rows", "n")
    assert await nb.values("rows") == ["[3, 4, 5]"]


@pytest.mark.parametrize("mode", MODES)
async def test_redefined_name_is_restored_before_an_edited_reader(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("iris", "X = [1, 2, 3]"),
            ("fit", "m = sum(X)"),
            ("synth", "X = [10, 20]"),
            ("fit2", "m2 = sum(X)"),
        ],
    )
    await nb.start()
    nb.edit("fit", "m = sum(X) * 2")
    plan = await nb.plan()
    assert kinds(plan) == {"iris": {"restores"}, "fit": {"source_changed"}, "synth": {"restores"}}
    await execute_exactly(nb, ["iris", "fit", "synth"])
    await nb.assert_fresh("X", "m", "m2")
    assert await nb.values("m") == ["12"]

    # the reader moved above the second definer now reads the first one's X
    nb.move("fit2", 1)
    plan = await nb.plan()
    assert kinds(plan) == {"iris": {"restores"}, "fit2": {"moved"}, "synth": {"restores"}}
    await execute_exactly(nb, ["iris", "fit2", "synth"])
    await nb.assert_fresh("X", "m", "m2")
    assert await nb.values("m2") == ["6"]


@pytest.mark.parametrize("mode", MODES)
async def test_del_below_an_edited_reader(make_nb: Any, mode: str) -> None:
    nb = make_nb(mode, [("a", "x = 1"), ("b", "y = x + 1"), ("c", "del x")])
    await nb.start()
    nb.edit("b", "y = x + 2")
    plan = await nb.plan()
    assert kinds(plan) == {"a": {"restores"}, "b": {"source_changed"}, "c": {"restores"}}
    await execute_exactly(nb, ["a", "b", "c"])
    await nb.assert_fresh("y")
    assert await nb.values("x", "y") == ["<undefined>", "3"]


# ----------------------------------------------------------------------------- mutation


@pytest.mark.parametrize("mode", MODES)
async def test_mutation_seen_only_at_run_time(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("mk", "import heapq\nh = [4]"),
            ("push", "heapq.heappush(h, 3)"),
            ("top", "top = h[0]"),
            ("base", "base = [1]"),
            ("alias", "view = base"),
            ("app", "view.append(2)"),
            ("size", "size = len(base)"),
            ("rows", "rows = [[1], [2]]"),
            ("rsum", "rs = sum(len(r) for r in rows)"),
        ],
    )
    await nb.start()
    nb.edit("push", "heapq.heappush(h, 1)")
    plan = await nb.plan()
    assert kinds(plan) == {"mk": {"restores"}, "push": {"source_changed"}, "top": {"upstream"}}
    await execute_exactly(nb, ["mk", "push", "top"])
    assert await nb.values("top") == ["1"]

    nb.edit("app", "view.append(3)")
    plan = await nb.plan()
    assert kinds(plan) == {
        "base": {"restores"},
        "alias": {"restores"},
        "app": {"source_changed"},
        "size": {"upstream"},
    }
    await execute_exactly(nb, ["base", "alias", "app", "size"])
    await nb.assert_fresh("h", "top", "base", "view", "size")
    assert await nb.values("base") == ["[1, 3]"]

    # a scratch loop changing the elements: only the runtime sees that rows changed; rs was
    # computed from the rows its producer made, so restoring rows is all it takes
    await nb.scratch("for r in rows:\n    r.append(0)")
    plan = await nb.plan()
    assert kinds(plan) == {"rows": {"restores"}}
    await execute_exactly(nb, ["rows"])
    await nb.assert_fresh("h", "top", "base", "view", "size", "rows", "rs")


@pytest.mark.parametrize("mode", MODES)
async def test_random_generator_drawn_from_by_several_cells(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("rng", "import numpy as np\nrng = np.random.default_rng(42)"),
            ("d1", "a = float(rng.normal())"),
            ("k", "k = 5"),
            ("d2", "b = float(rng.normal())"),
            ("d3", "c = rng.integers(0, 100, size=3).tolist()"),
            ("seed", "np.random.seed(0)"),
            ("g1", "u = float(np.random.rand())"),
            ("g2", "v = float(np.random.rand())"),
            ("r0", "import random\nrandom.seed(1)"),
            ("r1", "p = random.random()"),
            ("r2", "q = random.random()"),
        ],
    )
    await nb.start()
    nb.edit("d1", "a = float(rng.normal()) * 2")
    plan = await nb.plan()
    assert rebuild_kinds(plan, "rng") == {
        "rng": {"restores"},
        "d1": {"source_changed"},
        "d2": {"upstream"},
        "d3": {"upstream"},
    }
    await execute_exactly(nb, ["rng", "d1", "d2", "d3"])
    await nb.assert_fresh("a", "b", "c", "k")

    # the hidden global generators of numpy and random chain the cells drawing from them
    nb.edit("g1", "u = float(np.random.rand(2).sum())")  # one draw more: g2's draw moves
    nb.edit("r1", "p = random.random() + 1")  # the same draws: r2 is dropped at run time
    plan = await nb.plan()
    assert kinds(plan) == {
        "seed": {"restores"},
        "g1": {"source_changed"},
        "g2": {"upstream"},
        "r0": {"restores"},
        "r1": {"source_changed"},
        "r2": {"upstream"},
    }
    assert reason(plan, "g2", "upstream")["symbols"] == ["<numpy.random>"]
    res = await execute_exactly(nb, ["seed", "g1", "g2", "r0", "r1"])
    assert [s.cell_id for s in res.batch.skipped] == ["r2"]
    await nb.assert_fresh("a", "b", "c", "u", "v", "p", "q")


@pytest.mark.parametrize("mode", MODES)
async def test_names_made_by_globals_and_exec(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("g", 'globals()["g"] = 5'),
            ("e", 'exec("e = 7")'),
            ("use", "s = g + e"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    nb.edit("g", 'globals()["g"] = 6')
    plan = await nb.plan()
    assert kinds(plan) == {"g": {"source_changed"}, "use": {"upstream"}}
    assert plan.blocked == []
    await execute_exactly(nb, ["g", "use"])
    await nb.assert_fresh("g", "e", "s")


# ----------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("mode", MODES)
async def test_edited_local_module_is_reloaded(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import helpers_mod"),
            ("use", "v = helpers_mod.f()"),
            ("star", "from star_mod import *"),
            ("use2", "w = g() + 1"),
        ],
        {"helpers_mod.py": "def f():\n    return 1\n", "star_mod.py": "def g():\n    return 10\n"},
    )
    await nb.start()
    assert kinds(await nb.plan()) == {} and (await nb.plan()).blocked == []
    nb.rewrite_file("helpers_mod.py", "def f():\n    return 2\n")
    plan = await nb.plan()
    assert kinds(plan) == {"imp": {"file_changed"}, "use": {"upstream"}}
    await execute_exactly(nb, ["imp", "use"])
    assert await nb.values("v") == ["2"]

    nb.rewrite_file("star_mod.py", "def g():\n    return 20\n")
    plan = await nb.plan()
    assert kinds(plan) == {"star": {"file_changed"}, "use2": {"upstream"}}
    await execute_exactly(nb, ["star", "use2"])
    await nb.assert_fresh("v", "w")
    assert await nb.values("w") == ["21"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_local_module_imported_twice_is_reloaded_for_both(make_nb: Any, mode: str) -> None:
    # the second import finds the module cached (it reads no file); when the module's source
    # changes, it must re-run after the first loads the new code, and so must its readers
    nb = make_nb(
        mode,
        [
            ("imp", "import helpers_mod\na = helpers_mod.f()"),
            ("again", "import helpers_mod"),
            ("use", "v = helpers_mod.f()"),
        ],
        {"helpers_mod.py": "def f():\n    return 1\n"},
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}
    nb.rewrite_file("helpers_mod.py", "def f():\n    return 2\n")
    assert kinds(await nb.plan()) == {
        "imp": {"file_changed"},
        "again": {"upstream"},
        "use": {"upstream"},
    }
    await execute_exactly(nb, ["imp", "again", "use"])
    await nb.assert_fresh("a", "v")
    assert await nb.values("v") == ["2"]


@pytest.mark.parametrize("mode", MODES)
async def test_listed_directory_gains_a_file(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("ls", 'import os\nnames = sorted(os.listdir("data"))'),
            ("glob", 'import glob\ncsvs = sorted(glob.glob("data/*.csv"))'),
            ("n", "n = len(names) + len(csvs)"),
        ],
    )
    (nb.dir / "data").mkdir()
    (nb.dir / "data" / "a.csv").write_text("1\n")
    await nb.start()
    assert kinds(await nb.plan()) == {}
    (nb.dir / "data" / "b.csv").write_text("2\n")
    plan = await nb.plan()
    assert kinds(plan) == {"ls": {"file_changed"}, "glob": {"file_changed"}, "n": {"upstream"}}
    await execute_exactly(nb, ["ls", "glob", "n"])
    await nb.assert_fresh("names", "csvs", "n")
    assert await nb.values("n") == ["4"]


# ----------------------------------------------------------------------------- false positives


@pytest.mark.parametrize("mode", MODES)
async def test_no_false_positives(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np\nimport pandas as pd\nk = 0"),
            ("arr", "arr = np.arange(4)"),
            ("df", 'df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})'),
            ("x1", "x = 1\nx"),
            ("y1", "y = 2\ny"),
            ("hist", "z = 3\nz"),
            ("exc", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    msg = str(e)"),
            ("e", "e = 5"),
            ("f", "f = e + 1"),
            ("idx", 'by_a = df.set_index("a")'),
            ("loc", 'cell = int(df.loc[k, "b"]) + int(df["a"].sum())'),
            ("n", "n = len(df)"),
            ("kk", "kk = k + 1"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {}

    nb.edit("x1", "x = 10\nx")  # a value-returning cell: IPython's _ and _N are not names
    nb.edit("exc", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    msg = repr(e)")
    nb.edit("idx", 'by_a = df.set_index("b")')
    plan = await nb.plan()
    # f does not read e from exc; but the handler ending deletes the global e: its cell restores
    assert kinds(plan) == {
        "x1": {"source_changed"},
        "exc": {"source_changed"},
        "e": {"restores"},
        "idx": {"source_changed"},
    }
    await execute_exactly(nb, ["x1", "exc", "e", "idx"])

    # an unchanged import in an edited cell; read-only pandas indexing downstream
    nb.edit("imp", "import numpy as np\nimport pandas as pd\nk = 1")
    plan = await nb.plan()
    assert kinds(plan) == {"imp": {"source_changed"}, "loc": {"upstream"}, "kk": {"upstream"}}
    await execute_exactly(nb, ["imp", "loc", "kk"])
    await nb.assert_fresh(
        "arr.tolist()", "x", "y", "z", "msg", "e", "f", "by_a.to_dict()", "cell", "n", "kk"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_print_only_edit_does_not_rerun_readers(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", 'data = [1, 2, 3]\nprint("loaded")'),
            ("b", "total = sum(data)"),
            ("c", "other = 1"),
        ],
    )
    await nb.start()
    nb.edit("a", 'data = [1, 2, 3]\nprint("loaded", len(data))')
    plan = await nb.plan()
    # the edit changed only what the cell shows: b is conditional, apart from the cells that
    # will run, and runs only if data changes
    assert kinds(plan) == {"a": {"source_changed"}}
    assert [(e["cell_id"], e["condition"]) for e in plan.conditional] == [
        ("b", "re-runs only if data changes")
    ]
    res = await execute_exactly(nb, ["a"])
    assert [(s.cell_id, s.reason.startswith("no longer stale")) for s in res.batch.skipped] == [
        ("b", True)
    ]
    await nb.assert_fresh("data", "total", "other")

    nb.edit("a", 'data = [1, 2, 4]\nprint("loaded")')  # a real change still re-runs b
    assert kinds(await nb.plan()) == {"a": {"source_changed"}, "b": {"upstream"}}
    await execute_exactly(nb, ["a", "b"])
    await nb.assert_fresh("data", "total", "other")


@pytest.mark.parametrize("mode", MODES)
async def test_a_frame_built_then_changed_in_one_cell_follows_its_inputs(
    make_nb: Any, mode: str
) -> None:
    # ipyflow reports raw as used and mutated by the cell that binds it (and rng as used by the
    # reader of raw); its edges only add to the static and runtime floor, so neither the cell
    # nor its reader is dropped from the plan (as a blocked cell would be)
    nb = make_nb(
        mode,
        [
            ("imp", "import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(42)"),
            ("size", "N = 600\nREGIONS = ['n', 's']"),
            (
                "raw",
                "raw = pd.DataFrame({'r': rng.choice(REGIONS, N)})\n"
                "raw.loc[rng.choice(N, 6, replace=False), 'r'] = None",
            ),
            ("use", "total = len(raw)\nmissing = int(raw['r'].isna().sum())"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {} and (await nb.plan()).blocked == []
    nb.edit("size", "N = 700\nREGIONS = ['n', 's']")
    plan = await nb.plan()
    # raw draws from rng: the generator is rebuilt first so the draws match a fresh run (its
    # warm-up run, stored, may be loaded for it)
    assert rebuild_kinds(plan, "imp") == {
        "imp": {"restores"},
        "size": {"source_changed"},
        "raw": {"upstream"},
        "use": {"upstream"},
    }
    assert plan.blocked == []
    assert reason(plan, "use", "upstream")["cells"] == ["raw"]
    await execute_exactly(nb, ["imp", "size", "raw", "use"])
    await nb.assert_fresh("total", "missing", "int((raw['r'] == 'n').sum())", "float(rng.random())")
    assert await nb.values("total", "missing") == ["700", "6"]


# ----------------------------------------------------------------------------- blocking


@pytest.mark.parametrize("mode", MODES)
async def test_blocking_is_transitive(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [
            ("a", "x = 1"),
            ("b", "y = x + 1"),
            ("c", "z = y + 1"),
            ("d", "w = z + 1"),
            ("k", "k = 3"),
        ],
    )
    await nb.start()
    nb.delete("a")
    nb.insert(3, "new", "v = z * 2")  # never run, reads a blocked cell's name
    plan = await nb.plan()
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {
        "b": {"missing_producer"},
        "c": {"missing_producer"},
        "new": {"missing_producer", "never_run"},
        "d": {"missing_producer"},
    }
    res = await nb.execute_plan()
    assert res.batch is None and res.ok
    assert await nb.values("v") == ["<undefined>"]


# ----------------------------------------------------------------------------- expected failure


@pytest.mark.parametrize("mode", MODES)
async def test_expected_failure_tag(make_nb: Any, mode: str) -> None:
    import nbformat

    nb = make_nb(mode, [("a", "x = 1"), ("b", "z = x / 0"), ("c", "y = x + 1"), ("d", "w = 1 / 0")])
    book = nbformat.read(nb.path, as_version=4)
    book.cells[1]["metadata"]["tags"] = ["raises-exception"]  # the nbval/nbsphinx convention
    nbformat.write(book, nb.path)
    await nb.start()
    plan = await nb.plan()
    # the tagged failure is what the notebook expects; the untagged one would fail the same way
    # again (same source and inputs), so it is reported, not planned
    assert kinds(plan) == {}
    assert blocked_kinds(plan) == {"d": {"failed"}}
    assert "ZeroDivisionError" in reason(plan, "d", "failed")["message"]

    nb.edit("a", "x = 2")
    plan = await nb.plan()
    assert kinds(plan) == {"a": {"source_changed"}, "b": {"upstream"}, "c": {"upstream"}}
    assert blocked_kinds(plan) == {"d": {"failed"}}  # reads nothing a changed
    res = await nb.execute_plan()
    assert ran(res) == ["a", "b", "c"]
    assert {r.cell_id: r.state for r in res.batch.results} == {
        "a": "ok",
        "b": "failed",
        "c": "ok",
    }
    assert res.ok  # b's failure is the one its tag expects
    nb.edit("d", "w = 1")
    await execute_exactly(nb, ["d"])
    assert (await nb.execute_plan()).batch is None
    # the fresh-run helper stops at the first error as run-all does; nbval-style runs go on
    # past a tagged cell, which gives these values
    await nb.assert_fresh("x")
    assert await nb.values("y", "w", "z") == ["3", "1", "<undefined>"]


@pytest.mark.parametrize("mode", MODES)
async def test_edited_run_script(make_nb: Any, mode: str) -> None:
    nb = make_nb(
        mode,
        [("run", "%run helper_script.py"), ("use", "z = sval * 2"), ("k", "k = 1")],
        {"helper_script.py": "sval = 10\n"},
    )
    await nb.start()
    assert kinds(await nb.plan()) == {} and (await nb.plan()).blocked == []
    nb.rewrite_file("helper_script.py", "sval = 20\n")
    plan = await nb.plan()
    assert kinds(plan) == {"run": {"file_changed"}, "use": {"upstream"}}
    await execute_exactly(nb, ["run", "use"])
    await nb.assert_fresh("sval", "z", "k")
    assert await nb.values("sval", "z") == ["20", "40"]


@pytest.mark.parametrize("mode", MODES)
async def test_shell_command_that_writes_a_file_read_below(make_nb: Any, mode: str) -> None:
    # A shell escape is opaque: re-running it may rewrite any project file, so the cells below
    # that read project files re-run after it; cells reading nothing from disk do not.
    nb = make_nb(
        mode,
        [
            ("write", "!echo 1 > made.txt"),
            ("read", "made = open('made.txt').read().strip()"),
            ("calc", "calc = 5 * 2"),
        ],
    )
    await nb.start()
    assert kinds(await nb.plan()) == {} and (await nb.plan()).blocked == []
    nb.edit("write", "!echo 2 > made.txt")
    plan = await nb.plan()
    assert set(kinds(plan)) == {"write", "read"}, kinds(plan)
    assert "source_changed" in kinds(plan)["write"]
    await execute_exactly(nb, ["write", "read"])
    await nb.assert_fresh("made", "calc")
    assert await nb.values("made") == ["'2'"]
