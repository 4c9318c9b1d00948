"""Breakpoints and stepping through the engine, on static and ipyflow kernels: text breakpoints
that survive an edit moving the line, a project file's line, step into a call and return out of
it, quit, stop on raised exceptions on and off, and clearing one breakpoint of several."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio

from ipykeep.api.debugger import DebugResult
from ipykeep.api.records import BatchResult
from ipykeep.daemon.composition import Composition, compose
from ipykeep.debugger.errors import DebugStateError
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project

pytestmark = pytest.mark.kernel

HELPERS = """\
def double(x):
    y = x * 2
    return y


def ratio(a, b):
    return a / b
"""

CELLS = {
    "imp": "import helpers",
    "loop": "vals = []\nfor i in range(3):\n    vals.append(helpers.double(i))\n"
    "print('done', vals)",
    "guarded": "try:\n    helpers.ratio(1, 0)\nexcept ZeroDivisionError:\n    caught = True\n"
    "print('caught it')",
}


def _write_cells(root: Path, cells: dict[str, str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, id=cid) for cid, src in cells.items()]
    nbformat.write(nb, root / "nb.ipynb")


Env = tuple[Composition, str, Path]


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["static", "ipyflow"])
async def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    root = make_project(tmp_path_factory.mktemp(f"stepping-{request.param}") / "p", example=False)
    (root / "helpers.py").write_text(HELPERS)
    _write_cells(root, CELLS)
    composition = compose(ProjectPaths(root), Config(idle_timeout=0))
    rec = await composition.engine.create_kernel(
        notebook=str(root / "nb.ipynb"), warm=False, dataflow=request.param
    )
    await composition.engine.run_cells(["imp"], rec.kernel_id)
    yield composition, rec.kernel_id, root
    await composition.engine.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def clean(env: Env) -> AsyncIterator[Env]:
    """Each test starts with no breakpoint, catch off and the original notebook."""
    yield env
    composition, kid, root = env
    await _debug(env, "clear")
    await _debug(env, "catch off")
    _write_cells(root, CELLS)


async def _debug(env: Env, command: str) -> DebugResult:
    composition, kid, _ = env
    return await composition.debugger.debug(command, kernel_id=kid)


def _run(env: Env, *cells: str) -> asyncio.Task[BatchResult]:
    composition, kid, _ = env
    return asyncio.create_task(composition.engine.run_cells(list(cells), kid))


async def _until_paused(env: Env, run: asyncio.Task[Any], timeout: float = 30) -> DebugResult:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        status = await _debug(env, "status")
        if status.state == "paused":
            return status
        assert not run.done(), f"finished without pausing: {run.result()}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"never paused: {status}")


async def _value(env: Env, expr: str) -> Any:
    res = await _debug(env, f"p {expr}")
    assert res.value is not None, res.notes
    return res.value.get("value")


async def test_text_breakpoint_follows_its_line_through_an_edit(clean: Env) -> None:
    _, _, root = clean
    armed = await _debug(clean, "break /helpers.double(i)/")
    assert armed.breakpoints == ["1 text 'helpers.double(i)'"]
    run = _run(clean, "loop")
    paused = await _until_paused(clean, run)
    assert paused.where is not None and (paused.where.cell_id, paused.where.line) == ("loop", 3)
    await _debug(clean, "clear")
    await _debug(clean, "continue")
    assert (await run).ok
    # the line moves down two lines: the breakpoint follows its text, not its number
    edited = dict(CELLS, loop="# warm up\nscale = 1\n" + CELLS["loop"])
    _write_cells(root, edited)
    await _debug(clean, "break /helpers.double(i)/")
    run = _run(clean, "loop")
    paused = await _until_paused(clean, run)
    assert paused.where is not None and paused.where.line == 5
    assert "helpers.double(i)" in (paused.where.text or "")
    assert await _value(clean, "i") == 0
    await _debug(clean, "clear")
    await _debug(clean, "continue")
    assert (await run).ok


async def test_project_file_line_breakpoint(clean: Env) -> None:
    _, _, root = clean
    armed = await _debug(clean, "break helpers.py:3")
    assert armed.breakpoints == [f"1 {(root / 'helpers.py').resolve()}:3"], armed.breakpoints
    run = _run(clean, "loop")
    paused = await _until_paused(clean, run)
    assert paused.where is not None
    assert paused.where.file.endswith("helpers.py") and paused.where.line == 3
    assert paused.where.function == "double"
    assert await _value(clean, "y") == 0
    again = await _debug(clean, "continue")  # the next call of double reaches the line again
    assert again.state == "paused" and await _value(clean, "y") == 2
    await _debug(clean, "clear")
    done = await _debug(clean, "continue")
    assert done.state != "paused" and any("finished ok" in n for n in done.notes), done
    assert (await run).ok


async def test_step_into_a_call_and_return_out_of_it(clean: Env) -> None:
    await _debug(clean, "break loop:3")
    run = _run(clean, "loop")
    await _until_paused(clean, run)
    await _debug(clean, "clear")
    inside = await _debug(clean, "step")
    assert inside.state == "paused" and inside.where is not None
    assert (inside.where.function, inside.where.line) == ("double", 2), inside
    assert await _value(clean, "x") == 0
    where = await _debug(clean, "where")
    assert where.frames is not None and where.frames[0].cell_id == "loop"
    assert where.frames[-1].function == "double"
    returned = await _debug(clean, "return")
    assert returned.state == "paused" and returned.reason == "return", returned
    assert returned.where is not None and returned.where.function == "double"
    assert returned.where.line == 3  # `return y`: the function is about to hand back its value
    assert await _value(clean, "y") == 0
    back = await _debug(clean, "step")
    assert back.state == "paused" and back.where is not None
    assert back.where.cell_id == "loop" and back.where.function == "<module>", back
    done = await _debug(clean, "continue")
    assert done.state != "paused"
    assert (await run).ok


async def test_quit_ends_the_paused_run(clean: Env) -> None:
    composition, kid, _ = clean
    await _debug(clean, "break loop:3")
    run = _run(clean, "loop")
    paused = await _until_paused(clean, run)
    quit_ = await _debug(clean, "quit")
    assert quit_.state != "paused"
    assert quit_.handle == paused.handle and any("finished failed" in n for n in quit_.notes), quit_
    batch = await run
    assert not batch.ok and batch.results[0].error is not None
    assert batch.results[0].error.ename == "BdbQuit"
    # the breakpoint stays set: the next run pauses again, and ends normally when continued
    run = _run(clean, "loop")
    await _until_paused(clean, run)
    await _debug(clean, "clear")
    await _debug(clean, "continue")
    assert (await run).ok
    ran = await composition.engine.execute("print(len(vals))", kid)
    assert ran.state == "ok" and "3" in ran.output.text


async def test_catch_on_pauses_where_a_caught_exception_is_raised_and_off_does_not(
    clean: Env,
) -> None:
    on = await _debug(clean, "catch on")
    assert on.stop_on_raise
    run = _run(clean, "guarded")
    paused = await _until_paused(clean, run)
    assert paused.reason is not None and paused.reason.startswith("raised ZeroDivisionError")
    assert paused.where is not None
    assert (paused.where.function, paused.where.line) == ("ratio", 7), paused.where
    assert await _value(clean, "b") == 0
    done = await _debug(clean, "continue")  # the cell catches it and runs to its end
    assert done.state != "paused" and any("caught it" in n for n in done.notes), done
    assert (await run).ok
    off = await _debug(clean, "catch off")
    assert not off.stop_on_raise
    batch = await asyncio.wait_for(_run(clean, "guarded"), 30)  # no pause: it just runs
    assert batch.ok and "caught it" in batch.results[0].output.text


async def test_clear_one_breakpoint_by_number_or_spec(clean: Env) -> None:
    await _debug(clean, "break loop:3")
    await _debug(clean, "break double")
    listed = await _debug(clean, "break helpers.py:6")
    assert listed.breakpoints[:2] == ["1 cell loop:3", "2 function double"]
    assert len(listed.breakpoints) == 3 and listed.breakpoints[2].endswith("helpers.py:6")
    shown = await _debug(clean, "break")  # `break` alone lists them
    assert shown.breakpoints == listed.breakpoints
    cleared = await _debug(clean, "clear double")
    assert cleared.breakpoints == [listed.breakpoints[0], listed.breakpoints[2]]
    cleared = await _debug(clean, "clear 1")  # numbers stay as they were given
    assert cleared.breakpoints == [listed.breakpoints[2]]
    with pytest.raises(DebugStateError, match="no breakpoint cell loop:9"):
        await _debug(clean, "clear loop:9")
    with pytest.raises(DebugStateError, match="no breakpoint 7: set are 3"):
        await _debug(clean, "clear 7")
    run = _run(clean, "loop")  # only helpers.py:6 is left, which the loop never reaches
    batch = await asyncio.wait_for(run, 30)
    assert batch.ok and "done [0, 2, 4]" in batch.results[0].output.text
    await _debug(clean, "clear")
    again = await _debug(clean, "break loop:2")
    assert again.breakpoints == ["1 cell loop:2"]  # an empty table numbers from 1 again
