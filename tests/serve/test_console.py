"""``ipykeep console`` on the agent's kernel, driven through a pty as a person types.

The agent (the official MCP client over stdio) binds a variable; the console, attached to the
same kernel, sees it in the history and in the namespace; what the console binds is in the
agent's namespace, makes the notebook cells that read it stale, and leaving the console keeps
the kernel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pexpect
import pytest

from tests.mcp_server.harness import McpSession, server_env, shutdown_daemon, stdio_params, text_of

pytestmark = pytest.mark.kernel

NOTEBOOK = "console.ipynb"
PROMPT = r"In \[\d+\]: "


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("console") / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "ipykeep.toml").write_text("")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("base = 2", id="base"),
        nbformat.v4.new_code_cell("scaled = base * 10", id="scaled"),
    ]
    nbformat.write(nb, root / NOTEBOOK)
    yield root
    shutdown_daemon(root)


@pytest.fixture(scope="module")
def agent(project: Path) -> Iterator[McpSession]:
    session = McpSession(stdio_params(project)).start()
    try:
        yield session
    finally:
        session.close()


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


def _namespace(agent: McpSession, kid: str) -> dict[str, dict[str, object]]:
    """The agent's namespace listing: each variable's entry, by name."""
    listing = json.loads(text_of(_ok(agent.tool("namespace", {"kernel_id": kid}))))
    return {e["name"]: e for e in listing["entries"]}


@pytest.mark.posix  # a pty drives the console
def test_the_console_shares_the_agents_kernel(agent: McpSession, project: Path) -> None:
    kid = _ok(agent.tool("create_kernel", {"notebook": NOTEBOOK})).structured_content["kernel_id"]
    _ok(agent.tool("ipython", {"kernel_id": kid, "code": "agent_value = 41\nprint('agent ran')"}))
    pid = _ok(agent.tool("list_kernels", {})).structured_content["kernels"][0]["pid"]

    env = {**server_env(project), "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "ipykeep", "console", NOTEBOOK],
        cwd=str(project),
        env=env,
        encoding="utf-8",
        timeout=90,
        dimensions=(40, 200),
    )
    try:
        # the history first: the agent's code and its output
        child.expect("agent_value = 41")
        child.expect("agent ran")
        child.expect(PROMPT)
        child.sendline("print('sees', agent_value + 1)")
        child.expect("sees 42")
        child.expect(PROMPT)
        child.sendline("console_value = agent_value * 2; base = 5")
        child.expect(PROMPT)
        # Ctrl-C during a run interrupts the kernel (through the daemon) and keeps its state
        child.sendline("import time; time.sleep(60)")
        time.sleep(1.5)
        child.sendintr()
        child.expect("KeyboardInterrupt")
        child.expect(PROMPT)
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before

    names = _namespace(agent, kid)
    assert names["console_value"]["value"] == 82 and names["base"]["value"] == 5, names
    res = _ok(agent.tool("ipython", {"kernel_id": kid, "code": "print(console_value, base)"}))
    assert "82 5" in text_of(res)  # the same kernel, still running after the console left
    assert _ok(agent.tool("list_kernels", {})).structured_content["kernels"][0]["pid"] == pid
    # the console's rebinding of `base` counts as scratch code: the plan restores it
    plan = _ok(agent.tool("run_stale", {"kernel_id": kid})).structured_content
    reasons = {e["cell_id"]: e["reasons"] for e in plan["stale"]}
    assert any("scratch" in r["message"] for r in reasons["base"]), plan


def test_without_jupyter_console_the_command_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from ipykeep.api.errors import MissingExtraError
    from ipykeep.cli import console

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jupyter_console" else real(name, *a),
    )
    with pytest.raises(MissingExtraError, match="jupyter_console") as info:
        console.console(None, 10)
    assert "ipykeep[console]" in info.value.hint


def test_a_plan_of_a_served_notebook_says_it_reads_the_shared_document(
    agent: McpSession, project: Path
) -> None:
    kid = _ok(agent.tool("create_kernel", {"notebook": NOTEBOOK})).structured_content["kernel_id"]
    assert "reads" not in _ok(agent.tool("run_stale", {"kernel_id": kid})).structured_content
    served = subprocess.run(
        [sys.executable, "-m", "ipykeep", "serve", NOTEBOOK],
        cwd=project,
        env=server_env(project),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert served.returncode == 0, served.stderr
    try:
        plan = _ok(agent.tool("run_stale", {"kernel_id": kid}))
        # --serve's default: the notebook is the server's shared document
        assert plan.structured_content["reads"] == "live_document"
        assert "unsaved edits in the browser are in it" in text_of(plan)
    finally:
        subprocess.run(
            [sys.executable, "-m", "ipykeep", "serve", NOTEBOOK, "--stop"],
            cwd=project,
            env=server_env(project),
            timeout=120,
        )
