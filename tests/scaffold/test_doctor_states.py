"""`ipykeep doctor` in each host's unfinished state names exactly the remaining step.

The baseline is a project every host can use: `ipykeep init` for all hosts, then the trust
each host asks of the user (Claude Code's workspace trust, Codex's project trust, Gemini CLI's
trusted folder) written where the host keeps it, in a temporary HOME. Each test then undoes one
step: doctor must report that one check, and only it, with a fix that, applied as printed,
brings every check back to ok.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipykeep.scaffold.doctor import Check, Status, check_hosts
from ipykeep.scaffold.init import InitOptions, Provider, expand_providers, run_init


def _init(project: Path, home: Path, *providers: Provider, **kw) -> None:
    plan = run_init(
        InitOptions(root=project, home=home, providers=expand_providers(providers), **kw)
    )
    assert not plan.conflicts, plan.conflicts


def _trust_everywhere(project: Path, home: Path) -> None:
    root = str(project.resolve())
    (home / ".claude.json").write_text(
        json.dumps({"projects": {root: {"hasTrustDialogAccepted": True}}}, indent=2)
    )
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex/config.toml").write_text(
        f'[projects.{json.dumps(root)}]\ntrust_level = "trusted"\n'
    )
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini/trustedFolders.json").write_text(json.dumps({root: "TRUST_FOLDER"}))


@pytest.fixture
def ready(project: Path, home: Path) -> Path:
    _init(project, home)
    _trust_everywhere(project, home)
    assert _open_steps(project, home) == {}
    return project


def _open_steps(project: Path, home: Path) -> dict[str, Check]:
    return {c.name: c for c in check_hosts(project, home) if c.status is not Status.ok}


def _only_step(project: Path, home: Path, name: str) -> Check:
    steps = _open_steps(project, home)
    assert list(steps) == [name], steps
    return steps[name]


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


# Claude Code


def test_claude_code_workspace_not_trusted(ready: Path, home: Path) -> None:
    (home / ".claude.json").write_text("{}")
    step = _only_step(ready, home, "host Claude Code trust")
    assert "settings.local.json apply already" in step.detail
    assert step.fix.startswith("start `claude` in the project once and accept the trust dialog")
    key = f'projects["{ready.resolve()}"].hasTrustDialogAccepted'
    assert key in step.fix and str(home / ".claude.json") in step.fix
    _edit_json(
        home / ".claude.json",
        lambda d: d.setdefault("projects", {}).update(
            {str(ready.resolve()): {"hasTrustDialogAccepted": True}}
        ),
    )
    assert _open_steps(ready, home) == {}


def test_claude_code_rules_wait_for_trust(ready: Path, home: Path) -> None:
    """Rules only in the shared settings.json of an untrusted workspace do not apply."""
    local = ready / ".claude/settings.local.json"
    rules = json.loads(local.read_text())["permissions"]
    _edit_json(local, lambda d: d.pop("permissions"))
    (ready / ".claude/settings.json").write_text(json.dumps({"permissions": rules}))
    assert _open_steps(ready, home) == {}  # trusted: the shared rules apply
    (home / ".claude.json").write_text("{}")
    steps = _open_steps(ready, home)
    assert set(steps) == {"host Claude Code trust", "host Claude Code permissions"}
    permissions = steps["host Claude Code permissions"]
    assert "ignores until the workspace is trusted" in permissions.detail
    assert permissions.fix == steps["host Claude Code trust"].fix  # one step finishes both
    _trust_everywhere(ready, home)
    assert _open_steps(ready, home) == {}


def test_claude_code_server_not_approved(ready: Path, home: Path) -> None:
    local = ready / ".claude/settings.local.json"
    _edit_json(local, lambda d: d.pop("enabledMcpjsonServers"))
    step = _only_step(ready, home, "host Claude Code approval")
    assert step.fix.startswith("run `ipykeep init --provider claude_code`")
    _init(ready, home, Provider.claude_code)
    assert _open_steps(ready, home) == {}


def test_claude_code_server_disabled(ready: Path, home: Path) -> None:
    shared = ready / ".claude/settings.json"
    shared.write_text('{"disabledMcpjsonServers": ["ipykeep"]}')
    step = _only_step(ready, home, "host Claude Code approval")
    assert step.status is Status.fail
    assert step.fix == (
        f'remove "ipykeep" from disabledMcpjsonServers in {shared}, then restart Claude Code'
    )
    shared.write_text('{"disabledMcpjsonServers": []}')
    assert _open_steps(ready, home) == {}


def test_claude_code_no_permission_rule(ready: Path, home: Path) -> None:
    _edit_json(ready / ".claude/settings.local.json", lambda d: d.pop("permissions"))
    step = _only_step(ready, home, "host Claude Code permissions")
    assert step.fix.startswith("run `ipykeep init --provider claude_code`")
    _init(ready, home, Provider.claude_code)
    assert _open_steps(ready, home) == {}


def test_claude_code_tool_denied(ready: Path, home: Path) -> None:
    shared = ready / ".claude/settings.json"
    shared.write_text('{"permissions": {"deny": ["mcp__ipykeep__ipython"]}}')
    step = _only_step(ready, home, "host Claude Code permissions")
    assert "mcp__ipykeep__ipython" in step.detail and "permissions.deny" in step.fix
    shared.write_text('{"permissions": {"deny": []}}')
    assert _open_steps(ready, home) == {}


def test_claude_code_allow_all_is_honoured_before_trust(ready: Path, home: Path) -> None:
    (home / ".claude.json").write_text("{}")
    _init(ready, home, Provider.claude_code, allow_all=True)
    checks = {c.name: c for c in check_hosts(ready, home)}
    assert checks["host Claude Code permissions"].status is Status.ok
    assert "every ipykeep tool" in checks["host Claude Code permissions"].detail


# Codex


def test_codex_project_not_trusted(ready: Path, home: Path) -> None:
    (home / ".codex/config.toml").write_text('model = "o3"\n')
    step = _only_step(ready, home, "host Codex trust")
    assert step.fix.startswith("run `codex exec --trust` in the project")
    block = step.fix.split("\n", 1)[1]
    (home / ".codex/config.toml").write_text('model = "o3"\n\n' + block + "\n")
    assert _open_steps(ready, home) == {}


def test_codex_project_marked_untrusted(ready: Path, home: Path) -> None:
    config = home / ".codex/config.toml"
    config.write_text(config.read_text().replace('"trusted"', '"untrusted"'))
    step = _only_step(ready, home, "host Codex trust")
    assert step.fix.startswith(f'in {config}, change trust_level to "trusted"')
    config.write_text(config.read_text().replace('"untrusted"', '"trusted"'))
    assert _open_steps(ready, home) == {}


def test_codex_tool_approval_missing(ready: Path, home: Path) -> None:
    config = ready / ".codex/config.toml"
    config.write_text(config.read_text().replace('default_tools_approval_mode = "approve"\n', ""))
    step = _only_step(ready, home, "host Codex (project) tool approval")
    assert step.fix.startswith('set default_tools_approval_mode = "approve"')
    config.write_text(config.read_text() + 'default_tools_approval_mode = "approve"\n')
    assert _open_steps(ready, home) == {}


# Gemini CLI


def test_gemini_folder_not_trusted(ready: Path, home: Path) -> None:
    rules = home / ".gemini/trustedFolders.json"
    rules.write_text("{}")
    step = _only_step(ready, home, "host Gemini CLI folder trust")
    assert step.fix.startswith('start `gemini` in the project once and choose "Trust folder"')
    line = f'"{ready.resolve()}": "TRUST_FOLDER"'
    assert f"add {line} to {rules}" in step.fix
    rules.write_text("{" + line + "}")
    assert _open_steps(ready, home) == {}


def test_gemini_folder_distrusted_by_a_parent_rule(ready: Path, home: Path) -> None:
    rules = home / ".gemini/trustedFolders.json"
    parent = str(ready.resolve().parent)
    rules.write_text(json.dumps({parent: "DO_NOT_TRUST"}))
    step = _only_step(ready, home, "host Gemini CLI folder trust")
    assert step.fix.startswith(f'in {rules}, change "{parent}": "DO_NOT_TRUST" to "TRUST_FOLDER"')
    rules.write_text(json.dumps({parent: "TRUST_FOLDER"}))
    assert _open_steps(ready, home) == {}
    # the project's own rule is longer than the parent's, so it decides
    rules.write_text(json.dumps({parent: "DO_NOT_TRUST", str(ready.resolve()): "TRUST_FOLDER"}))
    assert _open_steps(ready, home) == {}


def test_gemini_trust_from_a_parent_rule_or_the_environment(
    ready: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = home / ".gemini/trustedFolders.json"
    # TRUST_PARENT on a sibling trusts the folder that holds both
    rules.write_text(json.dumps({str(ready.resolve().parent / "sibling"): "TRUST_PARENT"}))
    assert _open_steps(ready, home) == {}
    rules.write_text("{}")
    monkeypatch.setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
    assert _open_steps(ready, home) == {}
    monkeypatch.setenv("GEMINI_CLI_TRUST_WORKSPACE", "false")
    assert list(_open_steps(ready, home)) == ["host Gemini CLI folder trust"]


def test_gemini_entry_without_trust_flag(ready: Path, home: Path) -> None:
    settings = ready / ".gemini/settings.json"
    _edit_json(settings, lambda d: d["mcpServers"]["ipykeep"].pop("trust"))
    step = _only_step(ready, home, "host Gemini CLI (project) trust flag")
    assert step.fix.startswith(f'add "trust": true to mcpServers.ipykeep in {settings}')
    _edit_json(settings, lambda d: d["mcpServers"]["ipykeep"].update(trust=True))
    assert _open_steps(ready, home) == {}


# opencode, VS Code, Cursor, the launcher


def test_opencode_entry_disabled(ready: Path, home: Path) -> None:
    config = ready / "opencode.json"
    _edit_json(config, lambda d: d["mcp"]["ipykeep"].update(enabled=False))
    step = _only_step(ready, home, "host opencode (project) enabled")
    assert step.fix == f'set "enabled": true in mcp.ipykeep of {config}'
    _edit_json(config, lambda d: d["mcp"]["ipykeep"].update(enabled=True))
    assert _open_steps(ready, home) == {}


@pytest.mark.parametrize(
    ("host", "name", "path", "parent"),
    [
        (Provider.vscode, "VS Code", ".vscode/mcp.json", "servers"),
        (Provider.cursor, "Cursor", ".cursor/mcp.json", "mcpServers"),
    ],
)
def test_workspace_host_entry_without_project(
    ready: Path, home: Path, host: Provider, name: str, path: str, parent: str
) -> None:
    _edit_json(ready / path, lambda d: d[parent]["ipykeep"].update(args=["mcp-serve"]))
    step = _only_step(ready, home, f"host {name} (project)")
    assert step.fix.startswith(f"rerun `ipykeep init --provider {host.value}`")
    _init(ready, home, host)
    assert _open_steps(ready, home) == {}


def test_command_not_found(ready: Path, home: Path) -> None:
    config = ready / "opencode.json"
    _edit_json(config, lambda d: d["mcp"]["ipykeep"].update(command=["no-such-ipykeep", "x"]))
    step = _only_step(ready, home, "host opencode (project)")
    assert step.status is Status.fail and step.fix.startswith("rerun `ipykeep init --replace`")
    _init(ready, home, Provider.opencode, replace=True)
    assert _open_steps(ready, home) == {}
