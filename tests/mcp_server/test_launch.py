"""``mcp-serve``'s fast path: options from the CLI's table, the full CLI for anything else,
refused unexpanded paths; stdio on pipes and on files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ipykeep.cli import fast
from ipykeep.cli.commands import BY_NAME
from ipykeep.cli.mcp import serve_options
from ipykeep.mcp_server.launch import ServeOptions
from tests.mcp_server.harness import make_project, server_env


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


def _session_lines() -> bytes:
    """A host's opening and one request, after a line that is not JSON."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "file", "version": "1"},
        },
    }
    lines = [
        "not json",
        json.dumps(init),
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}',
    ]
    return ("\n".join(lines) + "\n").encode()


def _answers(stdout: bytes) -> dict[object, dict]:
    return {m.get("id"): m for m in map(json.loads, stdout.splitlines())}


@pytest.mark.parametrize("transport", ["pipes", "files"])
def test_stdio_answers_with_the_sdk_on_pipes_and_on_files(tmp_path: Path, transport: str) -> None:
    """Pipes are read on the event loop, anything else (a file here) by the SDK's own transport:
    both give the SDK's answers (it skips a line that does not parse) and end at end of
    input."""
    root = make_project(tmp_path / "proj")
    cmd = [sys.executable, "-m", "ipykeep", "mcp-serve"]
    if transport == "pipes":
        done = subprocess.run(
            cmd,
            input=_session_lines(),
            capture_output=True,
            timeout=120,
            cwd=root,
            env=server_env(root),
        )
        stdout = done.stdout
    else:  # stdout a file: the SDK's transport; stdin stays open until both are answered
        out = tmp_path / "out.jsonl"
        with open(out, "wb") as fout:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=fout,
                stderr=subprocess.PIPE,
                cwd=root,
                env=server_env(root),
            )
            assert proc.stdin is not None
            proc.stdin.write(_session_lines())
            proc.stdin.flush()
            deadline = time.monotonic() + 120
            while out.read_bytes().count(b"\n") < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            proc.stdin.close()
            proc.wait(60)
            assert proc.stderr is not None
            stderr = proc.stderr.read()
        done = subprocess.CompletedProcess(cmd, proc.returncode, b"", stderr)
        stdout = out.read_bytes()
    assert done.returncode == 0, done.stderr
    answers = _answers(stdout)
    assert set(answers) == {1, 2}, answers  # the SDK skips a line that does not parse
    assert answers[1]["result"]["protocolVersion"] == "2025-11-25"
    assert "ipython" in {t["name"] for t in answers[2]["result"]["tools"]}
