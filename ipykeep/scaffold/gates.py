"""The hosts' own gates in front of a project's MCP server, and the exact fix for each.

- **Claude Code** asks whether the user trusts a folder and records the answer in
  ``~/.claude.json`` (``projects["<path>"].hasTrustDialogAccepted``); until then it ignores the
  ``permissions.allow`` rules of the project's ``.claude/settings.json`` but honours those of
  ``.claude/settings.local.json``.
- **Claude Code** starts a server from a project's ``.mcp.json`` only once the user approved
  it: the approval prompt at start-up, or ``enabledMcpjsonServers`` (``enableAllProjectMcpServers``)
  in a settings file; ``disabledMcpjsonServers`` keeps it off. Settings are read from the
  project's ``.claude/settings.local.json`` and ``.claude/settings.json``, the user's
  ``~/.claude/settings.json``, and the per-project record in ``~/.claude.json``.
- **Codex** ignores a project's ``.codex/config.toml`` until the project is trusted:
  ``[projects."<path>"] trust_level = "trusted"`` in ``~/.codex/config.toml`` (``$CODEX_HOME``),
  which its trust prompt writes too.
- **Gemini CLI** loads a project's ``.gemini/settings.json`` only in a trusted folder
  (``~/.gemini/trustedFolders.json``, or ``GEMINI_CLI_TRUST_WORKSPACE``), and a headless run
  refuses an untrusted one.

Past those gates each host asks before a tool call, and refuses it when it cannot ask:

- **Claude Code** allows a tool without asking when a ``permissions.allow`` rule names it
  (``mcp__ipykeep__<tool>``, or ``mcp__ipykeep`` for every tool) in one of the settings files
  above; ``claude -p`` refuses every other call.
- **Codex** takes ``default_tools_approval_mode`` (``auto``, ``prompt``, ``writes``, ``approve``)
  from ``[mcp_servers.ipykeep]``; below ``approve`` a tool that is not read-only needs approval,
  which ``approval_policy = "never"`` (``codex exec``) refuses.

``ipykeep init`` writes the Claude Code approval and permission rules into
``.claude/settings.local.json`` (the user's own, uncommitted settings: running init is the
approval), the approval mode into ``.codex/config.toml`` and ``"trust": true`` into Gemini
CLI's entry; it never marks a project or folder trusted in a host's user config, which is the
user's call, and prints how instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ipykeep.scaffold.editors import CLAUDE_ALL_TOOLS, SERVER_NAME, claude_allow_rules
from ipykeep.scaffold.files import read_text
from ipykeep.scaffold.jsonfile import blank_comments

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


def codex_project_key(root: Path) -> str:
    """The project's key in ``[projects."…"]``: its resolved path as a TOML basic string."""
    # A JSON string (ASCII-escaped) is a valid TOML basic string.
    return json.dumps(str(root.resolve()))


def codex_fix(
    root: Path,
    home: Path,
    environ: dict[str, str] | None = None,
    state: TrustState = "unknown",
) -> str:
    """How to trust the project: Codex's own command, or the table to add (valid TOML as shown)."""
    config = codex_home(home, environ) / "config.toml"
    table = f"[projects.{codex_project_key(root)}]"
    if state == "untrusted":
        return (
            f'in {config}, change trust_level to "trusted" in the {table} table, '
            "or run `codex exec --trust` in the project"
        )
    return (
        "run `codex exec --trust` in the project (or start `codex` there and trust it when "
        f'asked), or add these lines to {config}:\n{table}\ntrust_level = "trusted"'
    )


@dataclass(frozen=True)
class ClaudePermissions:
    #: Every read-only tool is allowed without asking.
    read_only: bool
    #: Every tool is allowed (``mcp__ipykeep`` or ``mcp__ipykeep__*``).
    all_tools: bool
    #: A ``permissions.deny`` rule names the server or one of its tools (deny wins).
    denied: tuple[str, ...] = ()


def _our_rules(rules: Any) -> list[str]:
    if not isinstance(rules, list):
        return []
    return [
        r
        for r in rules
        if isinstance(r, str) and (r == CLAUDE_ALL_TOOLS or r.startswith(CLAUDE_ALL_TOOLS + "__"))
    ]


def claude_permissions(
    root: Path, home: Path, *, trusted: bool = True, only: Path | None = None
) -> ClaudePermissions:
    """Which ipykeep tools Claude Code's settings files allow without asking.

    In a workspace that is not trusted, Claude Code ignores the rules of the project's shared
    ``.claude/settings.json`` (``trusted=False`` leaves them out); ``only`` reads one file.
    """
    allowed: set[str] = set()
    denied: list[str] = []
    shared = root / ".claude" / "settings.json"
    for path in claude_settings_files(root, home):
        if (not trusted and path == shared) or (only is not None and path != only):
            continue
        permissions = _json(path).get("permissions")
        if not isinstance(permissions, dict):
            continue
        allowed.update(_our_rules(permissions.get("allow")))
        denied.extend(_our_rules(permissions.get("deny")))
    every = bool({CLAUDE_ALL_TOOLS, f"{CLAUDE_ALL_TOOLS}__*"} & allowed)
    read_only = every or set(claude_allow_rules(allow_all=False)) <= allowed
    return ClaudePermissions(read_only, every, tuple(denied))


def claude_trusted(root: Path, home: Path) -> bool:
    """Whether Claude Code's workspace trust was accepted for the project.

    Claude Code records the trust dialog's answer as ``projects["<path>"].hasTrustDialogAccepted``
    in ``~/.claude.json``. A project with allowed tools or MCP servers is matched exactly (no
    inherited trust from a parent folder), which is ipykeep's case once init ran.
    """
    record = _json(home / ".claude.json").get("projects")
    if not isinstance(record, dict):
        return False
    for key in dict.fromkeys((str(root), str(root.resolve()))):
        entry = record.get(key)
        if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted") is True:
            return True
    return False


def claude_trust_fix(root: Path, home: Path) -> str:
    return (
        "start `claude` in the project once and accept the trust dialog "
        f'(headless: set projects["{root.resolve()}"].hasTrustDialogAccepted to true '
        f"in {home / '.claude.json'})"
    )


GeminiTrust = Literal["trusted", "untrusted", "unknown", "off"]


def gemini_trusted_folders(home: Path, environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH", "").strip()
    return Path(given).expanduser() if given else home / ".gemini" / "trustedFolders.json"


def _gemini_folder_trust_enabled(home: Path) -> bool:
    """``security.folderTrust.enabled`` in the user's settings (on unless set to false)."""
    security = _jsonc(home / ".gemini" / "settings.json").get("security")
    folder = security.get("folderTrust") if isinstance(security, dict) else None
    return not (isinstance(folder, dict) and folder.get("enabled") is False)


def _jsonc(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if not text:
        return {}
    try:
        data = json.loads(blank_comments(text))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class GeminiFolderTrust:
    state: GeminiTrust
    #: What decided it (the variable, the setting, the rule and its file).
    why: str
    #: The ``trustedFolders.json`` key of the deciding rule, when a rule decided.
    rule: str | None = None


def gemini_trust(
    root: Path, home: Path, environ: dict[str, str] | None = None
) -> GeminiFolderTrust:
    """Whether Gemini CLI trusts the project folder, and what decided it.

    Gemini CLI loads a project's ``.gemini/settings.json`` (and starts its MCP servers) only in
    a trusted folder, and a headless run refuses an untrusted one. ``GEMINI_CLI_TRUST_WORKSPACE``
    overrides the rules; otherwise the longest path rule of ``~/.gemini/trustedFolders.json``
    that contains the project decides (``TRUST_FOLDER``: that folder, ``TRUST_PARENT``: its
    parent, ``DO_NOT_TRUST``); folder trust can be switched off in the user's settings.
    """
    env = os.environ if environ is None else environ
    forced = env.get("GEMINI_CLI_TRUST_WORKSPACE", "").strip().lower()
    if forced in ("true", "1"):
        return GeminiFolderTrust("trusted", "GEMINI_CLI_TRUST_WORKSPACE=true")
    if forced in ("false", "0"):
        return GeminiFolderTrust("untrusted", "GEMINI_CLI_TRUST_WORKSPACE=false")
    if not _gemini_folder_trust_enabled(home):
        settings = home / ".gemini" / "settings.json"
        return GeminiFolderTrust("off", f"security.folderTrust.enabled is false in {settings}")
    rules_file = gemini_trusted_folders(home, environ)
    rules = _jsonc(rules_file)
    project = root.resolve()
    best: tuple[int, str, str] | None = None
    for raw, level in rules.items():
        if not isinstance(level, str):
            continue
        rule = Path(raw).expanduser()
        folder = rule.parent if level == "TRUST_PARENT" else rule
        if project == folder or folder in project.parents:
            depth = len(folder.parts)
            if best is None or depth > best[0]:
                best = (depth, level, raw)
    if best is None:
        return GeminiFolderTrust("unknown", f"no rule for it in {rules_file}")
    _, level, key = best
    state: GeminiTrust = "untrusted" if level == "DO_NOT_TRUST" else "trusted"
    return GeminiFolderTrust(state, f'"{key}": "{level}" in {rules_file}', key)


def gemini_trust_fix(
    root: Path, home: Path, environ: dict[str, str] | None = None, rule: str | None = None
) -> str:
    """How to trust the folder; ``rule``: the ``DO_NOT_TRUST`` key that distrusts it now."""
    rules_file = gemini_trusted_folders(home, environ)
    if rule is not None:
        return (
            f'in {rules_file}, change "{rule}": "DO_NOT_TRUST" to "TRUST_FOLDER" '
            f'(or add "{root.resolve()}": "TRUST_FOLDER" for this project alone)'
        )
    return (
        'start `gemini` in the project once and choose "Trust folder" '
        f'(headless: add "{root.resolve()}": "TRUST_FOLDER" to {rules_file}, '
        "or run with GEMINI_CLI_TRUST_WORKSPACE=true)"
    )
