"""The README's install (an unactivated .venv): init writes a command every host can run.

`ipykeep init` runs as the user would type it, `.venv/bin/ipykeep init`, with a PATH that lacks
the venv. Then each host's entry is started exactly as that host starts it (its command and
arguments from its own file, the same PATH, the project as working directory) and answers
`initialize` and `tools/list` through the official MCP client.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ipykeep.scaffold.jsonfile import blank_comments
from ipykeep.scaffold.launcher import running_script

#: A PATH as a desktop or IDE gives it: system directories, no virtual environment.
HOST_PATH = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])


def _stop_daemon(project: Path) -> None:
    descriptor = project / ".ipykeep" / "run" / "daemon.json"
    with contextlib.suppress(
        FileNotFoundError, ValueError, KeyError, TypeError, ProcessLookupError
    ):
        os.kill(int(json.loads(descriptor.read_text())["pid"]), signal.SIGTERM)


def _entries(project: Path) -> dict[str, list[str]]:
    """Each host's argv, read from its own file as the host reads it."""

    def jsonc(name: str) -> dict:
        return json.loads(blank_comments((project / name).read_text()))

    claude = jsonc(".mcp.json")["mcpServers"]["ipykeep"]
    gemini = jsonc(".gemini/settings.json")["mcpServers"]["ipykeep"]
    vscode = jsonc(".vscode/mcp.json")["servers"]["ipykeep"]
    return {
        "claude_code": [claude["command"], *claude["args"]],
        "gemini": [gemini["command"], *gemini["args"]],
        "opencode": jsonc("opencode.json")["mcp"]["ipykeep"]["command"],
        # VS Code expands ${workspaceFolder} before it starts the server
        "vscode": [
            vscode["command"],
            *(a.replace("${workspaceFolder}", str(project)) for a in vscode["args"]),
        ],
    }


@pytest.mark.kernel  # starts the MCP server four times
async def test_written_command_runs_from_a_path_without_the_venv(project: Path, home: Path) -> None:
    script = running_script()
    assert script is not None
    assert not any((Path(d) / "ipykeep").exists() for d in HOST_PATH.split(os.pathsep))
    env = {"PATH": HOST_PATH, "HOME": str(home)}
    init = subprocess.run(
        [str(script), "init", "analysis.ipynb"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    # init says which launcher it wrote and why
    assert f"launcher: {script} mcp-serve (`ipykeep` is not on PATH" in init.stdout
    entries = _entries(project)
    assert all(argv[0] == str(script) for argv in entries.values()), entries
    try:
        for host, argv in entries.items():
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=project)
            with anyio.fail_after(120):
                async with (
                    stdio_client(params) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    hello = await session.initialize()
                    tools = await session.list_tools()
            assert hello.server_info.name, host
            names = {tool.name for tool in tools.tools}
            assert {"ipython", "run_stale", "debug", "edit_cell"} <= names, (host, names)
    finally:
        _stop_daemon(project)
