"""Tutorial notebooks we did not write, edited at random, in both dataflow modes.

The code cells of two PythonDataScienceHandbook notebooks (tests/fixtures/thirdparty, code
under the MIT license): ``02.07 Fancy Indexing`` rebinds ``x``, ``X``, ``i`` and ``rng`` cell
after cell, changes arrays in place (``x[i] = 99``, ``x[i] -= 10``, ``np.add.at``), draws from
one generator in several cells and plots; ``02.05 Broadcasting`` rebinds ``a``, ``b`` and ``M``
again and again and plots. Each test applies edits drawn with a recorded seed (an in-place
edit inserted after a cell binding an array, a print-only edit, a reseeded generator), executes
the plan after each, and asserts that the next plan is empty and that every comparable global
equals a fresh top-to-bottom run in a separate interpreter. The cells run and the cells whose
values changed (per-cell digests of the names a cell writes, fresh runs before and after the
edit) are printed: docs/staleness.md reports the ratio.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ipykeep.staleness.analysis import analyze_source
from tests.fresh_runs import fresh_output
from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    Nb,
    engine,
    kinds,
)
from tests.staleness.test_staleness_thirdparty import _DIGEST, _fresh_digest, _kernel_digest

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "thirdparty"
LICENSE = FIXTURES / "LICENSE-PythonDataScienceHandbook-code.txt"

#: per notebook: the seed its edits are drawn with, the arrays an in-place edit may change
#: (data, not indices: ``ind.flat[0] = 99`` would make a fresh run fail), and the names no
#: fresh run can reproduce (drawn from numpy's unseeded global generator)
TUTORIALS = {
    "pdsh_fancy_indexing.ipynb": (1701, {"x", "X", "counts"}, {"indices", "selection"}),
    "pdsh_broadcasting.ipynb": (1702, {"a", "b", "M", "X", "z"}, set()),
}
EDITS = 3

# Per cell of each notebook: the digests of the names it writes, after it ran, in a fresh run.
_PER_CELL = r"""
import json, os, sys
os.environ["MPLBACKEND"] = "Agg"
from IPython.core.interactiveshell import InteractiveShell
notebooks, digest = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
shell.enable_gui = lambda gui=None: None
out = []
for cells in notebooks:
    shell.reset(new_session=False)
    shell.run_cell(digest, silent=True)
    fn = shell.user_ns["_ipykeep_digest"]
    per = []
    for src, writes in cells:
        ok = shell.run_cell(src, silent=True).success
        d = json.loads(fn())
        per.append({n: d.get(n) for n in writes} if ok else None)
    out.append(per)
print("@@" + json.dumps(out))
"""


async def _per_cell_digests(
    directory: Path, notebooks: list[list[tuple[str, str]]]
) -> list[list[Any]]:
    payload = [
        [
            [src, sorted(set(analyze_source(src).defs) | set(analyze_source(src).mutates))]
            for _, src in cells
        ]
        for cells in notebooks
    ]
    out = await fresh_output(_PER_CELL, json.dumps([payload, _DIGEST]), directory)
    line = [ln for ln in out.splitlines() if ln.startswith("@@")][-1]
    return list(json.loads(line[2:]))


def _cells(nb: Nb) -> list[tuple[str, str]]:
    book = nbformat.read(nb.path, as_version=4)
    return [(c["id"], c["source"]) for c in book.cells if c["cell_type"] == "code"]


def changed_cells(
    before: list[tuple[str, str]],
    after: list[tuple[str, str]],
    digests: list[list[Any]],
    unreproducible: set[str],
) -> set[str]:
    """Cells of ``after`` that are new, or whose written names differ from the run before."""
    old = {cid: d for (cid, _), d in zip(before, digests[0])}
    out = set()
    for (cid, _), d in zip(after, digests[1]):
        if cid not in old or d is None or old[cid] is None:
            out.add(cid)
            continue
        names = {n for n in d if n not in unreproducible and d[n] is not None}
        if any(d[n] != old[cid].get(n) for n in names):
            out.add(cid)
    return out


def draw_edit(rng: random.Random, cells: list[tuple[str, str]], arrays: set[str]) -> Any:
    """One edit an agent might make: (what, cell id, new source or inserted source)."""
    inplace = [
        (cid, name) for cid, src in cells for name in sorted(analyze_source(src).defs & arrays)
    ]
    prints = [cid for cid, src in cells if "print(" in src]
    seeds = [cid for cid, src in cells if "seed=1701" in src or "default_rng(1701)" in src]
    kind = rng.choice(["inplace", "inplace", "print", "seed"])
    if kind == "print" and prints:
        cid = rng.choice(prints)
        src = dict(cells)[cid]
        return ("edit", cid, src.replace("print(", "print('>', ", 1))
    if kind == "seed" and seeds:
        cid = rng.choice(seeds)
        return ("edit", cid, dict(cells)[cid].replace("1701", "1703"))
    cid, name = rng.choice(inplace)
    return ("insert_after", cid, f"{name}.flat[0] = 99")


async def assert_like_fresh_run(nb: Nb, unreproducible: set[str]) -> None:
    kernel = await _kernel_digest(nb)
    fresh = await _fresh_digest(nb)
    assert set(kernel) == set(fresh), set(kernel) ^ set(fresh)
    differ = sorted(
        n
        for n in fresh
        if n not in unreproducible and fresh[n] is not None and kernel[n] != fresh[n]
    )
    assert differ == [], differ


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fixture", sorted(TUTORIALS))
async def test_tutorial_notebook_edited_at_random_settles(
    engine: Any, tmp_path_factory: pytest.TempPathFactory, mode: str, fixture: str
) -> None:
    seed, arrays, unreproducible = TUTORIALS[fixture]
    directory = engine.paths.root / tmp_path_factory.mktemp(f"tut-{mode}", numbered=True).name
    directory.mkdir()
    shutil.copy2(FIXTURES / fixture, directory / "nb.ipynb")
    shutil.copy2(LICENSE, directory / LICENSE.name)
    nb = Nb(engine, directory, mode)
    await nb.start()
    rng = random.Random(seed)
    figures: list[tuple[int, int]] = []
    try:
        assert kinds(await nb.plan()) == {}
        await assert_like_fresh_run(nb, unreproducible)
        inserted = 0
        for _ in range(EDITS):
            before = _cells(nb)
            what, cid, text = draw_edit(rng, before, arrays)
            if what == "edit":
                nb.edit(cid, text)
            else:
                inserted += 1
                nb.insert(nb.order().index(cid) + 1, f"ins{inserted}", text)
            res = await nb.execute_plan()
            assert res.ok, res.batch
            after_plan = await nb.plan()
            assert kinds(after_plan) == {}, (what, cid, text, after_plan.stale)
            assert after_plan.conditional == [] and after_plan.blocked == []
            await assert_like_fresh_run(nb, unreproducible)
            after = _cells(nb)
            digests = await _per_cell_digests(directory, [before, after])
            changed = changed_cells(before, after, digests, unreproducible)
            ran = [r.cell_id for r in res.batch.results] if res.batch else []
            figures.append((len(ran), len(changed)))
            print(
                f"\n{fixture} [{mode}] {what} {cid} {text.splitlines()[0]!r}: "
                f"ran {len(ran)}, values changed in {len(changed)}"
            )
        runs, changes = sum(r for r, _ in figures), sum(c for _, c in figures)
        print(f"\n{fixture} [{mode}] seed {seed}: {runs} cells run / {changes} changed")
    finally:
        await nb.close()
