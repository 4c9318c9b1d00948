"""A real third-party notebook through edit → plan → execute → fresh-run comparison.

statsmodels' own ``ols.ipynb`` (tests/fixtures/thirdparty, BSD-3-Clause): 27 code cells with
magics, plots, the legacy global numpy generator (``np.random.seed`` then draws in several
cells), names redefined again and again (``nsample``, ``x``, ``X``, ``y``, ``beta``), self-rebinding
(``X = sm.add_constant(X)``), an in-place write through a view (``norm_x = X.values`` then
``norm_x[:, i] = …``) and statsmodels results objects. After each edit the plan is executed, and
every notebook name that can be compared (numbers, strings, arrays, frames, series, the
``params`` of results) must equal what a fresh run of the notebook as on disk gives, run with
IPython in a separate interpreter; the names that cannot be compared are listed explicitly.

statsmodels' ``glm.ipynb`` (same origin and license) goes through the same check: datasets
changed through attributes, calls through imported modules everywhere, and one import repeated
further down.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.fresh_runs import fresh_output
from tests.staleness.test_staleness_acceptance import (  # noqa: F401  (fixtures)
    MODES,
    Nb,
    engine,
    execute_exactly,
    kinds,
)

# ipyflow traces every statement of these notebooks: minutes on a loaded 2-core machine
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "thirdparty" / "ols.ipynb"

# One digest per global name, the same code in the kernel and in the fresh interpreter.
_DIGEST = r"""
def _ipykeep_digest():
    import hashlib, json, sys, types
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")

    def dig(v, depth=0):
        if isinstance(v, (bool, int, float, complex, str, bytes, type(None))):
            return repr(v)
        if np is not None and isinstance(v, np.generic):
            return repr(v.item())
        if np is not None and isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                return "nd-object:" + repr(v.tolist())
            data = np.ascontiguousarray(v).tobytes()
            return f"nd:{v.shape}:{v.dtype.str}:" + hashlib.sha1(data).hexdigest()
        if pd is not None and isinstance(v, (pd.DataFrame, pd.Series)):
            h = pd.util.hash_pandas_object(v, index=True).values.tobytes()
            cols = list(v.columns) if isinstance(v, pd.DataFrame) else [v.name]
            return f"pd:{type(v).__name__}:{v.shape}:{cols!r}:" + hashlib.sha1(h).hexdigest()
        if isinstance(v, (list, tuple)) and depth < 3:
            parts = [dig(x, depth + 1) for x in v]
            return None if None in parts else type(v).__name__ + "[" + ",".join(parts) + "]"
        if isinstance(v, dict) and depth < 3:
            parts = [(repr(k), dig(x, depth + 1)) for k, x in v.items()]
            return None if any(p is None for _, p in parts) else "dict" + repr(sorted(parts))
        params = getattr(v, "params", None)  # statsmodels results
        if params is not None and not callable(params) and depth < 3:
            d = dig(params, depth + 1)
            return None if d is None else "params:" + d
        return None

    out = {}
    for name, value in list(globals().items()):
        if name.startswith("_") or name in ("In", "Out", "exit", "quit", "get_ipython"):
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        try:
            d = dig(value)
        except Exception:
            d = None
        # long digests (a dataset's description) hashed: the line must fit the kernel's output
        out[name] = (
            d if d is None or len(d) < 200 else "sha1:" + hashlib.sha1(d.encode()).hexdigest()
        )
    return json.dumps(out)
"""

_FRESH = r"""
import json, os, sys
os.environ["MPLBACKEND"] = "Agg"
from IPython.core.interactiveshell import InteractiveShell
cells, digest = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
shell.enable_gui = lambda gui=None: None  # what %matplotlib inline asks of a kernel
for src in cells:
    if not shell.run_cell(src, silent=True).success:
        break
shell.run_cell(digest, silent=True)
print("@@" + shell.user_ns["_ipykeep_digest"]())
"""

#: names a comparison cannot cover: figures and axes, models (their data are compared), the
#: prediction and influence helpers and ``iv_l``/``iv_u``'s sources
UNCOMPARABLE = {
    "ax",
    "legend",
    "fig",
    "model",
    "infl",
    "ols_model",
    "pred_ols",
    "pred_ols2",
}


async def _kernel_digest(nb: Nb) -> dict[str, str | None]:
    rec = await nb.engine.execute(
        _DIGEST + "\nprint('@@' + _ipykeep_digest())", kernel_id=nb.kernel_id
    )
    assert rec.state == "ok", rec
    line = [ln for ln in rec.output.text.splitlines() if ln.startswith("@@")][-1]
    return json.loads(line[2:])


async def _fresh_digest(nb: Nb) -> dict[str, str | None]:
    book = nbformat.read(nb.path, as_version=4)
    cells = [c["source"] for c in book.cells if c["cell_type"] == "code"]
    out = await fresh_output(_FRESH, json.dumps([cells, _DIGEST]), nb.dir)
    line = [ln for ln in out.splitlines() if ln.startswith("@@")][-1]
    return json.loads(line[2:])


async def assert_matches_fresh_run(nb: Nb, uncomparable: set[str] = UNCOMPARABLE) -> None:
    """Every global the kernel holds equals a fresh run's; ``uncomparable``: the names the
    digest cannot cover (asserted, so a name dropping out of the comparison is noticed)."""
    kernel = await _kernel_digest(nb)
    fresh = await _fresh_digest(nb)
    assert set(kernel) == set(fresh), set(kernel) ^ set(fresh)
    skipped = {n for n, d in fresh.items() if d is None}
    assert skipped == uncomparable, skipped ^ uncomparable
    differ = sorted(n for n in fresh if fresh[n] is not None and kernel[n] != fresh[n])
    assert differ == [], differ


def _code_ids(nb: Nb) -> list[str]:
    book = nbformat.read(nb.path, as_version=4)
    return [c["id"] for c in book.cells if c["cell_type"] == "code"]


def _find(nb: Nb, needle: str) -> str:
    book = nbformat.read(nb.path, as_version=4)
    hits = [c["id"] for c in book.cells if c["cell_type"] == "code" and needle in c["source"]]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def _source(nb: Nb, cid: str) -> str:
    book = nbformat.read(nb.path, as_version=4)
    return next(c["source"] for c in book.cells if c["id"] == cid)


def copy_thirdparty(
    engine: Any, tmp_path_factory: pytest.TempPathFactory, mode: str, fixture: Path = FIXTURE
) -> Nb:
    """A statsmodels notebook (with its license) in a new directory of the engine's project,
    its cells given ids ``c00``, ``c01``… by position."""
    directory = (
        engine.paths.root / tmp_path_factory.mktemp(f"{fixture.stem}-{mode}", numbered=True).name
    )
    directory.mkdir()
    book = nbformat.read(fixture, as_version=4)
    for i, cell in enumerate(book.cells):  # the sdist copy predates cell ids
        cell["id"] = f"c{i:02d}"
    nbformat.write(book, directory / "nb.ipynb")
    shutil.copy2(FIXTURE.parent / "LICENSE-statsmodels.txt", directory / "LICENSE-statsmodels.txt")
    return Nb(engine, directory, mode)


#: cells drawing from numpy's global generator after the ``beta`` edit: planned (their draws
#: may move) and dropped at run time when the draws come out the same
OLS_DRAWN_AGAIN = ["c14", "c16", "c18", "c22", "c24", "c26", "c28", "c30", "c33", "c34"]
#: what the ``beta`` edit runs, seed first
OLS_BETA_RUNS = ["c02", "c04", "c06", "c08", "c10", "c12", "c20", "c32", "c36"]


async def edit_beta_and_run(nb: Nb) -> None:
    """Edit the first data-generating cell's ``beta``; the plan runs exactly ``OLS_BETA_RUNS``
    (the cells whose draws come out the same are skipped), then nothing is stale."""
    gen = _find(nb, "beta = np.array([1, 0.1, 10])")
    assert gen == "c04"
    nb.edit(gen, _source(nb, gen).replace("[1, 0.1, 10]", "[1, 0.2, 10]"))
    plan = await nb.plan()
    assert kinds(plan) == {
        "c02": {"restores"},
        "c04": {"source_changed"},
        **{c: {"upstream"} for c in ["c06", "c08", "c10", "c12", "c20", "c32"] + OLS_DRAWN_AGAIN},
        "c36": {"restores"},
    }
    res = await execute_exactly(nb, OLS_BETA_RUNS)
    assert sorted(s.cell_id for s in res.batch.skipped) == OLS_DRAWN_AGAIN


@pytest.fixture
def ols_nb(engine: Any, tmp_path_factory: pytest.TempPathFactory, request: Any) -> Nb:
    return copy_thirdparty(engine, tmp_path_factory, request.param)


@pytest.mark.parametrize("ols_nb", MODES, indirect=True)
async def test_statsmodels_ols_notebook(ols_nb: Nb) -> None:
    nb = ols_nb
    await nb.start()
    try:
        plan = await nb.plan()
        assert kinds(plan) == {} and plan.blocked == [], plan.stale
        await assert_matches_fresh_run(nb)

        # 1. a data-generating cell drawing from the global generator: the seed restores first;
        # every later cell drawing from it is planned (its draws may move), and dropped at run
        # time when the draws came out the same (the edit changed beta, not the draw count)
        await edit_beta_and_run(nb)
        await assert_matches_fresh_run(nb)

        # 2. the first model's fit without its print: it reads X and y, which the kernel holds
        # from the longley cells further down, so the cells making them (and the draws before
        # them) restore first, and the later definers get the last word again
        fit = _find(nb, "results = model.fit()")
        assert fit == "c08"
        nb.edit(fit, "model = sm.OLS(y, X)\nresults = model.fit()")
        plan = await nb.plan()
        assert kinds(plan) == {
            **{c: {"restores"} for c in ["c02", "c04", "c06", "c12", "c20", "c32", "c36"]},
            "c08": {"source_changed"},
            "c10": {"upstream"},
        }
        await execute_exactly(nb, ["c02", "c04", "c06", "c08", "c10", "c12", "c20", "c32", "c36"])
        await assert_matches_fresh_run(nb)

        # 3. the longley subsample: nothing else depends on it
        sub = _find(nb, "ols_results2 = sm.OLS(")
        nb.edit(sub, _source(nb, sub).replace("[:14]", "[:15]"))
        plan = await nb.plan()
        assert kinds(plan) == {sub: {"source_changed"}}
        await execute_exactly(nb, [sub])
        await assert_matches_fresh_run(nb)
    finally:
        await nb.close()


GLM = FIXTURE.parent / "glm.ipynb"
#: glm.ipynb's names a comparison cannot cover: figures and axes, and the models (their data
#: and their results' ``params`` are compared)
GLM_UNCOMPARABLE = {"ax", "fig", "gauss_log", "glm_binom", "glm_gamma"}
#: what an edit of the binomial model's fit plans, and what it runs: the cells whose inputs came
#: out the same (the plots of the fitted values) are skipped at run time
GLM_FIT_PLANNED = ["c14", "c16", "c18", "c20", "c23", "c25", "c27", "c29"]
GLM_FIT_RUNS = ["c12", "c14", "c16", "c18", "c20", "c25", "c27"]


async def edit_glm_fit_and_run(nb: Nb) -> None:
    fit = _find(nb, "res = glm_binom.fit()")
    assert fit == "c12"
    nb.edit(fit, _source(nb, fit).replace("glm_binom.fit()", "glm_binom.fit(tol=1e-10)"))
    plan = await nb.plan()
    assert kinds(plan) == {"c12": {"source_changed"}, **{c: {"upstream"} for c in GLM_FIT_PLANNED}}
    res = await execute_exactly(nb, GLM_FIT_RUNS)
    assert sorted(s.cell_id for s in res.batch.skipped) == ["c23", "c29"]


@pytest.mark.parametrize("mode", MODES)
async def test_statsmodels_glm_notebook(
    engine: Any, mode: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """statsmodels' ``glm.ipynb``: datasets loaded and changed through attributes
    (``data.exog = sm.add_constant(data.exog, …)``), calls through the imported module in most
    cells, and ``from scipy import stats`` imported twice (cells 2 and 27)."""
    nb = copy_thirdparty(engine, tmp_path_factory, mode, GLM)
    await nb.start()
    try:
        assert kinds(await nb.plan()) == {}
        await assert_matches_fresh_run(nb, GLM_UNCOMPARABLE)

        # 1. the data cell: its readers re-run, not the import cell nor the other cells using ``sm``
        data = _find(nb, "data.exog = sm.add_constant(data.exog, prepend=False)")
        assert data == "c06"
        nb.edit(data, _source(nb, data).replace("prepend=False", "prepend=True"))
        readers = ["c08", "c10", "c12", "c14", "c16", "c18", "c20", "c23", "c25", "c27", "c29"]
        assert kinds(await nb.plan()) == {
            "c06": {"source_changed"},
            **{c: {"upstream"} for c in readers},
        }
        await execute_exactly(nb, ["c06", *readers])
        await assert_matches_fresh_run(nb, GLM_UNCOMPARABLE)

        # 2. the model's fit: cell 16 reads ``stats``, which the kernel holds from cell 27's
        # import; the same module as cell 2's, so neither import re-runs
        await edit_glm_fit_and_run(nb)
        await assert_matches_fresh_run(nb, GLM_UNCOMPARABLE)

        # 3. a print-only edit of the second data set's cell: its reader keeps its inputs
        second = _find(nb, "data2 = sm.datasets.scotland.load()")
        nb.edit(
            second,
            _source(nb, second).replace("print(data2.endog.head())", "print(data2.endog.tail())"),
        )
        assert kinds(await nb.plan()) == {second: {"source_changed"}, "c35": {"upstream"}}
        res = await execute_exactly(nb, [second])
        assert [s.cell_id for s in res.batch.skipped] == ["c35"]
        await assert_matches_fresh_run(nb, GLM_UNCOMPARABLE)
    finally:
        await nb.close()
