"""A plan is a fixed point, checked as a property on generated notebooks with real kernels.

Hypothesis generates small notebooks over six names of fixed kinds (lists ``L1``/``L2``,
arrays ``A1``/``A2``, numbers ``N1``/``N2``): definitions and redefinitions, aliases
(``L2 = L1``), in-place mutations (``L1.append(3)``, ``A1.flat[0] = 99``, ``A1 *= 2``),
self-rebinding (``L1 = L1 + [3]``) and values derived from them; then random edits (a constant
changed, a cell inserted, a cell deleted). The notebook runs in one kernel, the edits are
applied, the plan is executed, and:

(a) the values of the names the edited notebook defines equal a fresh top-to-bottom run of it
    in a separate interpreter (when a fresh run fails, the cell it fails at is blocked);
(b) the next plan is empty (blocked cells aside, which a fresh run fails too);
(c) the cells run are among the cells whose values changed (their written names differ between
    fresh runs of the notebook before and after the edits, or the cell is new) plus their
    restorers: the producers above of what they read and the final writers of the names they
    (or deleted cells) rebind, transitively.

One kernel per dataflow mode serves every example: each example's names carry a prefix of its
own, so what earlier examples left in the kernel is never read. ``IPYKEEP_FIXED_POINT_EXAMPLES``
(default 4) and ``IPYKEEP_FIXED_POINT_MODES`` (default ``static``; ``static,ipyflow`` for both)
set the run's size; docs/staleness.md has the longer run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.analysis import analyze_source
from ipykeep.staleness.service import StalenessService

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

EXAMPLES = int(os.environ.get("IPYKEEP_FIXED_POINT_EXAMPLES", "4"))
MODES = tuple(os.environ.get("IPYKEEP_FIXED_POINT_MODES", "static").split(","))

# What each kind of name may be: (template, names read, name written); ``{t}``/``{s}`` are
# names, ``{k}`` a constant.
KIND = {"L1": "list", "L2": "list", "A1": "arr", "A2": "arr", "N1": "num", "N2": "num"}
TEMPLATES: dict[str, list[tuple[str, str]]] = {
    # kind of the written name -> (template, kind of the read name or "")
    "list": [
        ("{t} = [{k}, 2, 3]", ""),
        ("{t} = {s}", "list"),  # an alias
        ("{t} = {s} + [{k}]", "list"),  # self-rebinding when t == s
        ("{t} = list({s})", "list"),
    ],
    "arr": [
        ("{t} = np.arange(4) * {k}", ""),
        ("{t} = {s}", "arr"),
        ("{t} = {s} + {k}", "arr"),
    ],
    "num": [
        ("{t} = {k}", ""),
        ("{t} = int(sum({s})) + {k}", "list"),
        ("{t} = int({s}.sum()) + {k}", "arr"),
    ],
}
MUTATIONS: dict[str, list[str]] = {
    "list": ["{s}.append({k})", "{s}[0] = {k}"],
    "arr": ["{s}.flat[0] = {k}", "{s} *= {k}", "{s}[1] += {k}"],
    "num": [],
}


@dataclass(frozen=True)
class Stmt:
    """One generated cell: its template filled in, what it reads and writes."""

    template: str
    target: str
    source_name: str
    k: int

    def code(self, prefix: str) -> str:
        return self.template.format(t=prefix + self.target, s=prefix + self.source_name, k=self.k)

    def reads(self) -> set[str]:
        return {self.source_name} if "{s}" in self.template else set()

    def with_k(self, k: int) -> Stmt:
        return Stmt(self.template, self.target, self.source_name, k)


@st.composite
def statement(draw: st.DrawFn, defined: frozenset[str]) -> Stmt:
    """A cell valid after ``defined`` names: a definition, or a mutation of a defined name."""
    k = draw(st.integers(1, 9))
    options: list[Stmt] = []
    for target, kind in KIND.items():
        for template, read_kind in TEMPLATES[kind]:
            if not read_kind:
                options.append(Stmt(template, target, "", k))
            for src in sorted(defined):
                if KIND[src] == read_kind:
                    options.append(Stmt(template, target, src, k))
    for src in sorted(defined):
        for template in MUTATIONS[KIND[src]]:
            options.append(Stmt(template, "", src, k))
    return draw(st.sampled_from(options))


@st.composite
def notebooks(draw: st.DrawFn) -> list[Stmt]:
    cells: list[Stmt] = []
    defined: set[str] = set()
    for _ in range(draw(st.integers(3, 7))):
        stmt = draw(statement(frozenset(defined)))
        cells.append(stmt)
        if stmt.target:
            defined.add(stmt.target)
    return cells


Cells = list[tuple[str, Stmt]]


def defined_before(cells: Cells, pos: int) -> frozenset[str]:
    return frozenset(c.target for _, c in cells[:pos] if c.target)


@st.composite
def edited(draw: st.DrawFn, base: list[Stmt]) -> tuple[Cells, Cells]:
    """``base`` with cell ids (``c0``, ``c1``…), and the same after 1–3 edits: a constant
    changed (the cell keeps its id), a cell inserted (``n0``…) or deleted."""
    before: Cells = [(f"c{i}", s) for i, s in enumerate(base)]
    cells = list(before)
    new_ids = (f"n{i}" for i in itertools.count())
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["constant", "insert", "delete"]))
        if what == "constant":
            i = draw(st.integers(0, len(cells) - 1))
            cid, stmt = cells[i]
            k = draw(st.sampled_from([k for k in range(1, 10) if k != stmt.k]))
            cells[i] = (cid, stmt.with_k(k))
        elif what == "delete" and len(cells) > 2:
            del cells[draw(st.integers(0, len(cells) - 1))]
        else:
            pos = draw(st.integers(0, len(cells)))
            cells.insert(pos, (next(new_ids), draw(statement(defined_before(cells, pos)))))
    return before, cells


# ----------------------------------------------------------------------------- the oracle

# Per notebook: runs its code cells in order in a namespace of its own, stopping at the first
# error (as a notebook run-all does); after each cell, the repr of every name the cell writes.
# Prints, per notebook, the per-cell values, the index of the failing cell (or -1) and the final
# repr of every name asked for. (Two notebooks in one interpreter: numpy is imported once.)
_FRESH = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
notebooks, names = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
out = []
for cells in notebooks:
    shell.reset(new_session=False)
    after, failed = [], -1
    for i, (src, writes) in enumerate(cells):
        if not shell.run_cell(src, store_history=False, silent=True).success:
            failed = i
            break
        after.append({n: repr(shell.user_ns.get(n, "<undefined>")) for n in writes})
    ns = shell.user_ns
    out.append([after, failed, {n: repr(ns[n]) if n in ns else "<undefined>" for n in names}])
print(json.dumps(out))
"""


def fresh_runs(notebooks: list[list[str]], names: list[str]) -> list[Any]:
    """Per notebook (its code cells' sources): the values after each cell, the failing cell's
    index (-1: none), the final values of ``names``."""
    payload = json.dumps([[[[s, sorted(writes_of(s))] for s in nb] for nb in notebooks], names])
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-c", _FRESH],
            input=payload,
            capture_output=True,
            text=True,
            cwd=tmp,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def final_writers(cells: list[tuple[str, str]]) -> dict[str, str]:
    """name -> id of the last cell writing it."""
    return {name: cid for cid, src in cells for name in writes_of(src)}


def writes_of(source: str) -> set[str]:
    an = analyze_source(source)
    return set(an.defs) | set(an.mutates)


# ----------------------------------------------------------------------------- the kernel


class Harness:
    """One kernel bound to one notebook file, rewritten for every example."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop, mode: str) -> None:
        self.engine, self.loop, self.mode = engine, loop, mode
        self.dir = engine.paths.root / f"fixed-point-{mode}"
        self.dir.mkdir()
        self.path = self.dir / "nb.ipynb"
        self.write([("imp", "import numpy as np")])
        self.kernel_id = self.run(
            engine.create_kernel(notebook=str(self.path), dataflow=mode)
        ).kernel_id
        self.layer = next(o for o in engine.observers if isinstance(o, StalenessService))
        self.counter = itertools.count()
        #: per example: (cells run, cells whose values changed plus their restorers)
        self.figures: list[tuple[int, int]] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def write(self, cells: list[tuple[str, str]]) -> None:
        nb = nbformat.v4.new_notebook()
        for cid, src in cells:
            cell = nbformat.v4.new_code_cell(src)
            cell["id"] = cid
            nb.cells.append(cell)
        nbformat.write(nb, self.path)

    def plan(self, execute: bool = False) -> Any:
        return self.run(self.layer.run_stale(kernel_id=self.kernel_id, execute=execute))

    def values(self, names: list[str]) -> dict[str, str]:
        code = (
            "import json as _j\n"
            f"print(_j.dumps({{n: repr(globals()[n]) if n in globals() else '<undefined>' "
            f"for n in {names!r}}}))"
        )
        rec = self.run(self.engine.execute(code, kernel_id=self.kernel_id))
        assert rec.state == "ok", rec
        return json.loads(rec.output.text.strip().splitlines()[-1])

    def check(self, before: Cells, after: Cells) -> None:
        n = next(self.counter)
        prefix = f"e{n}_"
        before_cells = [("imp", "import numpy as np")] + [
            (f"e{n}{cid}", s.code(prefix)) for cid, s in before
        ]
        after_cells = [("imp", "import numpy as np")] + [
            (f"e{n}{cid}", s.code(prefix)) for cid, s in after
        ]
        self.write(before_cells)
        warm = self.plan(execute=True)
        assert warm.ok, warm.batch
        assert self.plan().stale == [], "a warm notebook has an empty plan"

        self.write(after_cells)
        res = self.plan(execute=True)
        next_plan = self.plan()
        # the names the edited notebook defines (a deleted cell's names stay in the kernel,
        # as nothing in the notebook reads or defines them any more)
        names = sorted(set().union(*(writes_of(src) for _, src in after_cells)) - {"np"})
        (old_after, _, _), (new_after, failed, fresh) = fresh_runs(
            [[s for _, s in before_cells], [s for _, s in after_cells]], names
        )
        notebook = "\n".join(f"  [{cid}] {src}" for cid, src in after_cells)
        blocked = [e["cell_id"] for e in next_plan.blocked]

        # (b) the next plan is empty, blocked cells aside
        assert next_plan.stale == [] and next_plan.conditional == [], (notebook, next_plan)
        if failed >= 0:
            # a fresh run fails: at a cell the plan reports blocked
            assert after_cells[failed][0] in blocked, (notebook, failed, blocked)
            return
        assert blocked == [], (notebook, blocked)
        # (a) the values equal a fresh run's
        assert self.values(names) == fresh, notebook

        # (c) the cells run are among the changed cells, their restorers and final writers
        old_by_id = {cid: vals for (cid, _), vals in zip(before_cells, old_after)}
        changed = {
            cid for (cid, _), vals in zip(after_cells, new_after) if old_by_id.get(cid) != vals
        }
        # the bound: those cells, the final writers of a deleted cell's names, and, until
        # nothing changes, the producers above of what a bound cell reads (its restorers) and
        # the final writers of what a bound cell writes (they have the last word again)
        deleted = {c for c, _ in before_cells} - {c for c, _ in after_cells}
        gone = set().union(*(writes_of(s) for c, s in before_cells if c in deleted))
        finals = final_writers(after_cells)
        bound = set(changed) | {finals[n] for n in gone if n in finals}
        while True:
            grown = set(bound)
            for pos, (cid, src) in enumerate(after_cells):
                if cid not in bound:
                    continue
                for name in analyze_source(src).uses:
                    producers = [c for c, s in after_cells[:pos] if name in writes_of(s)]
                    grown.update(producers[-1:])
                for name in writes_of(src):
                    grown.add(finals[name])
            if grown == bound:
                break
            bound = grown
        ran = [r.cell_id for r in res.batch.results] if res.batch else []
        assert set(ran) <= bound, (notebook, ran, sorted(bound))
        self.figures.append((len(ran), len(changed)))


@pytest.fixture(scope="module")
def harnesses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Harness]]:
    loop = asyncio.new_event_loop()
    root = tmp_path_factory.mktemp("fixed_point")
    (root / ".git").mkdir()
    engine = compose(ProjectPaths(root), Config(idle_timeout=0, checkpoints=False)).engine
    made = {mode: Harness(engine, loop, mode) for mode in MODES}
    yield made
    for mode, h in made.items():
        runs, changed = sum(r for r, _ in h.figures), sum(c for _, c in h.figures)
        print(
            f"\nfixed point ({mode}): {len(h.figures)} examples, {runs} cells run, "
            f"{changed} cells whose values changed"
        )
    loop.run_until_complete(engine.shutdown())
    loop.close()


@pytest.mark.parametrize("mode", MODES)
def test_executing_a_plan_reaches_a_fixed_point(harnesses: dict[str, Harness], mode: str) -> None:
    harness = harnesses[mode]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=os.environ.get("IPYKEEP_FIXED_POINT_RANDOM") is None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        before, after = data.draw(edited(data.draw(notebooks(), label="notebook")), label="edits")
        harness.check(before, after)

    prop()


def test_the_generator_makes_valid_notebooks() -> None:
    """Pure: every generated notebook reads only names defined above (so its fresh run is
    sound), and the kinds of names never change."""

    @settings(max_examples=50, deadline=None, database=None)
    @given(cells=notebooks())
    def prop(cells: list[Stmt]) -> None:
        defined: set[str] = set()
        for stmt in cells:
            assert stmt.reads() <= defined
            if stmt.target:
                defined.add(stmt.target)

    prop()
