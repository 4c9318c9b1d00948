"""``edit_cell`` on a real kernel: the MCP tool (official client, stdio) and the CLI commands."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from tests.mcp_server.harness import McpSession, envelope, server_env, shutdown_daemon, stdio_params
from tests.mcp_server.harness import text_of as _text

pytestmark = pytest.mark.kernel

NOTEBOOK = "edits.ipynb"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("edit") / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "ipykeep.toml").write_text("")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("clean = [1, 2, 3]", id="load"),
        nbformat.v4.new_code_cell("total = sum(clean)\nprint(total)", id="total"),
        nbformat.v4.new_code_cell("other = 'independent'", id="other"),
    ]
    nbformat.write(nb, root / NOTEBOOK)
    yield root
    shutdown_daemon(root)


@pytest.fixture(scope="module")
def mcp(project: Path) -> Iterator[McpSession]:
    session = McpSession(stdio_params(project)).start()
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def kernel(mcp: McpSession) -> str:
    res = mcp.tool("create_kernel", {"notebook": NOTEBOOK})
    assert not res.is_error, _text(res)
    return str(res.structured_content["kernel_id"])


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, _text(res)
    return res


def _versions(mcp: McpSession, kid: str) -> dict[str, str]:
    cells = _ok(mcp.tool("list_cells", {"kernel_id": kid})).structured_content["cells"]
    return {c["cell_id"]: c["version"] for c in cells}


def _sources(project: Path) -> dict[str, str]:
    return {c.id: c.source for c in nbformat.read(project / NOTEBOOK, as_version=4).cells}


def _edit(mcp: McpSession, kid: str, **args: object):  # type: ignore[no-untyped-def]
    return mcp.tool("edit_cell", {"kernel_id": kid, **args})


def test_an_edit_reports_its_version_and_the_cells_it_made_stale(
    mcp: McpSession, kernel: str, project: Path
) -> None:
    version = _versions(mcp, kernel)["load"]
    res = _ok(_edit(mcp, kernel, cell="load", version=version, source="clean = [1, 2, 3, 4]"))
    out = json.loads(_text(res))
    assert out["cell_id"] == "load" and out["document"] == "file"
    assert out["version"] == _versions(mcp, kernel)["load"] != version
    stale = {e["cell_id"]: e["reasons"] for e in out["now_stale"]}
    assert set(stale) == {"load", "total"}  # the reader too, never the independent cell
    assert any("clean" in r for r in stale["total"]), stale
    assert _sources(project)["load"] == "clean = [1, 2, 3, 4]"
    assert len(_text(res)) < 1000  # small: no cell sources, no outputs
    ran = _ok(mcp.tool("run_stale", {"kernel_id": kernel, "execute": True}))
    assert "10" in _text(ran)


def test_a_stale_version_is_refused_with_the_current_source(
    mcp: McpSession, kernel: str, project: Path
) -> None:
    old = _versions(mcp, kernel)["total"]
    # someone else (a file tool, a person) edits the cell in the file meanwhile
    nb = nbformat.read(project / NOTEBOOK, as_version=4)
    nb.cells[1].source = "total = sum(clean) * 100\nprint(total)"
    nbformat.write(nb, project / NOTEBOOK)
    env = envelope(_edit(mcp, kernel, cell="total", version=old, source="total = 0"))
    assert env["code"] == "stale_version" and env["retryable"] is True
    assert "total = sum(clean) * 100" in env["message"]
    current = env["details"]["version"]
    assert current == _versions(mcp, kernel)["total"] and f"version={current}" in env["hint"]
    assert _sources(project)["total"].startswith("total = sum(clean) * 100")  # theirs kept
    retry = _ok(_edit(mcp, kernel, cell="total", version=current, source="total = -1"))
    assert json.loads(_text(retry))["version"] == _versions(mcp, kernel)["total"]


def test_insert_move_delete(mcp: McpSession, kernel: str, project: Path) -> None:
    made = json.loads(
        _text(_ok(_edit(mcp, kernel, action="insert", source="extra = total + 1", after="total")))
    )
    assert made["index"] == 2 and made["cell_id"] in _sources(project)
    assert [e["cell_id"] for e in made["now_stale"]] == [made["cell_id"]]
    v = _versions(mcp, kernel)
    moved = json.loads(
        _text(
            _ok(_edit(mcp, kernel, action="move", cell="other", version=v["other"], before="load"))
        )
    )
    assert moved["index"] == 0 and list(_sources(project))[0] == "other"
    gone = json.loads(
        _text(
            _ok(_edit(mcp, kernel, action="delete", cell=made["cell_id"], version=made["version"]))
        )
    )
    assert made["cell_id"] in gone["no_longer_stale"] and made["cell_id"] not in _sources(project)
    env = envelope(_edit(mcp, kernel, action="move", cell="other", version=v["other"]))
    assert env["code"] == "bad_argument" and "after or before" in env["message"]


def _cli(project: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ipykeep", *args, "-n", NOTEBOOK],
        cwd=project,
        env=server_env(project),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_commands(mcp: McpSession, kernel: str, project: Path) -> None:
    version = _versions(mcp, kernel)["other"]
    done = _cli(
        project, "edit-cell", "other", "-", "--version", version, stdin="other = 'from cli'\n"
    )
    assert done.returncode == 0, done.stderr
    assert "edited cell 0 (other), version" in done.stdout and "now stale: other" in done.stdout
    assert _sources(project)["other"] == "other = 'from cli'\n"
    stale = _cli(project, "delete-cell", "other", "--version", version)
    assert stale.returncode == 4 and "other = 'from cli'" in stale.stderr, stale.stderr
    assert "other" in _sources(project)
    made = _cli(project, "insert-cell", "# Notes", "--markdown", "--before", "load", "--json")
    assert made.returncode == 0, made.stderr
    new = json.loads(made.stdout)
    assert new["action"] == "insert" and new["index"] == 1 and new["now_stale"] == []
    status = _cli(project, "status")
    assert f"@{new['version']}" in status.stdout, status.stdout
