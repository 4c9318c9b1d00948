"""One planner per kind of file ``ipykeep init`` touches; each returns a FileChange, writes nothing.

Every planner validates the existing file first and raises ConfigError naming the file and line
when it cannot be parsed, so a bad file stops the whole run before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import InlineTable, Table

from ipykeep.api.errors import ConfigError
from ipykeep.scaffold.content import AGENTS_END, AGENTS_SECTION, AGENTS_START
from ipykeep.scaffold.files import ChangeStatus, FileChange, change, conflict, read_text
from ipykeep.scaffold.jsonfile import parse_json_object, set_nested_member, set_top_member
from ipykeep.scaffold.launcher import Launcher

SERVER_NAME = "ipykeep"
_REPLACE_HINT = "rerun with --replace to overwrite it"

#: Cursor may start a server outside the workspace: the entry names the project explicitly.
CURSOR_PROJECT_ARGS: tuple[str, ...] = ("--project", "${workspaceFolder}")

#: Codex's per-server key for tool approval, and the mode init writes. Without it Codex asks
#: before every tool that is not read-only, and under ``approval_policy = "never"`` (``codex
#: exec``) it refuses them. Codex reads a project's file only once the user trusted the project,
#: so "approve" applies where the user already vouched for the code ipykeep runs.
CODEX_APPROVAL_KEY = "default_tools_approval_mode"
CODEX_APPROVAL = "approve"

#: ipykeep's tools that only read (the catalog's read-only ones; a test keeps the two equal).
READ_ONLY_TOOLS: tuple[str, ...] = (
    "list_kernels",
    "read_cell",
    "list_cells",
    "inspect",
    "namespace",
)
#: Claude Code's permission rule for every tool of the server.
CLAUDE_ALL_TOOLS = f"mcp__{SERVER_NAME}"


def _require_json(
    value: object, kind: type[dict[str, Any]] | type[list[Any]], member: str, path: Path
) -> None:
    """Refuse a settings file whose ``member`` is there but not a JSON object / array."""
    if value is not None and not isinstance(value, kind):
        expected = "a JSON object" if kind is dict else "a JSON array"
        raise ConfigError(
            f'{path}: "{member}" must be {expected}, found {type(value).__name__}',
            hint=f"fix {path} (nothing was written)",
            details={"file": str(path)},
        )


def claude_allow_rules(*, allow_all: bool) -> list[str]:
    """The ``permissions.allow`` rules init writes: the read-only tools, or every tool."""
    if allow_all:
        return [CLAUDE_ALL_TOOLS]
    return [f"{CLAUDE_ALL_TOOLS}__{tool}" for tool in READ_ONLY_TOOLS]


def _describe_entry(entry: Any) -> str:
    if isinstance(entry, dict) and "command" in entry:
        return " ".join([str(entry.get("command")), *map(str, entry.get("args") or [])])
    return json.dumps(entry, default=str)


def entry_matches(entry: Any, launcher: Launcher) -> bool:
    """Whether an existing server entry already runs ``launcher`` (extra keys such as env are
    kept)."""
    if not isinstance(entry, dict):
        return False
    if entry.get("type", "stdio") != "stdio":
        return False
    args = entry.get("args") or []
    return entry.get("command") == launcher.command and list(args) == list(launcher.args)


def json_server_entry(launcher: Launcher, *, with_type: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if with_type else {}
    entry["command"] = launcher.command
    entry["args"] = list(launcher.args)
    return entry


def plan_json_servers(
    path: Path,
    label: str,
    launcher: Launcher,
    *,
    replace: bool,
    with_type: bool,
    indent: str = "  ",
    extra_args: tuple[str, ...] = (),
    parent: str = "mcpServers",
    comments: bool = False,
    required: dict[str, Any] | None = None,
) -> FileChange:
    """Merge ``<parent>.ipykeep`` into a JSON host config (``.mcp.json``, ``~/.claude.json``…).

    ``extra_args`` follow the launcher's (Cursor's ``--project ${workspaceFolder}``); an entry
    ipykeep wrote without them is brought up to date rather than reported as a conflict.
    ``required`` are keys the entry needs beyond the command (Gemini CLI's ``"trust": true``):
    added to a matching entry that lacks them, a value the user set stays. ``comments``: the
    host reads the file as JSON with comments.
    """
    plain = launcher
    launcher = Launcher(launcher.command, (*launcher.args, *extra_args))
    required = required or {}
    before = read_text(path)
    data = parse_json_object(before or "", path, comments=comments)
    servers = data.get(parent)
    _require_json(servers, dict, parent, path)
    existing = (servers or {}).get(SERVER_NAME)
    if existing is not None and entry_matches(existing, launcher):
        missing = {k: v for k, v in required.items() if k not in existing}
        if not missing:
            return change(path, label, before, before or "", "ipykeep server already configured")
        entry = {**existing, **missing}
        after = set_nested_member(
            before or "", parent, SERVER_NAME, entry, default_indent=indent, comments=comments
        )
        shown = ", ".join(f'"{k}": {json.dumps(v)}' for k, v in missing.items())
        return change(path, label, before, after, f"added {shown} to the ipykeep entry")
    outdated = existing is not None and bool(extra_args) and entry_matches(existing, plain)
    if existing is not None and not replace and not outdated:
        return conflict(
            path,
            label,
            before or "",
            f"an ipykeep server entry already exists ({_describe_entry(existing)}); "
            f"{_REPLACE_HINT}",
        )
    entry = {**json_server_entry(launcher, with_type=with_type), **required}
    if outdated:
        assert existing is not None  # outdated is only set for an existing entry
        entry = {**existing, "args": list(launcher.args)}  # keeps the user's env and other keys
    after = set_nested_member(
        before or "", parent, SERVER_NAME, entry, default_indent=indent, comments=comments
    )
    if outdated:
        note = f"the ipykeep entry now passes {' '.join(extra_args)}"
    else:
        note = (
            "replaced the ipykeep server entry"
            if existing is not None
            else "added the ipykeep server entry"
        )
    return change(path, label, before, after, note)


#: opencode's schema URL, written at the top of a new ``opencode.json`` (its docs do the same).
OPENCODE_SCHEMA = "https://opencode.ai/config.json"


def opencode_entry_matches(entry: Any, launcher: Launcher) -> bool:
    """Whether an ``mcp.ipykeep`` entry of ``opencode.json`` already runs ``launcher``."""
    return (
        isinstance(entry, dict)
        and entry.get("type") == "local"
        and entry.get("command") == launcher.argv()
    )


def plan_opencode(path: Path, label: str, launcher: Launcher, *, replace: bool) -> FileChange:
    """Merge ``mcp.ipykeep`` (``type: local``, the whole argv in ``command``) into opencode.json.

    opencode reads the file as JSON with comments. A new file starts with opencode's
    ``$schema``; an entry the user disabled (``"enabled": false``) stays disabled.
    """
    before = read_text(path)
    text = before or ""
    data = parse_json_object(text, path, comments=True)
    servers = data.get("mcp")
    _require_json(servers, dict, "mcp", path)
    existing = (servers or {}).get(SERVER_NAME)
    if existing is not None and opencode_entry_matches(existing, launcher):
        return change(path, label, before, text, "ipykeep server already configured")
    if existing is not None and not replace:
        shown = (
            " ".join(map(str, existing.get("command") or []))
            if isinstance(existing, dict) and isinstance(existing.get("command"), list)
            else json.dumps(existing, default=str)
        )
        return conflict(
            path, label, text, f"an ipykeep server entry already exists ({shown}); {_REPLACE_HINT}"
        )
    if not text.strip():
        text = json.dumps({"$schema": OPENCODE_SCHEMA}, indent=2) + "\n"
    entry = {"type": "local", "command": launcher.argv(), "enabled": True}
    after = set_nested_member(text, "mcp", SERVER_NAME, entry, comments=True)
    note = (
        "replaced the ipykeep server entry"
        if existing is not None
        else "added the ipykeep server entry"
    )
    return change(path, label, before, after, note)


def left_alone(path: Path, label: str, note: str) -> FileChange:
    """A file init reads but must not change, not even create."""
    before = read_text(path)
    return FileChange(path, label, before, before or "", ChangeStatus.unchanged, note)


def _claude_approve(text: str, path: Path) -> tuple[str, str]:
    """``text`` with ipykeep in ``enabledMcpjsonServers``, and what changed ("" for nothing)."""
    data = parse_json_object(text, path)
    enabled = data.get("enabledMcpjsonServers")
    disabled = data.get("disabledMcpjsonServers")
    if isinstance(disabled, list) and SERVER_NAME in disabled:
        return text, "ipykeep is in disabledMcpjsonServers: left disabled"
    if data.get("enableAllProjectMcpServers") is True or (
        isinstance(enabled, list) and SERVER_NAME in enabled
    ):
        return text, ""
    _require_json(enabled, list, "enabledMcpjsonServers", path)
    after = set_top_member(text, "enabledMcpjsonServers", [*(enabled or []), SERVER_NAME])
    return after, "approved the project's ipykeep server for Claude Code"


def _claude_permit(text: str, path: Path, *, allow_all: bool) -> tuple[str, str]:
    """``text`` with ipykeep's ``permissions.allow`` rules, and what changed ("" for nothing)."""
    data = parse_json_object(text, path)
    permissions = data.get("permissions")
    _require_json(permissions, dict, "permissions", path)
    allow = (permissions or {}).get("allow")
    _require_json(allow, list, "permissions.allow", path)
    rules = list(allow or [])
    missing = [] if CLAUDE_ALL_TOOLS in rules else claude_allow_rules(allow_all=allow_all)
    missing = [rule for rule in missing if rule not in rules]
    if not missing:
        return text, ""
    after = set_nested_member(text, "permissions", "allow", rules + missing)
    what = "every ipykeep tool" if allow_all else "ipykeep's read-only tools"
    return after, f"allowed {what} without asking"


def plan_claude_permissions(path: Path, label: str, *, allow_all: bool) -> FileChange:
    """Add ipykeep's ``permissions.allow`` rules to a Claude Code settings file.

    Without a rule Claude Code asks before each tool call, and ``claude -p`` refuses it. The
    read-only tools are always allowed; the tools that run code only with ``allow_all`` (one
    rule for the whole server). Existing rules, including the user's ``deny``, stay as they are.
    """
    before = read_text(path)
    after, note = _claude_permit(before or "", path, allow_all=allow_all)
    return change(path, label, before, after, note)


def plan_claude_local(path: Path, label: str, *, allow_all: bool) -> FileChange:
    """Approval and permission rules in the project's ``.claude/settings.local.json``.

    Claude Code honours this file before the workspace is trusted, while the rules of the
    shared ``.claude/settings.json`` wait for trust; it is also the user's own, uncommitted
    file, so allowing the tools that run code there is the user's choice alone.
    """
    before = read_text(path)
    text, approved = _claude_approve(before or "", path)
    after, permitted = _claude_permit(text, path, allow_all=allow_all)
    return change(path, label, before, after, "; ".join(n for n in (approved, permitted) if n))


def _parse_toml(text: str, path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise ConfigError(
            f"{path}: line {exc.line}, column {exc.col}: not valid TOML ({exc})",
            hint=f"fix the syntax of {path} (nothing was written)",
            details={"file": str(path), "line": exc.line, "column": exc.col},
        ) from exc
    except TOMLKitError as exc:
        raise ConfigError(
            f"{path}: not valid TOML ({exc})",
            hint=f"fix the syntax of {path} (nothing was written)",
        ) from exc


def _blank_line_after(text: str) -> str:
    """What to append to ``text`` so that the next block starts after one blank line."""
    if text.endswith("\n\n"):
        return ""
    return "\n" if text.endswith("\n") else "\n\n"


def _codex_table(launcher: Launcher) -> str:
    return f"[mcp_servers.{SERVER_NAME}]\n" + tomlkit.dumps(
        {
            "command": launcher.command,
            "args": list(launcher.args),
            CODEX_APPROVAL_KEY: CODEX_APPROVAL,
        }
    )


def plan_codex_toml(path: Path, label: str, launcher: Launcher, *, replace: bool) -> FileChange:
    """Merge ``[mcp_servers.ipykeep]`` into a Codex ``config.toml``, keeping comments and layout."""
    before = read_text(path)
    text = before or ""
    doc = _parse_toml(text, path)
    servers = doc.get("mcp_servers")
    if servers is None:
        # Appending the table as text keeps the file's own spacing; tomlkit would add its own.
        after = (text + _blank_line_after(text) if text.strip() else "") + _codex_table(launcher)
        _parse_toml(after, path)
        return change(path, label, before, after, "added [mcp_servers.ipykeep]")
    if not isinstance(servers, (Table, InlineTable)):
        raise ConfigError(
            f"{path}: mcp_servers must be a table, found {type(servers).__name__}",
            hint=f"fix {path} (nothing was written)",
            details={"file": str(path)},
        )
    existing = servers.get(SERVER_NAME)
    # tomlkit items unwrap to plain Python values; None (no entry) has nothing to unwrap.
    plain = existing.unwrap() if existing is not None and hasattr(existing, "unwrap") else existing
    if existing is not None and entry_matches(plain, launcher):
        if isinstance(plain, dict) and CODEX_APPROVAL_KEY in plain:  # the user's mode stands
            return change(path, label, before, text, "ipykeep server already configured")
        existing[CODEX_APPROVAL_KEY] = CODEX_APPROVAL
        note = f'added {CODEX_APPROVAL_KEY} = "{CODEX_APPROVAL}" to [mcp_servers.ipykeep]'
        return change(path, label, before, doc.as_string(), note)
    if existing is not None and not replace:
        return conflict(
            path,
            label,
            text,
            f"[mcp_servers.ipykeep] already exists ({_describe_entry(plain)}); {_REPLACE_HINT}",
        )
    if isinstance(servers, InlineTable):
        new: Any = tomlkit.inline_table()
    else:
        new = tomlkit.table()
    new["command"] = launcher.command
    new["args"] = list(launcher.args)
    new[CODEX_APPROVAL_KEY] = CODEX_APPROVAL
    servers[SERVER_NAME] = new
    after = doc.as_string()
    note = (
        "replaced [mcp_servers.ipykeep]" if existing is not None else "added [mcp_servers.ipykeep]"
    )
    return change(path, label, before, after, note)


def plan_owned_file(path: Path, label: str, text: str, *, replace: bool) -> FileChange:
    """A file ipykeep owns entirely (the skill): created, left alone if edited, unless --replace."""
    before = read_text(path)
    if before is not None and before != text and not replace:
        return conflict(
            path, label, before, f"{path.name} differs from ipykeep's version; {_REPLACE_HINT}"
        )
    note = "" if before == text else ("replaced" if before is not None else "")
    return change(path, label, before, text, note)


def _marker_lines(text: str, marker: str) -> list[int]:
    return [i + 1 for i, line in enumerate(text.splitlines()) if line.strip() == marker]


def plan_agents_md(path: Path, label: str) -> FileChange:
    """Create AGENTS.md or update the ipykeep section between its markers; nothing else changes."""
    before = read_text(path)
    if before is None:
        return change(path, label, None, AGENTS_SECTION, "")
    starts, ends = _marker_lines(before, AGENTS_START), _marker_lines(before, AGENTS_END)
    if not starts and not ends:
        sep = _blank_line_after(before) if before.strip() else ""
        return change(
            path, label, before, before + sep + AGENTS_SECTION, "added the ipykeep section"
        )
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        line = (starts or ends)[0]
        raise ConfigError(
            f"{path}: line {line}: the ipykeep section markers are unbalanced "
            f"(need exactly one {AGENTS_START} followed by one {AGENTS_END})",
            hint=f"fix the markers in {path} (nothing was written)",
            details={"file": str(path), "line": line},
        )
    lines = before.splitlines(keepends=True)
    head = "".join(lines[: starts[0] - 1])
    tail = "".join(lines[ends[0] :])
    section = AGENTS_SECTION
    if not tail and not lines[ends[0] - 1].endswith("\n"):
        section = section.rstrip("\n")  # keep a file that had no final newline that way
    after = head + section + tail
    return change(
        path, label, before, after, "updated the ipykeep section" if after != before else ""
    )


def plan_ipykeep_toml(
    path: Path, label: str, fresh_text: str, notebook: str | None, *, replace: bool
) -> FileChange:
    """Create ipykeep.toml, or set its ``notebook`` in place keeping every other line."""
    before = read_text(path)
    if before is None:
        return change(path, label, None, fresh_text, "")
    doc = _parse_toml(before, path)
    if notebook is None:
        return change(path, label, before, before, "")
    current = doc.get("notebook")
    if current == notebook:
        return change(path, label, before, before, "")
    if current is not None and not replace:
        return conflict(
            path, label, before, f"notebook is already set to {str(current)!r}; {_REPLACE_HINT}"
        )
    doc["notebook"] = notebook
    return change(path, label, before, doc.as_string(), f"set notebook = {notebook!r}")


_IGNORED = {".ipykeep", ".ipykeep/", "/.ipykeep", "/.ipykeep/", ".ipykeep/*", "/.ipykeep/*"}


def plan_gitignore(path: Path, label: str) -> FileChange:
    before = read_text(path)
    if before is not None and any(line.strip() in _IGNORED for line in before.splitlines()):
        return change(path, label, before, before, "")
    text = before or ""
    sep = "" if not text or text.endswith("\n") else "\n"
    return change(path, label, before, text + sep + ".ipykeep/\n", "ignore .ipykeep/")
