"""A person in JupyterLab and the agent (official MCP client) on one shared document.

With ``serve_collaboration = true`` and jupyter-collaboration installed, the served notebook is
the Jupyter server's Y document: the person's typing and the agent's ``edit_cell`` edits and
outputs meet there, the browser shows them live and the server saves them. An agent's direct
write of the ``.ipynb`` (as file tools write it) is merged into that document cell by cell.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

pytest.importorskip("jupyter_server_ydoc")

from ipykeep.project.cell_edits import cell_version
from ipykeep.serve.file_merge import COPY_WINDOW_S
from tests.mcp_server.harness import McpSession, envelope, shutdown_daemon, stdio_params
from tests.mcp_server.harness import text_of as _text
from tests.serve.conftest import ARTIFACTS, run_cli
from tests.serve.test_serve_browser import CHROMIUM, CHROMIUM_ARGS, _close_dialog

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.browser,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium"),
]

NOTEBOOK = "shared.ipynb"
KERNEL = "k1"  # the served kernel's id, set by the project fixture
ROUNDS = 20
FILE_ROUNDS = 20


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("shared") / "proj"
    (root / ".git").mkdir(parents=True)
    (root / "ipykeep.toml").write_text('serve_collaboration = true\ndataflow = "static"\n')
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [
        nbformat.v4.new_code_cell("a = 0", id="cellA"),
        nbformat.v4.new_code_cell("b = 0\nprint('b is', b)", id="cellB"),
    ]
    nbformat.write(nb, root / NOTEBOOK)
    try:
        res = run_cli("start", NOTEBOOK, "--serve", "--json", cwd=root)
        assert res.returncode == 0, res.stderr
        rec = json.loads(res.stdout)
        global KERNEL
        KERNEL = rec["kernel_id"]
        yield root, rec["served_url"]
    finally:
        shutdown_daemon(root)


@pytest.fixture(scope="module")
def mcp(project: tuple[Path, str]) -> Iterator[McpSession]:
    session = McpSession(stdio_params(project[0])).start()
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def page(project: tuple[Path, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 900})
            pg.goto(project[1])
            pg.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=90_000)
            _close_dialog(pg, [])
            yield pg
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / "shared-document.png"))
            browser.close()


def _editor(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(".cm-content")


def _type_at_end(page: Any, index: int, text: str) -> None:
    _close_dialog(page, [])
    _editor(page, index).click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


def _saved(root: Path) -> Any:
    return nbformat.read(str(root / NOTEBOOK), as_version=4)


def _wait(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _tool(mcp: McpSession, name: str, args: dict[str, Any]) -> Any:
    return mcp.tool(name, {"kernel_id": KERNEL, **args})


def _ok(res: Any) -> dict[str, Any]:
    assert not res.is_error, _text(res)
    return dict(json.loads(_text(res)))


def _live_version(mcp: McpSession, cell: str) -> str:
    """The cell's version in the live document (list_cells reads it while it is shared)."""
    cells = _tool(mcp, "list_cells", {}).structured_content["cells"]
    return str(next(c["version"] for c in cells if c["cell_id"] == cell))


def test_person_and_agent_edit_one_document_for_twenty_rounds(
    project: tuple[Path, str], mcp: McpSession, page: Any
) -> None:
    root = project[0]
    version = _live_version(mcp, "cellB")
    for i in range(1, ROUNDS + 1):
        _type_at_end(page, 0, f"\n# person {i}")
        src = f"b = {i}\nprint('b is', b)"
        out = _ok(_tool(mcp, "edit_cell", {"cell": "cellB", "version": version, "source": src}))
        assert out["document"] == "shared", out
        version = out["version"]
        ran = _tool(mcp, "run_cells", {"cells": ["cellB"]})
        assert not ran.is_error and f"b is {i}" in _text(ran), _text(ran)
        page.locator(".jp-OutputArea-output", has_text=f"b is {i}").first.wait_for(timeout=30_000)
        assert f"b = {i}" in _editor(page, 1).inner_text()

    # Every keystroke of the person and every edit and output of the agent reach the file.
    def complete() -> bool:
        a, b = _saved(root).cells
        return (
            all(f"# person {i}" in a.source for i in range(1, ROUNDS + 1))
            and b.source == f"b = {ROUNDS}\nprint('b is', b)"
            and any(f"b is {ROUNDS}" in o.get("text", "") for o in b.outputs)
        )

    _wait(complete, "the server to save both sides' edits")
    a = _saved(root).cells[0].source
    assert a.count("# person") == ROUNDS
    # The browser shows the person's lines too, in order.
    shown = _editor(page, 0).inner_text()
    assert shown.index("# person 1") < shown.index(f"# person {ROUNDS}")


def test_an_edit_against_a_version_the_person_has_changed_is_refused(
    project: tuple[Path, str], mcp: McpSession, page: Any
) -> None:
    old = _live_version(mcp, "cellB")
    _type_at_end(page, 1, "  # person's note")
    # The person's typing is in the live document before the server saves it.
    env: dict[str, Any] = {}

    def refused() -> bool:
        res = _tool(mcp, "edit_cell", {"cell": "cellB", "version": old, "source": "b = -1"})
        if not res.is_error:
            raise AssertionError(f"the stale edit went through: {_text(res)}")
        env.update(envelope(res))
        return "# person's note" in env["message"]

    _wait(refused, "a refusal carrying the person's source")
    assert env["code"] == "stale_version"
    assert env["details"]["version"] != old
    assert "b = -1" not in _editor(page, 1).inner_text()
    # The retry against the version the refusal gave goes through and keeps the note.
    current = env["details"]["version"]
    src = "b = 99\nprint('b is', b)  # person's note"
    out = _ok(_tool(mcp, "edit_cell", {"cell": "cellB", "version": current, "source": src}))
    assert out["document"] == "shared"
    page.locator(".jp-Notebook .jp-CodeCell .cm-content", has_text="b = 99").first.wait_for(
        timeout=30_000
    )


def test_a_plan_reads_the_live_document(project: tuple[Path, str], mcp: McpSession) -> None:
    plan = _tool(mcp, "run_stale", {})
    assert not plan.is_error, _text(plan)
    assert plan.structured_content["reads"] == "live_document"


def _write_like_a_file_tool(root: Path, nb: Any) -> None:
    """nbformat write to a temporary file, then an atomic replace (NotebookEdit, patch tools)."""
    tmp = root / f".{NOTEBOOK}.tmp"
    nbformat.write(nb, str(tmp))
    os.replace(tmp, root / NOTEBOOK)


def _with_source(nb: Any, cell_id: str, source: str) -> Any:
    next(c for c in nb.cells if c.id == cell_id).source = source
    return nb


def test_a_file_tools_writes_merge_with_the_persons_typing_for_twenty_rounds(
    project: tuple[Path, str], mcp: McpSession, page: Any
) -> None:
    root = project[0]
    # A rewrite of a cell the document changed moments ago is a conflict (the tool may have read
    # it before): the earlier tests' edits of cell B must be older than that.
    time.sleep(COPY_WINDOW_S)
    for i in range(1, FILE_ROUNDS + 1):
        _type_at_end(page, 0, f"\n# typed {i}")
        # The agent reads the file (the typing may not be saved yet) and writes cell B.
        src = f"b = {100 + i}\nprint('b is', b)"
        _write_like_a_file_tool(root, _with_source(_saved(root), "cellB", src))
        page.locator(
            ".jp-Notebook .jp-CodeCell .cm-content", has_text=f"b = {100 + i}"
        ).first.wait_for(timeout=30_000)
        assert f"# typed {i}" in _editor(page, 0).inner_text()
        # ... and runs it: the run takes the merged source, its output reaches the browser
        ran = _tool(mcp, "run_cells", {"cells": ["cellB"]})
        assert not ran.is_error and f"b is {100 + i}" in _text(ran), _text(ran)
        page.locator(".jp-OutputArea-output", has_text=f"b is {100 + i}").first.wait_for(
            timeout=30_000
        )

    def both_saved() -> bool:
        saved = {c.id: c for c in _saved(root).cells}
        b = saved.get("cellB")
        return (
            b is not None
            and b.source == f"b = {100 + FILE_ROUNDS}\nprint('b is', b)"
            and any(f"b is {100 + FILE_ROUNDS}" in o.get("text", "") for o in b.outputs)
            and all(f"# typed {i}" in saved["cellA"].source for i in range(1, FILE_ROUNDS + 1))
        )

    _wait(both_saved, "the server to save the person's typing and the agent's writes")
    shown = _editor(page, 0).inner_text()
    assert all(f"# typed {i}" in shown for i in range(1, FILE_ROUNDS + 1))
    assert shown.count("# typed") == FILE_ROUNDS
    # The server's saves are the document's own, not news of a change on disk.
    plan = _tool(mcp, "run_stale", {})
    assert not plan.is_error, _text(plan)
    notices = plan.structured_content.get("notices") or []
    assert not any(n.startswith("changed on disk") for n in notices), notices


def test_a_file_write_to_the_cell_the_person_is_changing_keeps_both(
    project: tuple[Path, str], mcp: McpSession, page: Any
) -> None:
    root = project[0]
    # The agent read the file before the person typed; it writes its version of B after.
    theirs = _with_source(_saved(root), "cellB", "b = 'agent'")
    _type_at_end(page, 1, "  # person's change")
    _write_like_a_file_tool(root, theirs)
    # The note: the file's version, and that it was not applied.
    note = page.locator(".jp-Notebook .jp-MarkdownCell", has_text="b = 'agent'").first
    note.wait_for(timeout=30_000)
    assert "not applied" in (note.text_content() or "")
    assert "# person's change" in _editor(page, 1).inner_text()
    assert "b = 'agent'" not in _editor(page, 1).inner_text()

    # The notice is pending for every reader: `status` shows it ...
    res = run_cli("status", "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    (kernel,) = json.loads(res.stdout)["kernels"]
    assert any("not applied to cell cellB" in n for n in kernel.get("notices") or []), kernel
    # ... and the agent is told on its next result, once.
    plan = _tool(mcp, "run_stale", {})
    assert not plan.is_error, _text(plan)
    notices = plan.structured_content.get("notices") or []
    assert any("file write not applied to cell cellB" in n for n in notices), notices
    again = _tool(mcp, "run_stale", {}).structured_content.get("notices") or []
    assert not any("not applied" in n for n in again), again

    # Both versions reach the file: the person's in the cell, the agent's in the note.
    def both_kept() -> bool:
        cells = _saved(root).cells
        b = next(c for c in cells if c.id == "cellB")
        notes = [c for c in cells if c.metadata.get("ipykeep", {}).get("conflict")]
        return "# person's change" in b.source and any(
            n.metadata["ipykeep"]["conflict"]["file_source"] == "b = 'agent'" for n in notes
        )

    _wait(both_kept, "the server to save the person's source and the note")


def _toggle_autosave(page: Any) -> None:
    """JupyterLab's Settings > Autosave Documents; the server saves a shared document only while
    one of its browsers has autosave on."""
    _close_dialog(page, [])
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Autosave Documents").first.click()


def test_status_reads_the_live_document(project: tuple[Path, str], page: Any) -> None:
    root = project[0]
    _toggle_autosave(page)  # off: the person's typing stays unsaved
    try:
        saved_a = next(c.source for c in _saved(root).cells if c.id == "cellA")
        _type_at_end(page, 0, "\n# not saved")
        unsaved = cell_version(saved_a + "\n# not saved")

        def status_shows_the_typing() -> bool:
            res = run_cli("status", "--json", cwd=root)
            assert res.returncode == 0, res.stderr
            (kernel,) = json.loads(res.stdout)["kernels"]
            cell = next(c for c in kernel["cells"] if c["cell_id"] == "cellA")
            return bool(cell["version"] == unsaved)

        _wait(status_shows_the_typing, "status to show cell A's unsaved source")
        assert "# not saved" not in next(c.source for c in _saved(root).cells if c.id == "cellA")
    finally:
        _toggle_autosave(page)
