"""``ipykeep init``: register ipykeep with coding-agent hosts and set up the project.

Project scope (the default) writes, at the project root:

- Claude Code: ``.mcp.json`` (``mcpServers.ipykeep``), its approval in
  ``.claude/settings.local.json`` (``enabledMcpjsonServers``: Claude Code starts a project
  server only once approved), permission rules in ``.claude/settings.json``
  (``permissions.allow``: the read-only tools, or with ``allow_all`` every tool, so neither the
  prompt nor ``claude -p`` stops them), and the skill ``.claude/skills/ipykeep/SKILL.md`` that
  teaches the notebook workflow;
- Codex: ``.codex/config.toml`` (``[mcp_servers.ipykeep]`` with ``default_tools_approval_mode =
  "approve"``); Codex reads it only in a trusted project, so init says how to trust it when it
  is not (see ``gates.py``);
- Cursor: ``.cursor/mcp.json`` (``mcpServers.ipykeep``, with ``--project ${workspaceFolder}``);
- Codex and Cursor read ``AGENTS.md``: an ipykeep section between
  ``<!-- ipykeep:start -->``/``<!-- ipykeep:end -->`` markers, created or updated in place;
- ``ipykeep.toml`` (the notebook, every other setting commented out) and ``.ipykeep/`` in
  ``.gitignore``.

User scope writes the hosts' user-level files instead (``~/.claude.json``,
``~/.claude/settings.json``, ``~/.claude/skills/ipykeep/SKILL.md``, ``~/.codex/config.toml``,
``~/.codex/AGENTS.md``,
``~/.cursor/mcp.json``) and no project files.

Every existing file is parsed first and a malformed one stops the run before anything is written.
Only ipykeep's own entry is touched; other settings, comments, key order and indentation stay as
they were. An existing, different ipykeep entry is left alone and reported as a conflict unless
``replace`` is set. Rerunning changes nothing (files stay byte-identical). Each file is replaced
atomically and keeps its mode.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ipykeep.api.errors import ConfigError, UsageError
from ipykeep.scaffold import editors
from ipykeep.scaffold.content import SKILL_MD, ipykeep_toml
from ipykeep.scaffold.files import ChangeStatus, FileChange, atomic_write, unified_diff
from ipykeep.scaffold.launcher import Launcher, resolve_launcher


class Provider(str, enum.Enum):
    claude_code = "claude_code"
    codex = "codex"
    cursor = "cursor"
    all = "all"


class Scope(str, enum.Enum):
    project = "project"
    user = "user"


HOSTS: tuple[Provider, ...] = (Provider.claude_code, Provider.codex, Provider.cursor)


def expand_providers(providers: Iterable[Provider] | None) -> frozenset[Provider]:
    chosen = set(providers or ())
    if not chosen or Provider.all in chosen:
        return frozenset(HOSTS)
    return frozenset(chosen)


@dataclass(frozen=True)
class InitOptions:
    root: Path
    #: Notebook path relative to ``root`` (posix), see :func:`resolve_notebook`.
    notebook: str | None = None
    providers: frozenset[Provider] = frozenset(HOSTS)
    scope: Scope = Scope.project
    replace: bool = False
    launcher: Launcher = field(default_factory=resolve_launcher)
    #: Home directory for user scope; None means the current user's.
    home: Path | None = None
    #: Claude Code: allow every ipykeep tool without asking, not only the read-only ones.
    allow_all: bool = False

    @property
    def home_dir(self) -> Path:
        return self.home if self.home is not None else Path.home()


@dataclass(frozen=True)
class InitPlan:
    options: InitOptions
    changes: tuple[FileChange, ...]
    #: What the user still has to do for a host to start the server (Codex trust…).
    notes: tuple[str, ...] = ()

    @property
    def conflicts(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.status is ChangeStatus.conflict)

    @property
    def writes(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.writes)

    def display(self, path: Path) -> str:
        """``path`` relative to the project root, or ``~/…`` under the home directory."""
        for base, prefix in ((self.options.root, ""), (self.options.home_dir, "~/")):
            try:
                return prefix + path.relative_to(base).as_posix()
            except ValueError:
                continue
        return str(path)

    def diff(self) -> str:
        return "".join(unified_diff(c, self.display(c.path)) for c in self.changes)


def resolve_notebook(root: Path, notebook: str | os.PathLike[str], cwd: Path | None = None) -> str:
    """The notebook's path relative to the project root, checked to exist inside it."""
    path = Path(notebook)
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise UsageError(
            f"notebook {notebook} not found ({path})",
            hint="pass the path of an existing .ipynb file",
        )
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        raise UsageError(
            f"notebook {path} is outside the project {root}",
            hint="run ipykeep init from the notebook's project, or move the notebook into it",
        ) from None


def plan_init(options: InitOptions) -> InitPlan:
    """Compute every change ``init`` would make; reads and validates files, writes nothing."""
    providers = options.providers
    launcher = options.launcher
    replace = options.replace
    changes: list[FileChange] = []
    if options.scope is Scope.user and options.notebook is not None:
        raise UsageError(
            "a notebook belongs to a project, not to user scope",
            hint="run `ipykeep init NOTEBOOK` (project scope) to write it to ipykeep.toml",
        )
    if options.scope is Scope.project:
        base = options.root
        claude_json = base / ".mcp.json"
        claude_settings = base / ".claude" / "settings.json"
        skill = base / ".claude" / "skills" / "ipykeep" / "SKILL.md"
        codex_toml = base / ".codex" / "config.toml"
        agents_md = base / "AGENTS.md"
        cursor_json = base / ".cursor" / "mcp.json"
    else:
        base = options.home_dir
        claude_json = base / ".claude.json"
        claude_settings = base / ".claude" / "settings.json"
        skill = base / ".claude" / "skills" / "ipykeep" / "SKILL.md"
        codex_toml = base / ".codex" / "config.toml"
        agents_md = base / ".codex" / "AGENTS.md"
        cursor_json = base / ".cursor" / "mcp.json"
    if Provider.claude_code in providers:
        changes.append(
            editors.plan_json_servers(
                claude_json, "Claude Code MCP servers", launcher, replace=replace, with_type=True
            )
        )
        if options.scope is Scope.project:
            from ipykeep.scaffold.gates import claude_approval

            local = base / ".claude" / "settings.local.json"
            approval = claude_approval(options.root, options.home_dir)
            if approval.state == "disabled" and approval.source != local:
                # disabled in another settings file: the user's refusal stands
                changes.append(
                    editors.left_alone(
                        local, "Claude Code approval", f"ipykeep is disabled in {approval.source}"
                    )
                )
            else:
                changes.append(editors.plan_claude_approval(local, "Claude Code approval"))
        changes.append(
            editors.plan_claude_permissions(
                claude_settings, "Claude Code permissions", allow_all=options.allow_all
            )
        )
        changes.append(
            editors.plan_owned_file(skill, "Claude Code skill", SKILL_MD, replace=replace)
        )
    if Provider.codex in providers:
        changes.append(
            editors.plan_codex_toml(codex_toml, "Codex MCP servers", launcher, replace=replace)
        )
    if Provider.cursor in providers:
        changes.append(
            editors.plan_json_servers(
                cursor_json,
                "Cursor MCP servers",
                launcher,
                replace=replace,
                with_type=False,
                extra_args=editors.CURSOR_PROJECT_ARGS,
            )
        )
    if Provider.codex in providers or (
        Provider.cursor in providers and options.scope is Scope.project
    ):
        changes.append(editors.plan_agents_md(agents_md, "agent instructions"))
    if options.scope is Scope.project:
        root = options.root
        changes.append(
            editors.plan_ipykeep_toml(
                root / "ipykeep.toml",
                "ipykeep settings",
                ipykeep_toml(options.notebook),
                options.notebook,
                replace=replace,
            )
        )
        changes.append(editors.plan_gitignore(root / ".gitignore", "git ignore rules"))
    notes: list[str] = []
    if Provider.codex in providers and options.scope is Scope.project:
        from ipykeep.scaffold.gates import codex_fix, codex_trust

        trust = codex_trust(options.root, options.home_dir)
        if trust != "trusted":
            notes.append(
                "Codex: this project is not trusted yet, so Codex ignores .codex/config.toml. "
                + codex_fix(options.root, options.home_dir, state=trust)
            )
    return InitPlan(options, tuple(changes), tuple(notes))


def apply_plan(plan: InitPlan) -> None:
    """Write every planned change (each file atomically)."""
    for item in plan.writes:
        try:
            atomic_write(item.path, item.after)
        except OSError as exc:
            raise ConfigError(
                f"{item.path}: cannot write ({exc.strerror or exc})",
                hint=f"check the permissions of {item.path.parent}",
            ) from exc


def run_init(options: InitOptions, *, dry_run: bool = False) -> InitPlan:
    """Plan, then (unless ``dry_run``) write. A malformed file raises before any write."""
    plan = plan_init(options)
    if not dry_run:
        apply_plan(plan)
    return plan
