"""Results as a real agent host forwards them to its model, over stdio with the official client.

Claude Code forwards ``structuredContent`` when a result has it (else the text) plus images;
Codex forwards ``structuredContent`` alone when present (else the text and images). ``HostView``
applies each rule, and the checks here hold for what *both* hosts' models would read. One server
and one notebook kernel for the module; tests run in file order (the last ones edit the notebook).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.mcp_server.harness import (
    HostView,
    McpSession,
    channel_sizes,
    host_views,
    make_project,
    shutdown_daemon,
    stdio_params,
    text_of,
)

pytestmark = pytest.mark.kernel

NOTEBOOK = "answer.ipynb"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = make_project(tmp_path_factory.mktemp("hosts") / "proj")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import time\nbase = 41", id="load"),
        nbformat.v4.new_code_cell("time.sleep(2.5)\nslept = True", id="slow"),
        nbformat.v4.new_code_cell("answer = base + 1\nanswer", id="answer"),
    ]
    nbformat.write(nb, root / NOTEBOOK)
    yield root
    shutdown_daemon(root)


#: MCP log messages the client received (notices), in order.
LOGS: list[Any] = []
#: Artifact URIs announced to the model, read again once every kernel is gone.
ANNOUNCED: list[str] = []


@pytest.fixture(scope="module")
def mcp(project: Path) -> Iterator[McpSession]:
    async def on_log(params: Any) -> None:
        LOGS.append(params)

    session = McpSession(stdio_params(project), logging_callback=on_log).start()
    try:
        yield session
    finally:
        session.close()
        shutdown_daemon(project)


class Progress:
    """A progress callback that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, total, message))


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


@pytest.fixture(scope="module")
def kid(mcp: McpSession) -> Iterator[str]:
    progress = Progress()
    res = _ok(mcp.tool("create_kernel", {"notebook": NOTEBOOK}, progress=progress))
    assert res.structured_content["warm"]["finished"], text_of(res)
    # the warm-up (2.5 s of sleep) was reported while it ran, then its end
    assert len(progress.events) >= 3, progress.events
    assert any("warming" in (m or "") for _, _, m in progress.events), progress.events
    assert [p for p, _, _ in progress.events] == sorted(p for p, _, _ in progress.events)
    yield res.structured_content["kernel_id"]


def test_expression_value_reaches_the_model(mcp: McpSession, kid: str) -> None:
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "y = 41; y + 1"}))
    assert res.structured_content is not None  # the hosts take this channel…
    assert res.structured_content["output"].strip() == "42"  # …and it holds the value
    assert "42" in text_of(res)
    for view in host_views(res):
        assert "42" in view.text, view.host


def test_traceback_with_the_failing_line_reaches_the_model(mcp: McpSession, kid: str) -> None:
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "x = 0\n1/x"}))
    error = res.structured_content["error"]
    assert error["ename"] == "ZeroDivisionError"
    assert "1/x" in error["traceback"] and "ZeroDivisionError" in error["traceback"]
    assert "1/x" in text_of(res)
    for view in host_views(res):
        assert "1/x" in view.text and "ZeroDivisionError" in view.text, view.host


def test_long_print_head_and_tail_within_budget(mcp: McpSession, kid: str) -> None:
    res = _ok(
        mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "for i in range(3000):\n    print(f'line {i:04d}')"},
        )
    )
    for view in host_views(res):
        text = view.text
        assert "line 0000" in text and "line 2999" in text and "line 1500" not in text
        assert res.structured_content["uri"] in text  # where the rest is
        assert view.size < 4096, (view.host, view.size)
    ANNOUNCED.append(res.structured_content["uri"])
    text_bytes, structured_bytes = channel_sizes(res)
    assert text_bytes < 4096 and structured_bytes < 4096


def test_overlapping_call_returns_its_value(mcp: McpSession, kid: str) -> None:
    sleeper = _ok(
        mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "__import__('time').sleep(3)\n'woke'", "yield_time_ms": 0},
        )
    )
    handle = sleeper.structured_content["handle"]
    t0 = time.monotonic()
    quick = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "6 * 7"}))
    assert time.monotonic() - t0 < 2.5  # it did not wait for the sleeping cell
    assert quick.structured_content["state"] == "ok"
    assert quick.structured_content["output"].strip() == "42", quick.structured_content
    assert "42" in HostView(quick).text
    done = _ok(mcp.tool("read_cell", {"kernel_id": kid, "handle": handle, "yield_time_ms": 10_000}))
    assert "'woke'" in HostView(done).text  # the main shell's value went to its own call


def test_list_cells_shows_the_cells(mcp: McpSession, kid: str) -> None:
    res = _ok(mcp.tool("list_cells", {"kernel_id": kid}))
    view = HostView(res)
    cells = res.structured_content["cells"]
    assert [c["cell_id"] for c in cells] == ["load", "slow", "answer"]
    assert all(c["state"] in ("ok", "stale") for c in cells), cells
    assert cells[2]["first_line"] == "answer = base + 1"
    for cid in ("load", "slow", "answer"):
        assert cid in view.text
    assert (
        "recent scratch" not in view.text and res.structured_content["scratch"]
    )  # scratch runs listed


def test_plot_is_image_content(mcp: McpSession, kid: str) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 30_000}))
    # No structured content: Codex would forward it alone and drop the image.
    assert res.structured_content is None
    for view in host_views(res):
        assert len(view.images) == 1 and view.images[0].mime_type == "image/png", view.host
        assert "ipykeep://artifacts/" in view.text and "ok" in view.text, view.host


def test_plot_with_text_reaches_both_hosts(mcp: McpSession, kid: str) -> None:
    code = (
        "import matplotlib.pyplot as plt\nprint('forty', 40 + 2)\n"
        "plt.plot([1, 2])\nplt.show()\n40 + 2"
    )
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 30_000}))
    for view in host_views(res):
        assert len(view.images) == 1, view.host
        assert "forty 42" in view.text, view.host


def test_run_cells_reports_progress(mcp: McpSession, kid: str) -> None:
    progress = Progress()
    res = _ok(
        mcp.tool("run_cells", {"kernel_id": kid, "cells": ["slow", "answer"]}, progress=progress)
    )
    view = HostView(res)
    assert [r["cell_id"] for r in res.structured_content["results"]] == ["slow", "answer"]
    assert res.structured_content["results"][1]["output"].strip() == "42"
    assert "42" in view.text
    assert len(progress.events) >= 2, progress.events  # the start, then at least one tick in 2.5 s
    assert all(total == 2 for _, total, _ in progress.events)
    assert any("running" in (m or "") for _, _, m in progress.events), progress.events


def _edit(project: Path, cell_id: str, source: str) -> None:
    nb = nbformat.read(project / NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            cell.source = source
    nbformat.write(nb, project / NOTEBOOK)


def test_plan_cells_and_reasons_reach_the_model(mcp: McpSession, kid: str, project: Path) -> None:
    _edit(project, "load", "import time\nbase = 40")
    res = _ok(mcp.tool("run_stale", {"kernel_id": kid}))
    views = host_views(res)
    stale = res.structured_content["stale"]
    # slow uses time from load, but the edit left that import as it was: only base's reader re-runs
    assert [e["cell_id"] for e in stale] == ["load", "answer"], stale
    for entry in stale:
        assert entry["reasons"] and all(r["message"] for r in entry["reasons"])
        for reason in entry["reasons"]:
            for view in views:
                assert reason["message"] in view.text, view.host  # the why, not only the kind
    assert all("base" in view.text for view in views)
    # Every planned cell ran at warm-up: the model sees each one's last duration and the cost.
    assert all(isinstance(e.get("last_duration_s"), float) for e in stale), stale
    cost = res.structured_content["cost"]
    assert cost["plan_s"] >= 0 and isinstance(cost["fresh_is_cheaper"], bool), cost

    progress = Progress()
    ran = _ok(mcp.tool("run_stale", {"kernel_id": kid, "execute": True}, progress=progress))
    assert ran.structured_content["executed"] is True
    outputs = {r["cell_id"]: r.get("output", "") for r in ran.structured_content["results"]}
    assert outputs["answer"].strip() == "41"
    assert progress.events, "no progress while run_stale executed"


def test_notices_are_sent_as_log_messages(mcp: McpSession, kid: str, project: Path) -> None:
    """A notice (here: the notebook changed on disk) rides the result and an MCP log message."""
    # The last test's run_stale replied before its outputs were written (write_delay_ms): an
    # edit inside that window is merged into that write, and reported as an edit of a cell that
    # ran ("kept their new source") rather than as a change on disk. Edit after the write.
    deadline = time.monotonic() + 10
    while not any(
        "41" in json.dumps(c.get("outputs", []))
        for c in nbformat.read(project / NOTEBOOK, as_version=4).cells
        if c.get("id") == "answer"
    ):
        assert time.monotonic() < deadline, "the last run's outputs were never written"
        time.sleep(0.1)
    LOGS.clear()
    _edit(project, "answer", "answer = base + 2\nanswer")
    deadline = time.monotonic() + 20
    notices: list[str] = []
    while not notices and time.monotonic() < deadline:
        time.sleep(0.3)
        res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "1"}))
        notices = res.structured_content.get("notices") or []
    assert any("changed on disk" in n for n in notices), notices
    assert any("changed on disk" in json.dumps(p.data) for p in LOGS), LOGS
    assert all(p.level == "warning" and p.logger == "ipykeep" for p in LOGS)


def test_fresh_run_restarts_and_runs_every_cell(mcp: McpSession, kid: str, project: Path) -> None:
    _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "leftover = 1"}))
    ran = _ok(mcp.tool("run_stale", {"kernel_id": kid, "execute": True, "fresh": True}))
    summary = ran.structured_content
    assert summary["fresh_run"] is True and summary["ok"] is True, summary
    code_cells = [
        c.id for c in nbformat.read(project / NOTEBOOK, as_version=4).cells if c.cell_type == "code"
    ]
    assert [r["cell_id"] for r in summary["results"]] == code_cells
    gone = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "'leftover' in globals()"}))
    assert "False" in HostView(gone).text  # the restart dropped what scratch code left


def test_a_dead_kernel_is_restarted_and_the_plan_says_what_to_rerun(
    mcp: McpSession, kid: str
) -> None:
    died = mcp.tool("ipython", {"kernel_id": kid, "code": "import os; os._exit(1)"})
    assert "lost" in HostView(died).text or died.is_error
    deadline = time.monotonic() + 20
    while _ok(mcp.tool("list_kernels")).structured_content["kernels"][0]["state"] != "dead":
        assert time.monotonic() < deadline, "the kernel's death was not noticed"
        time.sleep(0.2)
    restarted = _ok(mcp.tool("restart_kernel", {"kernel_id": kid}))
    assert restarted.structured_content["state"] == "idle"
    plan = _ok(mcp.tool("run_stale", {"kernel_id": kid})).structured_content
    kinds = {e["cell_id"]: {r["kind"] for r in e["reasons"]} for e in plan["stale"]}
    assert set(kinds) == {"load", "slow", "answer"} and all(
        "kernel_restarted" in k for k in kinds.values()
    ), kinds
    ran = _ok(mcp.tool("run_stale", {"kernel_id": kid, "execute": True})).structured_content
    assert ran["ok"] is True and "stopped" not in ran


def test_artifacts_stay_readable_after_the_last_kernel_closes(
    mcp: McpSession, kid: str, project: Path
) -> None:
    from ipykeep.client.connection import find_daemon

    assert ANNOUNCED, "the long-print test announces an artifact first"
    closed = _ok(mcp.tool("close_kernel", {"kernel_id": kid}))
    assert closed.structured_content["state"] == "closed"
    deadline = time.monotonic() + 20
    while find_daemon(project) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert find_daemon(project) is None, "the daemon exits with its last kernel"
    full = mcp.run(lambda c: c.read_resource(ANNOUNCED[0]))
    body = full.contents[0].text
    assert body.startswith("line 0000\n") and body.endswith("line 2999\n")
