"""Hosts' tool gates: Codex's approval mode and trust, Claude Code's permission rules.

Each written file is read back with the host's own format (tomllib, json), and each fix that
doctor or init prints is checked to work when pasted as shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ipykeep.mcp_server.catalog import TOOLS
from ipykeep.scaffold import gates
from ipykeep.scaffold.content import AGENTS_SECTION, SKILL_MD
from ipykeep.scaffold.doctor import Check, DoctorReport, Status, check_hosts, render_table
from ipykeep.scaffold.editors import READ_ONLY_TOOLS
from ipykeep.scaffold.init import InitOptions, Provider, plan_init, run_init
from tests.scaffold.host_formats import toml_loads

CODEX = frozenset({Provider.codex})
CLAUDE = frozenset({Provider.claude_code})
READ_RULES = [f"mcp__ipykeep__{tool}" for tool in READ_ONLY_TOOLS]


def _checks(project: Path, home: Path) -> dict[str, Check]:
    return {c.name: c for c in check_hosts(project, home)}


def test_read_only_tools_are_the_catalogs() -> None:
    assert set(READ_ONLY_TOOLS) == {t.name for t in TOOLS if t.hints.read_only}


def test_the_tools_agents_are_told_about_exist() -> None:
    """Every backquoted snake_case word of the agents' instructions that looks like a tool is
    one of the catalog's (a renamed tool must not leave the skill teaching the old name)."""
    catalog = {t.name for t in TOOLS}
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)*)`", SKILL_MD + AGENTS_SECTION))
    not_tools = {"ipykeep", "version", "stale_version", "handle", "restart_needed"}
    not_tools |= {"where", "up", "locals"}  # debug commands
    assert named - not_tools <= catalog, named - not_tools - catalog
    assert {"debug", "edit_cell", "add_packages", "checkpoint", "restore"} <= named


def _pasted_block(fix: str) -> str:
    """The TOML lines of a trust fix: everything after the first line."""
    return fix.split("\n", 1)[1]


@pytest.mark.parametrize("name", ["proj", "my proj", 'q"uote', "été\\x"])
def test_codex_trust_fix_is_valid_toml(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    root.mkdir()
    fix = gates.codex_fix(root, tmp_path, environ={})
    assert "`codex exec --trust`" in fix
    doc = toml_loads(_pasted_block(fix))
    assert doc == {"projects": {str(root.resolve()): {"trust_level": "trusted"}}}
    # pasted below what the user config already holds, Codex's file stays valid and trusts it
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"\n\n' + _pasted_block(fix) + "\n")
    assert gates.codex_trust(root, tmp_path, environ={"CODEX_HOME": str(config.parent)}) == (
        "trusted"
    )


def test_init_note_prints_the_trust_block(project: Path, home: Path) -> None:
    plan = plan_init(InitOptions(root=project, providers=CODEX, home=home))
    (note,) = plan.notes
    assert "codex exec --trust" in note
    block = note.split("\n", 1)[1]
    assert toml_loads(block)["projects"][str(project.resolve())] == {"trust_level": "trusted"}


def test_untrusted_project_fix_edits_the_existing_table(project: Path, home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text(
        f'[projects.{json.dumps(str(project))}]\ntrust_level = "untrusted"\n'
    )
    trust = _trust_after_init(project, home)
    assert trust.status is Status.warn and "untrusted" in trust.detail
    assert 'change trust_level to "trusted"' in trust.fix and "\n" not in trust.fix


def _trust_after_init(project: Path, home: Path) -> Check:
    run_init(InitOptions(root=project, providers=CODEX, home=home))
    return _checks(project, home)["host Codex trust"]


def test_doctor_reads_trust_from_codex_home(
    project: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = tmp_path / "elsewhere"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    trust = _trust_after_init(project, home)
    assert trust.status is Status.warn and str(codex_home / "config.toml") in trust.fix
    (codex_home / "config.toml").write_text(_pasted_block(trust.fix) + "\n")
    assert _checks(project, home)["host Codex trust"].status is Status.ok
    # HOME's own ~/.codex is not where Codex looks once CODEX_HOME is set
    monkeypatch.delenv("CODEX_HOME")
    assert _checks(project, home)["host Codex trust"].status is Status.warn


def test_codex_approval_mode_written_added_and_checked(project: Path, home: Path) -> None:
    config = project / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.ipykeep]\ncommand = "ipykeep"\nargs = ["mcp-serve"]\n')
    approval = _checks(project, home)["host Codex (project) tool approval"]
    assert approval.status is Status.warn and "codex exec" in approval.detail
    assert 'default_tools_approval_mode = "approve"' in approval.fix

    plan = run_init(InitOptions(root=project, providers=CODEX, home=home))
    assert "added default_tools_approval_mode" in plan.changes[0].note
    entry = toml_loads(config.read_text())["mcp_servers"]["ipykeep"]
    assert entry["default_tools_approval_mode"] == "approve"
    assert _checks(project, home)["host Codex (project) tool approval"].status is Status.ok
    before = config.read_text()
    run_init(InitOptions(root=project, providers=CODEX, home=home))
    assert config.read_text() == before  # rerunning changes nothing

    # a mode the user chose stays; doctor says what it costs
    config.write_text(before.replace('"approve"', '"prompt"'))
    run_init(InitOptions(root=project, providers=CODEX, home=home))
    assert 'default_tools_approval_mode = "prompt"' in config.read_text()
    assert _checks(project, home)["host Codex (project) tool approval"].status is Status.warn


def test_claude_rules_merge_into_existing_settings(project: Path, home: Path) -> None:
    settings = project / ".claude/settings.local.json"
    settings.parent.mkdir()
    settings.write_text(
        '{\n  "model": "opus",\n  "permissions": {\n    "allow": ["Bash(git status)"],\n'
        '    "deny": ["Read(.env)"]\n  }\n}\n'
    )
    run_init(InitOptions(root=project, providers=CLAUDE, home=home))
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"]["deny"] == ["Read(.env)"]
    assert data["enabledMcpjsonServers"] == ["ipykeep"]
    assert data["permissions"]["allow"] == ["Bash(git status)", *READ_RULES]
    perms = _checks(project, home)["host Claude Code permissions"]
    assert perms.status is Status.ok and "read-only tools allowed" in perms.detail
    before = settings.read_text()
    run_init(InitOptions(root=project, providers=CLAUDE, home=home))
    assert settings.read_text() == before

    run_init(InitOptions(root=project, providers=CLAUDE, home=home, allow_all=True))
    assert json.loads(settings.read_text())["permissions"]["allow"][-1] == "mcp__ipykeep"
    perms = _checks(project, home)["host Claude Code permissions"]
    assert perms.status is Status.ok and "every ipykeep tool" in perms.detail


def test_claude_permissions_missing_or_denied(project: Path, home: Path) -> None:
    run_init(InitOptions(root=project, providers=CLAUDE, home=home))
    settings = project / ".claude/settings.local.json"
    settings.write_text('{"enabledMcpjsonServers": ["ipykeep"]}\n')
    missing = _checks(project, home)["host Claude Code permissions"]
    assert missing.status is Status.warn and "claude -p" in missing.detail
    assert missing.fix.startswith("run `ipykeep init --provider claude_code`")
    settings.write_text('{"permissions": {"allow": ["mcp__ipykeep"], "deny": ["mcp__ipykeep"]}}')
    denied = _checks(project, home)["host Claude Code permissions"]
    assert denied.status is Status.warn and "mcp__ipykeep" in denied.detail


def test_a_fix_block_is_printed_as_pasteable_lines(tmp_path: Path) -> None:
    fix = 'add these lines:\n[projects."/p"]\ntrust_level = "trusted"'
    report = DoctorReport(tmp_path, (Check("host Codex trust", Status.warn, "not trusted", fix),))
    lines = render_table(report).splitlines()
    assert '[projects."/p"]' in lines and 'trust_level = "trusted"' in lines
