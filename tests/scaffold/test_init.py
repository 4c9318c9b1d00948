"""`ipykeep init` on temp projects, through the CLI and through the plain functions."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
import tomlkit
import yaml

from ipykeep.api.errors import ConfigError, UsageError
from ipykeep.project.config import Config, load_config
from ipykeep.scaffold.content import AGENTS_END, AGENTS_START, SKILL_MD, ipykeep_toml
from ipykeep.scaffold.editors import READ_ONLY_TOOLS
from ipykeep.scaffold.files import ChangeStatus
from ipykeep.scaffold.init import InitOptions, Provider, Scope, plan_init, run_init
from ipykeep.scaffold.launcher import Launcher, LauncherKind, resolve_launcher
from tests.scaffold.host_formats import toml_loads

ENTRY = {"type": "stdio", "command": "ipykeep", "args": ["mcp-serve"]}
CODEX_ENTRY = {
    "command": "ipykeep",
    "args": ["mcp-serve"],
    "default_tools_approval_mode": "approve",
}

PROJECT_FILES = [
    ".mcp.json",
    ".claude/settings.local.json",
    ".claude/skills/ipykeep/SKILL.md",
    ".codex/config.toml",
    ".cursor/mcp.json",
    ".gemini/settings.json",
    "opencode.json",
    ".vscode/mcp.json",
    "AGENTS.md",
    "GEMINI.md",
    "ipykeep.toml",
    ".gitignore",
]


def test_fresh_project(app, runner, project: Path, home: Path) -> None:
    result = runner.invoke(app, ["init", "analysis.ipynb"])
    assert result.exit_code == 0, result.output
    for name in PROJECT_FILES:
        assert (project / name).is_file(), name
        assert f"created      {name}" in result.output
    assert json.loads((project / ".mcp.json").read_text()) == {"mcpServers": {"ipykeep": ENTRY}}
    assert json.loads((project / ".cursor/mcp.json").read_text()) == {
        "mcpServers": {
            "ipykeep": {
                "command": "ipykeep",
                "args": ["mcp-serve", "--project", "${workspaceFolder}"],
            }
        }
    }
    # approval and rules in the file Claude Code honours before the workspace is trusted
    assert json.loads((project / ".claude/settings.local.json").read_text()) == {
        "enabledMcpjsonServers": ["ipykeep"],
        "permissions": {"allow": [f"mcp__ipykeep__{tool}" for tool in READ_ONLY_TOOLS]},
    }
    assert not (project / ".claude/settings.json").exists()
    assert "note: Codex: this project is not trusted yet" in result.output
    assert "note: Claude Code: this workspace is not trusted yet" in result.output
    assert "note: Gemini CLI: this folder is not trusted yet" in result.output
    codex = toml_loads((project / ".codex/config.toml").read_text())
    assert codex == {"mcp_servers": {"ipykeep": CODEX_ENTRY}}
    assert json.loads((project / ".gemini/settings.json").read_text()) == {
        "mcpServers": {"ipykeep": {"command": "ipykeep", "args": ["mcp-serve"], "trust": True}}
    }
    assert json.loads((project / "opencode.json").read_text()) == {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {"ipykeep": {"type": "local", "command": ["ipykeep", "mcp-serve"], "enabled": True}},
    }
    assert json.loads((project / ".vscode/mcp.json").read_text()) == {
        "servers": {
            "ipykeep": {
                "type": "stdio",
                "command": "ipykeep",
                "args": ["mcp-serve", "--project", "${workspaceFolder}"],
            }
        }
    }
    assert (project / "GEMINI.md").read_text() == (project / "AGENTS.md").read_text()
    assert load_config(project, environ={}).notebook == "analysis.ipynb"
    assert (project / ".gitignore").read_text() == ".ipykeep/\n"
    agents = (project / "AGENTS.md").read_text()
    assert agents.startswith(AGENTS_START) and agents.rstrip().endswith(AGENTS_END)
    skill = (project / ".claude/skills/ipykeep/SKILL.md").read_text()
    _, front, body = skill.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["name"] == "ipykeep" and len(meta["description"]) > 40
    for step in ("create_kernel", "run_stale", "ipython", "inspect", "full text"):
        assert step in body
    # what to do on a failure, beside a person, on an ImportError, before a risky cell
    for step in ("`debug` with `where`", "`edit_cell`", "`version`", "`add_packages`"):
        assert step in body and step in agents
    assert "`checkpoint` with a name" in body and "`checkpoint` with a name" in agents
    # Nothing in HOME: neither a host's configuration nor anything else.
    link = home / ".local" / "bin" / "ipykeep"  # the fixture's own, see conftest.py
    touched = [p for p in home.rglob("*") if p.is_file() and p != link]
    assert touched == [], (
        "project scope must not touch HOME",
        touched,
    )
    # Nothing machine-specific in what hosts read.
    for name in PROJECT_FILES:
        text = (project / name).read_text()
        assert str(project) not in text and str(Path.home()) not in text
        assert str(Path(sys.executable).parent) not in text  # no interpreter or venv path


def test_existing_configs_are_preserved(app, runner, project: Path) -> None:
    mcp = (
        '{\n    "mcpServers": {\n        "other": {\n            "command": "other-server",\n'
        '            "args": ["--flag", 1.50]\n        }\n    },\n    "zeta": "\\u00e9",\n'
        '    "alpha": []\n}\n'
    )
    (project / ".mcp.json").write_text(mcp)
    codex = (
        "# my Codex settings\n"
        'model = "o3"  # the model\n'
        "\n"
        "[mcp_servers.other]\n"
        'command = "other"   # keep this comment\n'
        'args = ["x"]\n'
    )
    (project / ".codex").mkdir()
    (project / ".codex/config.toml").write_text(codex)
    (project / ".gitignore").write_text("*.pyc")  # no final newline
    (project / "AGENTS.md").write_text("# Rules\n\nBe nice.\n")

    result = runner.invoke(app, ["init"])
    assert result.exit_code == 0, result.output

    assert (project / ".mcp.json").read_text() == (
        '{\n    "mcpServers": {\n        "other": {\n            "command": "other-server",\n'
        '            "args": ["--flag", 1.50]\n        },\n'
        '        "ipykeep": {\n            "type": "stdio",\n            "command": "ipykeep",\n'
        '            "args": [\n                "mcp-serve"\n            ]\n        }\n'
        '    },\n    "zeta": "\\u00e9",\n    "alpha": []\n}\n'
    )
    assert (project / ".codex/config.toml").read_text() == (
        codex + '\n[mcp_servers.ipykeep]\ncommand = "ipykeep"\nargs = ["mcp-serve"]\n'
        'default_tools_approval_mode = "approve"\n'
    )
    assert (project / ".gitignore").read_text() == "*.pyc\n.ipykeep/\n"
    agents = (project / "AGENTS.md").read_text()
    assert agents.startswith("# Rules\n\nBe nice.\n\n" + AGENTS_START)


def test_existing_codex_servers_table_gets_the_entry(project: Path) -> None:
    codex = '[mcp_servers.other]\ncommand = "other"  # c\n\n[profile]\nname = "x"\n'
    (project / ".codex").mkdir()
    (project / ".codex/config.toml").write_text(codex)
    run_init(InitOptions(root=project, providers=frozenset({Provider.codex})))
    text = (project / ".codex/config.toml").read_text()
    assert 'command = "other"  # c' in text and '[profile]\nname = "x"' in text
    doc = tomlkit.parse(text).unwrap()
    assert doc["mcp_servers"]["ipykeep"] == CODEX_ENTRY
    assert doc["mcp_servers"]["other"] == {"command": "other"}


def test_conflicting_entry_is_refused_then_replaced(app, runner, project: Path) -> None:
    mcp = (
        '{\n  "mcpServers": {\n    "ipykeep": {"command": "my-ipykeep", "args": []},\n'
        '    "b": {"command": "b"}\n  }\n}\n'
    )
    (project / ".mcp.json").write_text(mcp)
    (project / ".codex").mkdir()
    codex = '[mcp_servers.ipykeep]\ncommand = "custom"\nargs = []\n'
    (project / ".codex/config.toml").write_text(codex)

    refused = runner.invoke(app, ["init"])
    assert refused.exit_code == 1, refused.output
    assert "conflict     .mcp.json" in refused.output and "my-ipykeep" in refused.output
    assert "conflict     .codex/config.toml" in refused.output and "--replace" in refused.output
    assert (project / ".mcp.json").read_text() == mcp
    assert (project / ".codex/config.toml").read_text() == codex
    assert (project / ".cursor/mcp.json").is_file(), "the other hosts are still configured"

    replaced = runner.invoke(app, ["init", "--replace"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {"ipykeep": ENTRY, "b": {"command": "b"}}
    }
    assert (project / ".mcp.json").read_text() == mcp.replace(
        '{"command": "my-ipykeep", "args": []}',
        '{"type": "stdio", "command": "ipykeep", "args": ["mcp-serve"]}',
    )
    doc = toml_loads((project / ".codex/config.toml").read_text())
    assert doc == {"mcp_servers": {"ipykeep": CODEX_ENTRY}}


def test_matching_entry_with_extra_keys_is_left_alone(project: Path) -> None:
    mcp = (
        '{"mcpServers": {"ipykeep": {"command": "ipykeep", "args": ["mcp-serve"], "env": {"A": '
        '"1"}}}}'
    )
    (project / ".mcp.json").write_text(mcp)
    plan = run_init(InitOptions(root=project, providers=frozenset({Provider.claude_code})))
    assert plan.changes[0].status is ChangeStatus.unchanged
    assert (project / ".mcp.json").read_text() == mcp


def test_rerun_is_byte_identical(app, runner, snapshot, project: Path, home: Path) -> None:
    assert runner.invoke(app, ["init", "analysis.ipynb"]).exit_code == 0
    assert runner.invoke(app, ["init", "--scope", "user"]).exit_code == 0
    before = snapshot(project, home)
    again = runner.invoke(app, ["init", "analysis.ipynb"])
    again_user = runner.invoke(app, ["init", "--scope", "user"])
    assert again.exit_code == 0 and again_user.exit_code == 0
    assert "no changes" in again.output and "no changes" in again_user.output
    assert "created" not in again.output and "updated" not in again.output
    assert snapshot(project, home) == before


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        (".mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n', 3),
        (".codex/config.toml", '# ok\nmodel = "o3"\n[mcp_servers\ncommand = 1\n', 3),
        ("ipykeep.toml", 'notebook = "a.ipynb"\nidle_timeout = = 3\n', 2),
        ("AGENTS.md", f"intro\n{AGENTS_END}\n", 2),
    ],
)
def test_malformed_file_stops_everything(
    app, runner, snapshot, project: Path, home: Path, name, content, line
) -> None:
    # Valid files first in the plan order, so a late malformed file proves nothing was written
    # early.
    (project / ".cursor").mkdir()
    (project / ".cursor/mcp.json").write_text('{"mcpServers": {}}\n')
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    before = snapshot(project, home)
    result = runner.invoke(app, ["init", "analysis.ipynb"])
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and f"line {line}" in result.output
    assert snapshot(project, home) == before


def test_malformed_user_file_names_file_and_line(project: Path, home: Path) -> None:
    claude = home / ".claude.json"
    claude.write_text('{\n  "numStartups": 3,\n  "mcpServers": [1, 2\n}\n')
    with pytest.raises(ConfigError) as info:
        run_init(InitOptions(root=project, scope=Scope.user))
    assert str(claude) in info.value.message and "line 4" in info.value.message
    assert not (home / ".codex").exists()


def test_dry_run_prints_diff_and_writes_nothing(
    app, runner, snapshot, project: Path, home: Path
) -> None:
    (project / ".mcp.json").write_text('{\n  "mcpServers": {}\n}\n')
    before = snapshot(project, home)
    result = runner.invoke(app, ["init", "analysis.ipynb", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert snapshot(project, home) == before
    out = result.output
    assert "--- a/.mcp.json\n+++ b/.mcp.json\n" in out
    assert '-  "mcpServers": {}\n+  "mcpServers": {\n+    "ipykeep": {\n' in out
    assert "--- /dev/null\n+++ b/.codex/config.toml\n" in out
    assert '+notebook = "analysis.ipynb"' in out
    assert "would create .gitignore" in out and "dry run: nothing written" in out


@pytest.mark.posix
def test_user_scope_merges_one_entry(app, runner, project: Path, home: Path) -> None:
    claude = home / ".claude.json"
    original = (
        '{"numStartups":12,"projects":{"/x":{"allowedTools":[]}},'
        '"mcpServers":{"gh":{"command":"gh"}},"z":1.0}'
    )
    claude.write_text(original)
    os.chmod(claude, 0o600)
    result = runner.invoke(app, ["init", "--scope", "user"])
    assert result.exit_code == 0, result.output
    text = claude.read_text()
    assert text == original.replace(
        '{"gh":{"command":"gh"}}',
        '{"gh":{"command":"gh"}, "ipykeep": {"type": "stdio", "command": "ipykeep", "args": '
        '["mcp-serve"]}}',
    )
    assert stat.S_IMODE(claude.stat().st_mode) == 0o600
    assert (home / ".codex/config.toml").is_file() and (home / ".cursor/mcp.json").is_file()
    assert (home / ".claude/skills/ipykeep/SKILL.md").read_text() == SKILL_MD
    assert AGENTS_START in (home / ".codex/AGENTS.md").read_text()
    created = {p.name for p in project.iterdir()}
    assert created == {".git", "analysis.ipynb"}, "user scope writes no project files"


def test_agents_section_updated_in_place(project: Path) -> None:
    agents = project / "AGENTS.md"
    agents.write_text(
        f"# Top\n\ntext before\n{AGENTS_START}\nold ipykeep text\n{AGENTS_END}\ntext after\n"
    )
    run_init(InitOptions(root=project, providers=frozenset({Provider.codex})))
    text = agents.read_text()
    assert text.startswith(f"# Top\n\ntext before\n{AGENTS_START}\n## Notebooks: use ipykeep")
    assert text.endswith(f"{AGENTS_END}\ntext after\n")
    assert "old ipykeep text" not in text


@pytest.mark.posix
def test_file_mode_is_kept_and_edited_skill_is_a_conflict(project: Path) -> None:
    mcp = project / ".mcp.json"
    mcp.write_text("{}\n")
    os.chmod(mcp, 0o640)
    skill = project / ".claude/skills/ipykeep/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("my own notes\n")
    options = InitOptions(root=project, providers=frozenset({Provider.claude_code}))
    plan = run_init(options)
    assert stat.S_IMODE(mcp.stat().st_mode) == 0o640
    assert json.loads(mcp.read_text()) == {"mcpServers": {"ipykeep": ENTRY}}
    assert [c.status for c in plan.conflicts] == [
        ChangeStatus.conflict
    ] and skill.read_text() == "my own notes\n"
    run_init(InitOptions(root=project, providers=frozenset({Provider.claude_code}), replace=True))
    assert skill.read_text() == SKILL_MD


def test_notebook_setting_conflict(project: Path) -> None:
    (project / "other.ipynb").write_text("{}")
    run_init(InitOptions(root=project, notebook="analysis.ipynb"))
    plan = plan_init(InitOptions(root=project, notebook="other.ipynb"))
    assert [c.path.name for c in plan.conflicts] == ["ipykeep.toml"]
    run_init(InitOptions(root=project, notebook="other.ipynb", replace=True))
    assert load_config(project, environ={}).notebook == "other.ipynb"
    assert "# idle_timeout = 3600.0" in (project / "ipykeep.toml").read_text()


@pytest.mark.parametrize("notebook", [None, "nb/analysis.ipynb"])
def test_ipykeep_toml_loads_and_lists_every_setting(tmp_path: Path, notebook: str | None) -> None:
    text = ipykeep_toml(notebook)
    (tmp_path / "ipykeep.toml").write_text(text)
    config = load_config(tmp_path, environ={})
    assert config == Config(notebook=notebook)
    for name in Config.__dataclass_fields__:
        assert f"{name} = " in text, name
    # Uncommenting any default must give a valid file with the same configuration.
    setting = re.compile(r"^# (\w+) = ")
    uncommented = "\n".join(
        line[2:].split("   #")[0]
        if (m := setting.match(line))
        and m.group(1) in Config.__dataclass_fields__
        and m.group(1) != "python"
        else line
        for line in text.splitlines()
    )
    (tmp_path / "ipykeep.toml").write_text(uncommented + "\n")
    assert load_config(tmp_path, environ={}) == Config(notebook=notebook)


def test_missing_notebook_is_a_usage_error(app, runner, project: Path) -> None:
    result = runner.invoke(app, ["init", "nope.ipynb"])
    assert result.exit_code == 2
    assert "nope.ipynb" in result.output
    assert not (project / ".mcp.json").exists()


def test_launchers(app, runner, project: Path) -> None:
    assert resolve_launcher(LauncherKind.venv) == Launcher(".venv/bin/ipykeep", ("mcp-serve",))
    assert resolve_launcher(
        LauncherKind.command, command="hatch run 'ipykeep' mcp-serve"
    ) == Launcher("hatch", ("run", "ipykeep", "mcp-serve"))
    with pytest.raises(UsageError):
        resolve_launcher(LauncherKind.command, command=" ")
    # ipykeep is installed here from a local checkout, not a VCS URL: uvx needs an explicit source.
    refused = runner.invoke(app, ["init", "--launcher", "uvx"])
    assert refused.exit_code == 2 and "--uvx-from" in refused.output
    assert not (project / ".mcp.json").exists()
    source = "git+https://example.org/team/ipykeep@v0.1.0"
    result = runner.invoke(
        app, ["init", "-p", "claude_code", "--launcher", "uvx", "--uvx-from", source]
    )
    assert result.exit_code == 0, result.output
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["ipykeep"]
    assert entry["command"] == "uvx" and entry["args"] == ["--from", source, "ipykeep", "mcp-serve"]
    assert not (project / ".codex").exists() and not (project / ".cursor").exists()


def test_user_scope_writes_through_symlinks_and_refuses_a_notebook(
    app, runner, project: Path, home: Path
) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "claude.json").write_text('{"theme": "dark"}\n')
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    result = runner.invoke(app, ["init", "--scope", "user", "-p", "claude_code"])
    assert result.exit_code == 0, result.output
    assert (home / ".claude.json").is_symlink()
    assert json.loads((dotfiles / "claude.json").read_text()) == {
        "theme": "dark",
        "mcpServers": {"ipykeep": ENTRY},
    }
    refused = runner.invoke(app, ["init", "analysis.ipynb", "--scope", "user"])
    assert refused.exit_code == 2 and "project" in refused.output


def test_init_updates_an_old_cursor_entry_and_keeps_its_env(app, runner, project: Path) -> None:
    (project / ".cursor").mkdir()
    (project / ".cursor/mcp.json").write_text(
        '{"mcpServers": {"ipykeep": {"command": "ipykeep", "args": ["mcp-serve"], "env": {"A": '
        '"1"}}}}\n'
    )
    result = runner.invoke(app, ["init", "--provider", "cursor"])
    assert result.exit_code == 0, result.output
    assert "now passes --project ${workspaceFolder}" in result.output
    entry = json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]["ipykeep"]
    assert entry == {
        "command": "ipykeep",
        "args": ["mcp-serve", "--project", "${workspaceFolder}"],
        "env": {"A": "1"},
    }
    again = runner.invoke(app, ["init", "--provider", "cursor"])
    assert again.exit_code == 0 and "no changes" in again.output


def test_claude_approval_merges_into_existing_settings(app, runner, project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude/settings.local.json").write_text(
        '{\n  "permissions": {"allow": ["Bash(ls)"]},\n  "enabledMcpjsonServers": ["other"]\n}\n'
    )
    assert runner.invoke(app, ["init", "--provider", "claude_code"]).exit_code == 0
    rules = ", ".join(f'"mcp__ipykeep__{tool}"' for tool in READ_ONLY_TOOLS)
    assert (project / ".claude/settings.local.json").read_text() == (
        f'{{\n  "permissions": {{"allow": ["Bash(ls)", {rules}]}},\n'
        '  "enabledMcpjsonServers": ["other", "ipykeep"]\n}\n'
    )


def test_allow_all_flag_allows_every_tool_in_claude_code(app, runner, project: Path) -> None:
    plain = runner.invoke(app, ["init", "--provider", "claude_code"])
    assert plain.exit_code == 0, plain.output
    local = project / ".claude/settings.local.json"
    rules = json.loads(local.read_text())["permissions"]["allow"]
    assert "mcp__ipykeep" not in rules and "mcp__ipykeep__inspect" in rules
    every = runner.invoke(app, ["init", "--provider", "claude_code", "--allow-all"])
    assert every.exit_code == 0, every.output
    rules = json.loads(local.read_text())["permissions"]["allow"]
    assert "mcp__ipykeep" in rules
