"""After `ipykeep init`, a host can start the server exactly as written into .mcp.json."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def _stop_daemon(project: Path) -> None:
    """The server may have started the project's daemon; end it with the test."""
    descriptor = project / ".ipykeep" / "run" / "daemon.json"
    with contextlib.suppress(
        FileNotFoundError, ValueError, KeyError, TypeError, ProcessLookupError
    ):
        pid = int(json.loads(descriptor.read_text())["pid"])
        os.kill(pid, signal.SIGTERM)


async def test_host_launches_the_written_command(app, runner, project: Path, home: Path) -> None:
    result = runner.invoke(app, ["init", "analysis.ipynb", "--provider", "claude_code"])
    assert result.exit_code == 0, result.output
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["ipykeep"]
    assert entry["type"] == "stdio"

    # A host resolves the command on its own PATH, with the project as working directory.
    path = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"PATH": path, "HOME": str(home)},
        cwd=project,
    )
    try:
        with anyio.fail_after(90):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                tools = await session.list_tools()
    finally:
        _stop_daemon(project)
    assert init.server_info.name
    names = {tool.name for tool in tools.tools}
    assert {"ipython", "run_stale"} <= names, names
