"""The debugger beside ipykernel's own (debugpy over the control channel, what JupyterLab's
debugger panel drives), post-mortem of scratch code, and the ``ipykeep debug`` command."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_asyncio

from ipykeep.daemon.composition import compose
from ipykeep.debugger.errors import DebugStateError
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.conftest import make_project, run_cli, stop_daemon

pytestmark = pytest.mark.kernel

INITIALIZE = {
    "clientID": "jupyterlab",
    "adapterID": "python",
    "pathFormat": "path",
    "linesStartAt1": True,
    "columnsStartAt1": True,
    "supportsVariableType": True,
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def eng(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("debugger") / "p", example=False)
    composition = compose(ProjectPaths(root), Config(idle_timeout=0))
    rec = await composition.engine.create_kernel(cwd=str(root))
    yield composition, rec.kernel_id
    await composition.engine.shutdown()


async def _dap(session: Any, seq: int, command: str, arguments: dict[str, Any]) -> dict[str, Any]:
    request = {"type": "request", "seq": seq, "command": command, "arguments": arguments}
    reply = await session.process._send_control("debug_request", request)
    content: dict[str, Any] = reply["content"]
    return content


async def test_jupyterlab_debugger_still_attaches(eng):
    composition, kid = eng
    session = composition.engine.kernels[kid]
    init = await _dap(session, 1, "initialize", INITIALIZE)
    assert init["success"], init
    attach = await _dap(session, 2, "attach", {})
    assert attach["success"], attach
    info = await _dap(session, 3, "debugInfo", {})
    assert info["success"] and info["body"]["isStarted"], info
    # ipykeep's cells and post-mortem work with debugpy attached
    ran = await composition.engine.execute("def f(v):\n    w = v + 1\n    return w / 0\nf(4)", kid)
    assert ran.state == "failed"
    where = await composition.debugger.debug("where", kernel_id=kid)
    assert where.state == "post_mortem" and where.handle == ran.handle
    assert where.frames is not None and where.frames[-1].function == "f"
    assert (await composition.debugger.debug("p w", kernel_id=kid)).value["value"] == 5
    assert (await _dap(session, 4, "disconnect", {"terminateDebuggee": False}))["success"]


async def test_post_mortem_of_scratch_code_and_its_limits(eng):
    composition, kid = eng
    ok = await composition.engine.execute("x = 1", kid)
    with pytest.raises(DebugStateError, match="finished ok"):
        await composition.debugger.debug("where", handle=ok.handle, kernel_id=kid)
    first = await composition.engine.execute("items = [1, 2]\nitems[5]", kid)
    second = await composition.engine.execute("{}['missing']", kid)
    where = await composition.debugger.debug("where", kernel_id=kid)
    assert where.handle == second.handle and "KeyError" in (where.reason or "")
    # only the last failure keeps its frames
    with pytest.raises(DebugStateError, match=f"frames of {first.handle} are gone"):
        await composition.debugger.debug("where", handle=first.handle, kernel_id=kid)


def test_cli_debug(tmp_path):
    import nbformat

    root = make_project(tmp_path / "proj", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("size = 3\nshares = [1, 2]\nshares[size]", id="bad")]
    nbformat.write(nb, root / "nb.ipynb")
    try:
        assert run_cli("start", "nb.ipynb", cwd=root).returncode in (0, 1)
        where = run_cli("debug", "nb.ipynb", "where", cwd=root)
        assert where.returncode == 0, where.stderr
        assert "post-mortem" in where.stdout and "IndexError" in where.stdout
        assert "cell bad:3" in where.stdout
        shown = run_cli("debug", "p", "size", "*", "2", "--json", cwd=root)
        assert json.loads(shown.stdout)["value"]["value"] == 6
        bad = run_cli("debug", "next", cwd=root)
        assert bad.returncode == 1 and "nothing is paused" in bad.stderr
    finally:
        stop_daemon(root)
