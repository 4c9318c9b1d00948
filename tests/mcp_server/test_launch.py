"""``mcp-serve``'s fast path: options from the CLI's table, the full CLI for anything else,
refused unexpanded paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ipykeep.cli import fast
from ipykeep.cli.commands import BY_NAME
from ipykeep.cli.mcp import serve_options
from ipykeep.mcp_server.launch import ServeOptions


def parse(argv: list[str]) -> ServeOptions | None:
    values = fast.parse(BY_NAME["mcp-serve"], argv)
    return None if values is None else serve_options(**values)


def test_parse_mcp_serve_options() -> None:
    assert parse([]) == ServeOptions()
    assert parse(["--project", "/p", "--transport", "http", "--port", "9"]) == ServeOptions(
        "http", "127.0.0.1", 9, None, Path("/p")
    )
    assert parse(["--help"]) is None  # the full CLI prints its help
    assert parse(["--bogus"]) is None  # …and its own error
    assert parse(["--port", "nine"]) is None  # …and its "Invalid value"
    assert parse(["--port=9", "--connection-file", "c.json"]) == ServeOptions(
        port=9, connection_file=Path("c.json")
    )


def test_help_goes_to_the_full_cli(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ipykeep", "mcp-serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0 and "--project" in out.stdout and "--transport" in out.stdout


def test_unexpanded_workspace_folder_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ipykeep", "mcp-serve", "--project", "${workspaceFolder}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out.stderr
    assert "was not expanded by the host" in out.stderr and out.stdout == ""
