"""The namespace probe's shortcut, in-process on a real IPython shell: big values (numpy arrays,
pandas frames) that the code since the last observation could not reach keep their cached
fingerprint; every way of reaching one must still show its change.

Each test runs cells through ``InteractiveShell.run_cell`` (the kernel's own path: IPython's AST
transformers see the code) and asserts what ``statemon.collect()`` reports, and whether the scan
was bounded (``reached``) or fell back to looking at everything (``full``).
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from ipykeep.kernel.inkernel import DATAHASH, REACH, STATEMON, install_expression  # noqa: E402

N = 200_000  # above the probe's exact-hash size: these values are sampled and cached


class Shell:
    def __init__(self, ip: Any, statemon: Any, reach: Any) -> None:
        self.ip = ip
        self.statemon = statemon
        self.reach = reach

    def run(self, code: str) -> dict[str, Any]:
        result = self.ip.run_cell(textwrap.dedent(code), store_history=True)
        assert result.success, result.error_in_exec or result.error_before_exec
        return json.loads(self.statemon.collect())


@pytest.fixture(scope="module")
def modules():
    # installed the way the engine installs them into a kernel
    eval(install_expression(REACH, DATAHASH, STATEMON), {})
    yield sys.modules[REACH.name], sys.modules[STATEMON.name]
    # later tests in this process must not find these modules or a running IPython shell
    for name in (REACH.name, DATAHASH.name, STATEMON.name):
        sys.modules.pop(name, None)
    sys.__dict__.pop("_ipykeep_statemon_state", None)
    sys.__dict__.pop("_ipykeep_reach_state", None)
    InteractiveShell.clear_instance()


@pytest.fixture
def shell(modules, tmp_path: Path, monkeypatch) -> Iterator[Shell]:
    reach, statemon = modules
    # walk whatever the values cost to hash (the probe walks only when that saves time)
    monkeypatch.setattr(statemon, "WALK_WORTH_S", -1.0)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    ip = InteractiveShell.instance()
    ip.reset(new_session=False)
    ip.run_cell("import numpy as np\nimport pandas as pd", store_history=False)
    statemon.install()
    sh = Shell(ip, statemon, reach)
    sh.run("pass")
    yield sh
    ip.reset(new_session=False)


def _changed(out: dict[str, Any]) -> set[str]:
    return set(out["bound"]) | set(out["mutated"])


def test_an_unrelated_cell_reuses_cached_fingerprints(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})\nframe = pd.DataFrame({{'x': np.arange({N}.0)}})")
    out = shell.run("n = 1")
    assert out["scan"] == "reached"
    assert out["reused"] >= 2 and out["hashed"] == 0
    assert out["bound"] == ["n"] and out["mutated"] == []


def test_mutation_through_an_alias(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    shell.run("view = big")
    out = shell.run("view += 1")
    assert out["scan"] == "reached"
    assert {"big", "view"} <= set(out["mutated"])


def test_mutation_through_an_alias_the_cell_deletes(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    shell.run("alias = big")
    out = shell.run("alias += 1\ndel alias")
    assert out["scan"] == "reached"
    assert "big" in out["mutated"] and "alias" in out["deleted"]


def test_mutation_through_a_numpy_view_of_the_same_memory(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})\nhalf = big[::2]")
    out = shell.run("half += 1")
    assert out["scan"] == "reached"
    assert {"big", "half"} <= set(out["mutated"])


def test_a_frame_sharing_memory_with_an_edited_array(shell: Shell) -> None:
    shell.run(f"base = np.zeros(({N}, 2))\nframe = pd.DataFrame(base, copy=False)")
    shell.run("n = 1")
    out = shell.run("base += 1")
    assert out["scan"] == "reached"
    assert {"base", "frame"} <= set(out["mutated"])


def test_mutation_inside_a_function_defined_in_an_earlier_cell(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    shell.run("def inner():\n    big[:] += 1\n\ndef bump():\n    inner()")
    out = shell.run("bump()")
    assert out["scan"] == "reached"
    assert "big" in out["mutated"]


def test_mutation_inside_a_method_of_a_notebook_class(shell: Shell) -> None:
    shell.run(f"frame = pd.DataFrame({{'x': np.zeros({N})}})")
    shell.run(
        """
        class Scaler:
            def apply(self):
                frame['x'] = frame['x'] + 1
        s = Scaler()
        """
    )
    out = shell.run("s.apply()")
    assert out["scan"] == "reached"
    assert "frame" in out["mutated"]


def test_mutation_by_a_library_call_through_an_object_holding_the_value(shell: Shell) -> None:
    # neither cell names ``big``: the partial holds it and numpy writes into it
    shell.run(f"big = np.zeros({N})")
    shell.run("import functools\nbump = functools.partial(np.add, big, 1, out=big)")
    out = shell.run("bump()")
    assert out["scan"] == "reached"
    assert "big" in out["mutated"]


def test_mutation_by_a_library_call_on_a_value_inside_a_container(shell: Shell) -> None:
    shell.run(f"frames = {{'a': pd.DataFrame({{'x': np.zeros({N})}})}}\nfirst = frames['a']")
    out = shell.run("frames['a'].loc[:, 'x'] = 5.0")
    assert "first" in out["mutated"]


def test_globals_by_name_falls_back_to_a_full_scan(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    out = shell.run("globals()['b' + 'ig'][:] = 3")
    assert out["scan"] == "full"
    assert "big" in out["mutated"]


def test_magics_fall_back_to_a_full_scan(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    out = shell.run("%time big[:] = 2")
    assert out["scan"] == "full"
    assert "big" in out["mutated"]


def test_state_kept_by_a_local_module_falls_back_to_a_full_scan(
    shell: Shell, tmp_path: Path
) -> None:
    (tmp_path / "keeper.py").write_text(
        "HELD = []\n\ndef keep(a):\n    HELD.append(a)\n\ndef bump():\n    HELD[0][:] += 1\n"
    )
    shell.run(f"import keeper\nbig = np.zeros({N})\nkeeper.keep(big)")
    out = shell.run("keeper.bump()")
    assert out["scan"] == "full"
    assert "big" in out["mutated"]


def test_a_thread_started_by_a_cell_falls_back_to_a_full_scan(shell: Shell) -> None:
    shell.run(
        f"""
        import threading
        big = np.zeros({N})
        go = threading.Event()
        t = threading.Thread(target=lambda: (go.wait(), big.__iadd__(1)), daemon=True)
        t.start()
        """
    )
    out = shell.run("n = 1")
    assert out["scan"] == "full"
    shell.run("go.set()\nt.join()")


def test_ipykeeps_own_threads_keep_the_look_bounded(shell: Shell) -> None:
    # the checkpoint writer starts after the probe is installed and lives on: it only reads
    # values, so it must not turn every later look into a full one
    shell.run(f"big = np.zeros({N})")
    stop = threading.Event()
    writer = threading.Thread(target=stop.wait, name="ipykeep-checkpoint-writer", daemon=True)
    writer.start()
    try:
        out = shell.run("n = 1")
        assert out["scan"] == "reached" and out["hashed"] == 0 and out["reused"] >= 1
    finally:
        stop.set()
        writer.join()


def test_a_full_look_leaves_values_to_be_hashed_again_by_the_next_bounded_one(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    assert shell.run("globals()")["scan"] == "full"
    first = shell.run("n = 1")  # the full look kept no memory owners: hashed once more
    assert first["scan"] == "reached" and first["hashed"] >= 1
    again = shell.run("n = 2")
    assert again["scan"] == "reached" and again["hashed"] == 0 and again["reused"] >= 1


def test_a_frame_edited_in_place_by_loc_is_seen(shell: Shell) -> None:
    shell.run(f"frame = pd.DataFrame({{'x': np.zeros({N}), 's': ['a'] * {N}}})")
    shell.run("n = 1")
    out = shell.run("frame.loc[:, 'x'] = 1.0")
    assert "frame" in out["mutated"]
    out = shell.run("frame.loc[:, 's'] = 'b'")
    assert "frame" in out["mutated"]


def test_a_value_rebuilt_equal_in_a_later_cell_is_not_reported_bound_when_exact(
    shell: Shell,
) -> None:
    shell.run("small = pd.DataFrame({'s': ['a', 'b'], 'x': [1.0, 2.0]})")
    out = shell.run("small = pd.DataFrame({'s': ['a', 'b'], 'x': [1.0, 2.0]})")
    assert out["bound"] == [] and "small" not in out["opaque"]
    out = shell.run("small = pd.DataFrame({'s': ['a', 'c'], 'x': [1.0, 2.0]})")
    assert out["bound"] == ["small"]


def test_a_rebound_object_the_fingerprints_cannot_compare_is_bound_and_uncompared(
    shell: Shell,
) -> None:
    shell.run("class Fit:\n    def __init__(self, v):\n        self.v = v\nfit = Fit(1.5)")
    out = shell.run("fit = Fit(1.5)\nstamp = 2.5")
    # an object is fingerprinted by its attributes, never exactly: not proven equal, nor
    # different; a float is compared exactly, so a new one is a change
    assert out["bound"] == ["fit", "stamp"] and out["uncompared"] == ["fit"]
    out = shell.run("fit = Fit(1.5)\nstamp = 3.5")
    assert out["bound"] == ["fit", "stamp"] and out["uncompared"] == ["fit"]


def test_user_expressions_that_are_not_ipykeeps_fall_back_to_a_full_scan(shell: Shell) -> None:
    shell.run(f"big = np.zeros({N})")
    shell.ip.user_expressions(
        {"probe": '__import__("sys").modules["_ipykeep_statemon"].PROTOCOL_VERSION'}
    )
    assert shell.run("n = 1")["scan"] == "reached"
    shell.ip.user_expressions({"x": "big.__iadd__(1).sum()"})
    out = shell.run("n = 2")
    assert out["scan"] == "full"
    assert "big" in out["mutated"]


def test_a_namespace_with_little_to_spare_is_looked_at_whole(shell: Shell, monkeypatch) -> None:
    monkeypatch.setattr(shell.statemon, "WALK_WORTH_S", 10.0)
    shell.run(f"big = np.zeros({N})")
    shell.run("n = 1")
    out = shell.run("view = big\nview += 1")
    assert out["scan"] == "full"
    assert "big" in out["mutated"] and "view" in out["bound"]


def test_an_array_over_memory_its_owner_changes(shell: Shell) -> None:
    shell.run(f"buf = bytearray({N} * 8)\narr = np.frombuffer(buf)")
    shell.run("n = 1")
    out = shell.run("buf[:] = b'\\x01' * len(buf)")
    assert out["scan"] == "reached"
    assert "arr" in out["mutated"]


def test_a_cell_looks_at_what_it_bound_not_at_every_settled_name(shell: Shell) -> None:
    # 2,000 settled names (scalars, short strings, a module, a class) beside a mutable one
    shell.run(
        "\n".join(f"x{i} = {i} * 1.5" for i in range(2000))
        + "\nlabel = 'a'\nimport math\nclass K: pass\nitems = [1]"
    )
    out = shell.run("y = 1")
    assert out["bound"] == ["y"] and out["mutated"] == [] and out["deleted"] == []
    assert out["looked"] < 20, out["looked"]  # not the 2,000 names
    out = shell.run("x5 = x5 + 1.0")  # a new float, maybe at the freed one's address
    assert out["bound"] == ["x5"]
    out = shell.run("items.append(2)")  # a mutable value is looked at every time
    assert out["mutated"] == ["items"] and out["bound"] == []
    out = shell.run("x6 = x6\nlabel = 'a' + ''")  # the same objects: nothing changed
    assert out["bound"] == [] and out["mutated"] == []
    out = shell.run("import os as math\nK = int")
    assert out["bound"] == ["K", "math"]
    out = shell.run("del x7")
    assert out["deleted"] == ["x7"] and out["bound"] == []
    out = shell.run("z = 2")
    assert out["bound"] == ["z"] and out["looked"] < 20


class _CountingNamespace(dict):  # type: ignore[type-arg]
    """A namespace counting its membership tests: the probe's work per name, in Python."""

    lookups = 0

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return super().__contains__(key)


def test_a_cell_costs_the_probe_the_same_after_many_cells(modules) -> None:
    """Every cell leaves an IPython history name (``_i12``) the probe skips; after 1,000 cells
    one more costs it as few name lookups as the first did (it visited every history name on
    every cell, which made a long notebook's run quadratic)."""
    _reach, statemon = modules
    ns = _CountingNamespace()
    statemon.install(ns)

    def cell(i: int) -> tuple[int, dict[str, Any]]:
        ns[f"_i{i}"] = f"x{i} = {i}"
        ns[f"x{i}"] = i
        ns.lookups = 0
        out = json.loads(statemon.collect())
        assert out["bound"] == [f"x{i}"]
        return ns.lookups, out

    first, out_first = cell(0)
    for i in range(1, 1000):
        cell(i)
    last, out_last = cell(1000)
    assert out_last["looked"] == out_first["looked"]
    assert last <= first + 2, (first, last)


def test_captured_names_the_mentioned_objects_a_new_value_holds(shell: Shell) -> None:
    shell.run("rows = [1, 2, 3]\nother = [4]")
    out = shell.run(
        "holder = {'data': rows}\npair = (rows, other)\nn = len(rows)\nflat = list(rows)\n"
        "def first(r=rows):\n    return r[0]\ndef looks_up():\n    return rows[0]\nalias = rows"
    )
    assert out["captured"] == {
        "holder": ["rows"],
        "pair": ["other", "rows"],
        "first": ["rows"],
        "alias": ["rows"],
    }


def test_captured_follows_attributes_to_a_frame(shell: Shell) -> None:
    shell.run("import pandas as pd\ndf = pd.DataFrame({'x': [1.0, 2.0]})")
    out = shell.run(
        "class Model:\n    def __init__(self, data):\n        self.data = {'frame': data}\n"
        "m = Model(df)\nsub = df[df.x > 1]"
    )
    assert out["captured"] == {"m": ["df"]}
