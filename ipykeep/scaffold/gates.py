"""The hosts' own gates in front of a project's MCP server, and the exact fix for each.

- **Claude Code** starts a server from a project's ``.mcp.json`` only once the user approved
  it: the approval prompt at start-up, or ``enabledMcpjsonServers`` (``enableAllProjectMcpServers``)
  in a settings file; ``disabledMcpjsonServers`` keeps it off. Settings are read from the
  project's ``.claude/settings.local.json`` and ``.claude/settings.json``, the user's
  ``~/.claude/settings.json``, and the per-project record in ``~/.claude.json``.
- **Codex** ignores a project's ``.codex/config.toml`` until the project is trusted:
  ``[projects."<path>"] trust_level = "trusted"`` in ``~/.codex/config.toml`` (``$CODEX_HOME``),
  which its trust prompt writes too.

``ipykeep init`` writes the Claude Code approval into ``.claude/settings.local.json`` (the
user's own, uncommitted settings: running init is the approval); it never marks a project
trusted in Codex's user config, which is the user's call, and prints the line to add instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ipykeep.scaffold.editors import SERVER_NAME
from ipykeep.scaffold.files import read_text

ApprovalState = Literal["approved", "disabled", "pending"]
TrustState = Literal["trusted", "untrusted", "unknown"]


def _json(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def claude_settings_files(root: Path, home: Path) -> tuple[Path, ...]:
    return (
        root / ".claude" / "settings.local.json",
        root / ".claude" / "settings.json",
        home / ".claude" / "settings.json",
    )


@dataclass(frozen=True)
class ClaudeApproval:
    state: ApprovalState
    #: The file that decided it (None when nothing did: the prompt will ask).
    source: Path | None = None


def claude_approval(root: Path, home: Path) -> ClaudeApproval:
    """Whether Claude Code will start the project's ``ipykeep`` server without asking."""
    sources: list[tuple[Path, dict[str, Any]]] = [
        (p, _json(p)) for p in claude_settings_files(root, home)
    ]
    record = _json(home / ".claude.json").get("projects", {})
    if isinstance(record, dict):
        for key in (str(root), str(root.resolve())):
            entry = record.get(key)
            if isinstance(entry, dict):
                sources.append((home / ".claude.json", entry))
                break
    for path, data in sources:
        disabled = data.get("disabledMcpjsonServers")
        if isinstance(disabled, list) and SERVER_NAME in disabled:
            return ClaudeApproval("disabled", path)
    for path, data in sources:
        enabled = data.get("enabledMcpjsonServers")
        if data.get("enableAllProjectMcpServers") is True or (
            isinstance(enabled, list) and SERVER_NAME in enabled
        ):
            return ClaudeApproval("approved", path)
    return ClaudeApproval("pending")


def claude_fix(root: Path, approval: ClaudeApproval) -> str:
    local = root / ".claude" / "settings.local.json"
    if approval.state == "disabled":
        return (
            f'remove "{SERVER_NAME}" from disabledMcpjsonServers in {approval.source}, '
            "then restart Claude Code"
        )
    return (
        f'run `ipykeep init --provider claude_code` (adds "{SERVER_NAME}" to '
        f"enabledMcpjsonServers in {local}), "
        "or approve the ipykeep server when Claude Code asks at start-up"
    )


def codex_home(home: Path, environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get("CODEX_HOME", "").strip()
    return Path(given).expanduser() if given else home / ".codex"


def codex_trust(root: Path, home: Path, environ: dict[str, str] | None = None) -> TrustState:
    """The trust level Codex's user config gives the project (``unknown`` when it has none)."""
    text = read_text(codex_home(home, environ) / "config.toml")
    if not text:
        return "unknown"
    try:
        doc = tomlkit.parse(text).unwrap()
    except TOMLKitError:
        return "unknown"
    projects = doc.get("projects")
    if not isinstance(projects, dict):
        return "unknown"
    for key in (str(root), str(root.resolve())):
        entry = projects.get(key)
        if isinstance(entry, dict):
            level = entry.get("trust_level")
            return "trusted" if level == "trusted" else "untrusted"
    return "unknown"


def codex_fix(root: Path, home: Path, environ: dict[str, str] | None = None) -> str:
    config = codex_home(home, environ) / "config.toml"
    return (
        f'add to {config}:  [projects.{json.dumps(str(root))}]  trust_level = "trusted"  '
        "(or start `codex` in the project and trust it when asked); "
        "until then Codex ignores .codex/config.toml"
    )
