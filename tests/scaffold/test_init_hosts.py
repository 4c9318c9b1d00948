"""`ipykeep init` for Gemini CLI, opencode and VS Code, and the launcher it writes.

Each file is read back the way its host reads it (JSON with comments where the host allows
them); unrelated settings and comments stay, and a rerun changes nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ipykeep.scaffold.files import ChangeStatus
from ipykeep.scaffold.init import InitOptions, Provider, Scope, plan_init, run_init
from ipykeep.scaffold.jsonfile import blank_comments
from ipykeep.scaffold.launcher import Launcher, auto_launcher, running_script

GEMINI = frozenset({Provider.gemini})
OPENCODE = frozenset({Provider.opencode})
VSCODE = frozenset({Provider.vscode})
LAUNCHER = Launcher("ipykeep", ("mcp-serve",))


def _jsonc(path: Path) -> dict:
    return json.loads(blank_comments(path.read_text()))


def _init(project: Path, home: Path, providers: frozenset[Provider], **kw) -> list:
    plan = run_init(
        InitOptions(root=project, providers=providers, home=home, launcher=LAUNCHER, **kw)
    )
    return list(plan.changes)


def test_gemini_settings_keep_comments_and_get_trust(project: Path, home: Path) -> None:
    settings = project / ".gemini/settings.json"
    settings.parent.mkdir()
    settings.write_text(
        "{\n  // the team's model\n"
        '  "model": {"name": "gemini-2.5-pro"},\n'
        '  "mcpServers": {\n'
        '    "ipykeep": {"command": "ipykeep", "args": ["mcp-serve"]},\n'
        "  },\n}\n"
    )
    (change, *_) = _init(project, home, GEMINI)
    assert change.status is ChangeStatus.update and '"trust": true' in change.note
    text = settings.read_text()
    assert "// the team's model" in text
    data = _jsonc(settings)
    assert data["model"] == {"name": "gemini-2.5-pro"}
    assert data["mcpServers"]["ipykeep"] == {
        "command": "ipykeep",
        "args": ["mcp-serve"],
        "trust": True,
    }
    assert "ipykeep" in (project / "GEMINI.md").read_text()
    _init(project, home, GEMINI)
    assert settings.read_text() == text  # rerun: byte-identical
    # a trust the user turned off stays off
    settings.write_text(text.replace('"trust": true', '"trust": false'))
    _init(project, home, GEMINI)
    assert _jsonc(settings)["mcpServers"]["ipykeep"]["trust"] is False


@pytest.mark.parametrize(
    ("names", "written"),
    [
        (["AGENTS.md", "GEMINI.md"], "AGENTS.md"),
        ("CONTEXT.md", "CONTEXT.md"),
        (["GEMINI.md"], "GEMINI.md"),
    ],
)
def test_gemini_context_file_follows_context_filename(
    project: Path, home: Path, names: object, written: str
) -> None:
    (project / ".gemini").mkdir()
    (project / ".gemini/settings.json").write_text(json.dumps({"context": {"fileName": names}}))
    _init(project, home, GEMINI)
    assert "<!-- ipykeep:start -->" in (project / written).read_text()
    for other in {"AGENTS.md", "GEMINI.md", "CONTEXT.md"} - {written}:
        assert not (project / other).exists(), other


def test_opencode_jsonc_is_edited_in_place(project: Path, home: Path) -> None:
    config = project / "opencode.jsonc"
    config.write_text(
        '{\n  "$schema": "https://opencode.ai/config.json",\n'
        '  "model": "anthropic/claude-sonnet-4", // ours\n'
        '  "mcp": {\n    "other": {"type": "remote", "url": "https://x/mcp"},\n  },\n}\n'
    )
    _init(project, home, OPENCODE)
    assert not (project / "opencode.json").exists()
    text = config.read_text()
    assert "// ours" in text
    data = _jsonc(config)
    assert data["mcp"]["other"] == {"type": "remote", "url": "https://x/mcp"}
    assert data["mcp"]["ipykeep"] == {
        "type": "local",
        "command": ["ipykeep", "mcp-serve"],
        "enabled": True,
    }
    _init(project, home, OPENCODE)
    assert config.read_text() == text


def test_opencode_conflict_then_replace(project: Path, home: Path) -> None:
    config = project / "opencode.json"
    config.write_text('{"mcp": {"ipykeep": {"type": "local", "command": ["other", "serve"]}}}')
    (change,) = [c for c in _init(project, home, OPENCODE) if c.path == config]
    assert change.status is ChangeStatus.conflict and "other serve" in change.note
    _init(project, home, OPENCODE, replace=True)
    assert _jsonc(config)["mcp"]["ipykeep"]["command"] == ["ipykeep", "mcp-serve"]


def test_vscode_servers_key_with_comments(project: Path, home: Path) -> None:
    config = project / ".vscode/mcp.json"
    config.parent.mkdir()
    config.write_text(
        '{\n  "inputs": [],\n  /* shared servers */\n  "servers": {\n'
        '    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}\n  }\n}\n'
    )
    _init(project, home, VSCODE)
    data = _jsonc(config)
    assert "/* shared servers */" in config.read_text()
    assert data["inputs"] == [] and "github" in data["servers"]
    assert data["servers"]["ipykeep"] == {
        "type": "stdio",
        "command": "ipykeep",
        "args": ["mcp-serve", "--project", "${workspaceFolder}"],
    }


def test_user_scope_for_gemini_and_opencode(project: Path, home: Path) -> None:
    plan = plan_init(
        InitOptions(
            root=project,
            providers=GEMINI | OPENCODE | VSCODE,
            scope=Scope.user,
            home=home,
            launcher=LAUNCHER,
            environ={},
        )
    )
    paths = {c.path for c in plan.changes}
    assert paths == {
        home / ".gemini/settings.json",
        home / ".gemini/GEMINI.md",
        home / ".config/opencode/opencode.json",
    }
    assert any("VS Code" in note for note in plan.notes)


def test_auto_launcher_writes_the_absolute_path_when_not_on_path(tmp_path: Path) -> None:
    script = running_script()
    assert script is not None and script.name == "ipykeep"
    launcher = auto_launcher(os.pathsep.join([str(tmp_path), "/usr/bin", "/bin"]))
    assert launcher == Launcher(str(script), ("mcp-serve",))
    assert "not on PATH" in launcher.why and "absolute path" in launcher.why


def test_auto_launcher_and_an_activated_venv() -> None:
    """On PATH only because the venv is activated: an IDE would not see it."""
    launcher = auto_launcher(str(Path(sys.executable).parent))
    assert Path(launcher.command).is_absolute()
    assert "activated virtual environment" in launcher.why


def test_auto_launcher_bare_when_path_links_to_it(home: Path) -> None:
    """pipx and `uv tool install` link the script into a bin directory on PATH."""
    launcher = auto_launcher(str(home / ".local" / "bin"))
    assert launcher == Launcher("ipykeep", ("mcp-serve",))
    assert "is this installation" in launcher.why


def test_auto_launcher_with_another_ipykeep_on_path(tmp_path: Path) -> None:
    other = tmp_path / "bin" / "ipykeep"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\nexit 1\n")
    other.chmod(0o755)
    launcher = auto_launcher(str(other.parent))
    assert launcher.command == str(running_script())
    assert "another installation" in launcher.why
