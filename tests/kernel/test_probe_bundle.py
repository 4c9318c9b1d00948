"""Probe expressions travel as one user expression: results split per key, failures isolated."""

from __future__ import annotations

import nbformat
import pytest
import pytest_asyncio

from ipykeep.daemon.composition import compose
from ipykeep.engine.observer import SessionObserver
from ipykeep.kernel import probe_bundle
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness import probes
from tests.conftest import make_project

pytestmark = pytest.mark.kernel


class _Probing(SessionObserver):
    """Adds a failing and a working probe to every cell, and keeps what came back."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def cell_expressions(self, session, cell):
        return {"test_boom": "1 / 0", "test_fine": "__import__('json').dumps({'x': base})"}

    async def after_cell(self, session, cell, ex):
        self.seen.append(dict(ex.expression_results))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eng(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("bundle") / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("base = 10", id="a"),
        nbformat.v4.new_code_cell("raise ValueError('no')", id="b"),
    ]
    nbformat.write(nb, root / "n.ipynb")
    engine = compose(ProjectPaths(root), Config(idle_timeout=0, dataflow="static")).engine
    probing = _Probing()
    engine.observers = (*engine.observers, probing)  # after the staleness observer
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), warm=False)
    yield engine, rec.kernel_id, probing
    await engine.shutdown()


async def test_one_expression_sent_and_a_failing_probe_keeps_the_others(eng):
    engine, kid, probing = eng
    batch = await engine.run_cells(["a"], kernel_id=kid)
    assert batch.ok
    ex = engine.session(kid).executions[batch.results[0].handle]
    assert set(probe_bundle.bundle(ex.expressions)) == {probe_bundle.BUNDLE_KEY}
    # the kernel evaluated them through the bundle (it compiled each expression once)
    compiled = (
        "__import__('json').dumps(sorted(__import__('sys').modules['_ipykeep_kernel']._compiled))"
    )
    assert "1 / 0" in await engine.session(kid).process.eval_silent(compiled)
    results = probing.seen[-1]
    assert {"ipykeep_files", "ipykeep_state", "ipykeep_warm", "test_boom", "test_fine"} <= set(
        results
    )
    boom = results["test_boom"]
    assert boom["status"] == "error" and boom["ename"] == "ZeroDivisionError"
    assert probes.decode_expression_value(results["test_fine"]) == {"x": 10}
    state = probes.parse_statemon(probes.decode_expression_value(results["ipykeep_state"]))
    assert state is not None and "base" in state.bound


async def test_a_failed_cell_yields_no_probe_results_and_evidence_is_asked_again(eng):
    engine, kid, probing = eng
    batch = await engine.run_cells(["b"], kernel_id=kid)
    assert not batch.ok
    assert probing.seen[-1] == {}  # the kernel evaluates no user expressions after an error


def test_split_of_a_failed_bundle_is_empty():
    sent = {"k1": "1", "k2": "2"}
    error = {
        "ipykeep_probes": {
            "status": "error",
            "ename": "KeyError",
            "evalue": "'_ipykeep_kernel'",
            "traceback": [],
        }
    }
    assert probe_bundle.split(sent, error) == {}
    assert probe_bundle.split(sent, {}) == {}
    # a single expression is sent as it is
    assert probe_bundle.bundle({"k1": "1"}) == {"k1": "1"}
    assert probe_bundle.split({"k1": "1"}, {"k1": {"status": "ok"}}) == {"k1": {"status": "ok"}}
