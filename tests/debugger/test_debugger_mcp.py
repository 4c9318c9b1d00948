"""The ``debug`` tool over stdio with the official MCP client, on static and ipyflow kernels.

Post-mortem of a failure inside a project module, breakpoints by cell line and by function
name with stepping while scratch calls go on, interrupting a paused run, and replaying a failed
cell under the debugger without re-running the slow cell above it.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.mcp_server.harness import McpSession, envelope, shutdown_daemon, stdio_params, text_of

pytestmark = pytest.mark.kernel

HELPERS = """\
def scale(frame, factor):
    total = int(frame["a"].sum()) * factor
    ratio = total / (factor - factor)
    return ratio


def double(x):
    y = x * 2
    return y
"""

CELLS = {
    "imp": "import time\nimport pandas as pd\nimport helpers",
    "boom": 'local_df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})\n'
    "result = helpers.scale(local_df, 3)",
    "loop": "vals = []\nfor i in range(3):\n    vals.append(helpers.double(i))\n"
    'print("done", vals)',
    "wait": "for step in range(600):\n    time.sleep(0.1)",
    "slow": 'with open("marker.txt", "a") as f:\n    f.write("ran\\n")\n'
    "time.sleep(5)\nbase = 10\ndata = [1, 2, 3]",  # f (an open file) does not pickle
    "later": "offset = base + 1\nparts = [offset, 0]\nshare = parts[0] / parts[1]",
    "mutate": "data.append(4)\nfirst = data[0] / 0",
    "defs": "def evens(n):\n    for i in range(n):\n        yield i * 2\n\n\n"
    "def bump(x):\n    y = x + 1\n    return y",
    "calls": "print('got', list(evens(3)), bump(1))",
    "spin": "while True:\n    time.sleep(0.01)",
}


def _project(root: Path, mode: str) -> Path:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "ipykeep.toml").write_text(f'dataflow = "{mode}"\n')
    (root / "helpers.py").write_text(HELPERS)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, id=cid) for cid, src in CELLS.items()]
    nbformat.write(nb, root / "nb.ipynb")
    return root


@pytest.fixture(scope="module", params=["static", "ipyflow"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = _project(tmp_path_factory.mktemp(f"debug-{request.param}") / "proj", request.param)
    session = McpSession(stdio_params(root)).start()
    try:
        made = session.tool("create_kernel", {"notebook": "nb.ipynb", "warm": False})
        assert not made.is_error, text_of(made)
        yield session, made.structured_content["kernel_id"], root
    finally:
        session.close()
        shutdown_daemon(root)


@pytest.fixture(autouse=True)
def idle_after(env: Any) -> Iterator[None]:
    """Each test starts on an idle main shell with no breakpoint: a test that fails while a run
    is paused (or spinning) would otherwise leave the next test's cells queued behind it."""
    yield
    mcp, kid, _ = env
    _debug(mcp, kid, "clear")
    deadline = time.monotonic() + 60
    state = _debug(mcp, kid, "status")["state"]
    while state in ("paused", "running") and time.monotonic() < deadline:
        if state == "paused":
            _debug(mcp, kid, "quit")
        else:
            _ok(mcp.tool("interrupt", {"kernel_id": kid}))
        time.sleep(0.2)
        state = _debug(mcp, kid, "status")["state"]
    assert state not in ("paused", "running"), f"the kernel did not come back to idle: {state}"


def _ok(res: Any) -> dict[str, Any]:
    assert not res.is_error, text_of(res)
    out: dict[str, Any] = res.structured_content
    return out


def _debug(mcp: McpSession, kid: str, command: str, **extra: Any) -> dict[str, Any]:
    return _ok(mcp.tool("debug", {"kernel_id": kid, "command": command, **extra}))


def _run_in_background(mcp: McpSession, kid: str, cell: str) -> concurrent.futures.Future[Any]:
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(mcp.tool, "run_cells", {"kernel_id": kid, "cells": [cell]}, 120)
    pool.shutdown(wait=False)
    return future


def _until_paused(mcp: McpSession, kid: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = _debug(mcp, kid, "status")
        if res["state"] == "paused":
            return res
        time.sleep(0.1)
    raise AssertionError(f"never paused: {res}")


def test_post_mortem_of_a_module_function(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp"]}))
    ran = _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["boom"]}))
    failed = ran["results"][0]["handle"]
    frames = _debug(mcp, kid, "where")
    assert frames["state"] == "post_mortem" and frames["handle"] == failed
    assert "ZeroDivisionError" in frames["reason"]
    listed = frames["frames"]
    assert listed[0]["cell_id"] == "boom" and listed[0]["line"] == 2
    assert listed[-1]["function"] == "scale" and listed[-1]["file"].endswith("helpers.py")
    assert listed[-1]["line"] == 3 and "factor - factor" in listed[-1]["text"]
    assert frames["frame"] == len(listed) - 1  # the innermost frame is selected
    inner = _debug(mcp, kid, "p total", handle=failed)
    assert inner["value"]["kind"] == "scalar" and inner["value"]["value"] == 18
    up = _debug(mcp, kid, "up")
    assert up["where"]["cell_id"] == "boom"
    table = _debug(mcp, kid, "p local_df")["value"]
    assert table["kind"] == "dataframe" and table["shape"] == [3, 2]
    assert {c["name"]: c["dtype"] for c in table["columns"]}["a"] == "int64"
    expr = _debug(mcp, kid, "p local_df['a'].sum() * 2")["value"]
    assert expr["value"] == 12
    assert _debug(mcp, kid, "down")["where"]["function"] == "scale"
    local = _debug(mcp, kid, "locals")["locals"]
    names = {e["name"]: e for e in local["entries"]}
    assert names["factor"]["value"] == 3 and names["frame"]["kind"] == "dataframe"
    bad = _debug(mcp, kid, "p nope + 1")
    assert any("NameError" in n for n in bad["notes"])
    env_ = envelope(mcp.tool("debug", {"kernel_id": kid, "command": "frobnicate"}))
    assert env_["code"] == "bad_argument" and "where" in env_["hint"]
    env_ = envelope(mcp.tool("debug", {"kernel_id": kid, "command": "next"}))
    assert env_["code"] == "debug_state"


def test_breakpoint_by_cell_line_steps_and_scratch_goes_on(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp"]}))
    armed = _debug(mcp, kid, "break loop:3")
    assert armed["breakpoints"] == ["1 cell loop:3"]
    running = _run_in_background(mcp, kid, "loop")
    paused = _until_paused(mcp, kid)
    assert paused["where"]["cell_id"] == "loop" and paused["where"]["line"] == 3
    handle = paused["handle"]
    cells = {c["cell_id"]: c for c in _ok(mcp.tool("list_cells", {"kernel_id": kid}))["cells"]}
    assert cells["loop"]["state"] == "running" and "line 3" in cells["loop"]["paused"]
    read = _ok(mcp.tool("read_cell", {"kernel_id": kid, "handle": handle}))
    assert read["state"] == "running" and read["paused"] == "cell loop line 3"
    assert _debug(mcp, kid, "p i")["value"]["value"] == 0
    scratch = mcp.tool("ipython", {"kernel_id": kid, "code": "print(6 * 7)"})
    assert scratch.structured_content["state"] == "ok" and "42" in text_of(scratch)
    inspected = mcp.tool("inspect", {"kernel_id": kid, "name": "vals"})
    assert not inspected.is_error and '"length":0' in text_of(inspected).replace(" ", "")
    stepped = _debug(mcp, kid, "next")
    assert stepped["state"] == "paused" and stepped["where"]["line"] == 2  # back to the for
    _debug(mcp, kid, "clear")
    done = _debug(mcp, kid, "continue")
    assert done["state"] != "paused"
    assert any("finished ok" in n for n in done["notes"]), done
    result = running.result(60)
    assert not result.is_error and "done [0, 2, 4]" in text_of(result)


def test_breakpoint_by_function_name(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp"]}))
    _debug(mcp, kid, "break double")
    running = _run_in_background(mcp, kid, "loop")
    paused = _until_paused(mcp, kid)
    assert paused["where"]["function"] == "double" and paused["where"]["line"] == 8
    assert _debug(mcp, kid, "p x")["value"]["value"] == 0
    assert _debug(mcp, kid, "next")["where"]["line"] == 9
    assert _debug(mcp, kid, "p y")["value"]["value"] == 0
    again = _debug(mcp, kid, "continue")  # the next call of double stops again
    assert again["state"] == "paused" and again["where"]["function"] == "double"
    assert _debug(mcp, kid, "p x")["value"]["value"] == 1
    _debug(mcp, kid, "clear")
    _debug(mcp, kid, "continue")
    assert "done [0, 2, 4]" in text_of(running.result(60))


def test_interrupt_ends_a_paused_run(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp"]}))
    _debug(mcp, kid, "break wait:2")
    running = _run_in_background(mcp, kid, "wait")
    paused = _until_paused(mcp, kid)
    _debug(mcp, kid, "clear")
    stopped = _ok(mcp.tool("interrupt", {"kernel_id": kid, "handle": paused["handle"]}))
    assert stopped["action"] == "interrupted", stopped
    result = running.result(60)
    assert "KeyboardInterrupt" in text_of(result) or "interrupted" in text_of(result)
    alive = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "1 + 1"}))
    assert alive["state"] == "ok"
    assert _debug(mcp, kid, "status")["state"] != "paused"


def test_replay_a_failed_cell_without_rerunning_the_slow_one(env: Any) -> None:
    mcp, kid, root = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp", "slow"]}))
    failed = mcp.tool("run_cells", {"kernel_id": kid, "cells": ["later"]})
    assert "ZeroDivisionError" in text_of(failed)
    marker = root / "marker.txt"
    assert marker.read_text() == "ran\n"
    started = time.monotonic()
    replay = _debug(mcp, kid, "replay later")
    took = time.monotonic() - started
    assert replay["state"] == "paused", replay
    assert replay["where"]["cell_id"] == "later" and replay["where"]["line"] == 3
    assert took < 4, took  # the slow cell (5 s) did not run again
    assert "live state" in replay["notes"][0]
    assert _debug(mcp, kid, "p offset")["value"]["value"] == 11
    assert _debug(mcp, kid, "p parts")["value"]["length"] == 2
    assert marker.read_text() == "ran\n"
    _debug(mcp, kid, "continue")
    assert _debug(mcp, kid, "status")["state"] == "post_mortem"


def _plan(mcp: McpSession, kid: str) -> dict[str, list[str]]:
    plan = _ok(mcp.tool("run_stale", {"kernel_id": kid}))
    return {
        e["cell_id"]: sorted(r["message"] for r in e["reasons"])
        for e in plan["stale"] + plan.get("blocked", [])
    }


def test_replay_from_a_checkpoint_leaves_no_needless_restore_in_the_plan(env: Any) -> None:
    mcp, kid, root = env
    before = _plan(mcp, kid)  # `later` failed
    assert "later" in before, before
    clobber = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "base = -1"}))
    assert clobber["state"] == "ok"
    clobbered = _plan(mcp, kid)  # `slow` would re-run to give `base` back
    assert any("base was overwritten" in m for m in clobbered.get("slow", [])), clobbered
    replay = _debug(mcp, kid, "replay later")
    assert replay["state"] == "paused" and "base restored" in replay["notes"][0], replay
    assert _debug(mcp, kid, "p offset")["value"]["value"] == 11
    _debug(mcp, kid, "continue")
    after = _plan(mcp, kid)
    # the value is back: the plan is the one before scratch code overwrote it
    assert after == before, after
    assert (root / "marker.txt").read_text() == "ran\n"


def test_replay_restores_a_value_the_failed_run_mutated_from_its_checkpoint(env: Any) -> None:
    mcp, kid, root = env
    failed = mcp.tool("run_cells", {"kernel_id": kid, "cells": ["mutate"]})
    assert "ZeroDivisionError" in text_of(failed)
    assert '"length":4' in text_of(mcp.tool("inspect", {"kernel_id": kid, "name": "data"}))
    replay = _debug(mcp, kid, "replay mutate")
    assert replay["state"] == "paused" and replay["where"]["line"] == 2, replay
    assert "data restored" in replay["notes"][0], replay["notes"]
    # the value the cell started from, then its own append: not the failed run's [1, 2, 3, 4]
    # appended to once more
    assert _debug(mcp, kid, "p data")["value"]["length"] == 4
    assert (root / "marker.txt").read_text() == "ran\n"  # the slow cell did not run again
    _debug(mcp, kid, "continue")


def test_status_and_where_show_a_run_that_never_pauses(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp"]}))
    _debug(mcp, kid, "clear")
    running = _run_in_background(mcp, kid, "spin")
    try:
        deadline = time.monotonic() + 60
        status = _debug(mcp, kid, "status")
        while status["state"] != "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            status = _debug(mcp, kid, "status")
        assert status["state"] == "running" and status["handle"], status
        assert "cell spin" in status["reason"], status
        # (an earlier test's failure is still kept: what runs comes first)
        where = _debug(mcp, kid, "where")
        assert where["state"] == "running" and where["handle"] == status["handle"], where
    finally:
        _ok(mcp.tool("interrupt", {"kernel_id": kid}))
    running.result(60)
    assert _debug(mcp, kid, "status")["state"] != "running"


def test_a_cell_breakpoint_inside_a_generator_another_cell_defined_pauses(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp", "defs"]}))
    for place, line in (("defs:3", 3), ("defs:7", 7)):  # in the generator, in the function
        _debug(mcp, kid, "clear")
        _debug(mcp, kid, f"break {place}")
        running = _run_in_background(mcp, kid, "calls")
        paused = _until_paused(mcp, kid)
        assert paused["where"]["line"] == line, paused
        _debug(mcp, kid, "clear")
        _debug(mcp, kid, "continue")
        assert "got [0, 2, 4] 2" in text_of(running.result(60))


def test_a_function_breakpoint_on_a_generator_pauses(env: Any) -> None:
    mcp, kid, _ = env
    _ok(mcp.tool("run_cells", {"kernel_id": kid, "cells": ["imp", "defs"]}))
    _debug(mcp, kid, "clear")
    _debug(mcp, kid, "break evens")
    running = _run_in_background(mcp, kid, "calls")
    paused = _until_paused(mcp, kid)
    assert paused["where"]["function"] == "evens", paused
    _debug(mcp, kid, "clear")
    _debug(mcp, kid, "continue")
    assert "got [0, 2, 4] 2" in text_of(running.result(60))
