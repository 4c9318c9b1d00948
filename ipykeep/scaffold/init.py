"""``ipykeep init``: register ipykeep with coding-agent hosts and set up the project.

Project scope (the default) writes, at the project root:

- Claude Code: ``.mcp.json`` (``mcpServers.ipykeep``); in ``.claude/settings.local.json`` its
  approval (``enabledMcpjsonServers``: Claude Code starts a project server only once approved)
  and the permission rules (``permissions.allow``: the read-only tools, or with ``allow_all``
  every tool, so neither the prompt nor ``claude -p`` stops them): Claude Code honours that file
  before the workspace is trusted, unlike ``.claude/settings.json``; and the skill
  ``.claude/skills/ipykeep/SKILL.md`` that teaches the notebook workflow;
- Codex: ``.codex/config.toml`` (``[mcp_servers.ipykeep]`` with ``default_tools_approval_mode =
  "approve"``); Codex reads it only in a trusted project, so init says how to trust it when it
  is not (see ``gates.py``);
- Cursor: ``.cursor/mcp.json`` (``mcpServers.ipykeep``, with ``--project ${workspaceFolder}``);
- Gemini CLI: ``.gemini/settings.json`` (``mcpServers.ipykeep`` with ``"trust": true``: without
  it a headless run leaves the tools out) and the ipykeep section in ``GEMINI.md`` (or the
  context file ``context.fileName`` names);
- opencode: ``opencode.json`` (``mcp.ipykeep``, ``type: local``);
- VS Code: ``.vscode/mcp.json`` (``servers.ipykeep``, ``type: stdio``, with ``--project
  ${workspaceFolder}``);
- Codex, Cursor and opencode read ``AGENTS.md``: an ipykeep section between
  ``<!-- ipykeep:start -->``/``<!-- ipykeep:end -->`` markers, created or updated in place;
- ``ipykeep.toml`` (the notebook, every other setting commented out) and ``.ipykeep/`` in
  ``.gitignore``.

User scope writes the hosts' user-level files instead (``~/.claude.json``,
``~/.claude/settings.json``, ``~/.claude/skills/ipykeep/SKILL.md``, ``~/.codex/config.toml``,
``~/.codex/AGENTS.md``, ``~/.cursor/mcp.json``, ``~/.gemini/settings.json``,
``~/.gemini/GEMINI.md``, ``~/.config/opencode/opencode.json``) and no project files; VS Code's
user file lives in its profile, so VS Code is configured per project only.

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
from ipykeep.scaffold import editors, gates
from ipykeep.scaffold.content import SKILL_MD, ipykeep_toml
from ipykeep.scaffold.files import (
    ChangeStatus,
    FileChange,
    atomic_write,
    read_text,
    unified_diff,
)
from ipykeep.scaffold.gates import codex_home
from ipykeep.scaffold.jsonfile import parse_json_object
from ipykeep.scaffold.launcher import Launcher, resolve_launcher


class Provider(str, enum.Enum):
    claude_code = "claude_code"
    codex = "codex"
    cursor = "cursor"
    gemini = "gemini"
    opencode = "opencode"
    vscode = "vscode"
    all = "all"


class Scope(str, enum.Enum):
    project = "project"
    user = "user"


HOSTS: tuple[Provider, ...] = (
    Provider.claude_code,
    Provider.codex,
    Provider.cursor,
    Provider.gemini,
    Provider.opencode,
    Provider.vscode,
)


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
    #: Environment for user-level locations (CODEX_HOME, XDG_CONFIG_HOME…); None: os.environ.
    environ: dict[str, str] | None = None

    @property
    def home_dir(self) -> Path:
        return self.home if self.home is not None else Path.home()


@dataclass(frozen=True)
class HostFiles:
    """Where each host's files are, in one scope."""

    claude_servers: Path
    claude_settings: Path
    skill: Path
    codex_toml: Path
    agents_md: Path
    cursor_json: Path
    gemini_settings: Path
    gemini_context_dir: Path
    opencode_json: Path
    vscode_json: Path | None


def host_files(options: InitOptions) -> HostFiles:
    env = os.environ if options.environ is None else options.environ
    if options.scope is Scope.project:
        base = options.root
        opencode = base / "opencode.jsonc"
        return HostFiles(
            claude_servers=base / ".mcp.json",
            claude_settings=base / ".claude" / "settings.local.json",
            skill=base / ".claude" / "skills" / "ipykeep" / "SKILL.md",
            codex_toml=base / ".codex" / "config.toml",
            agents_md=base / "AGENTS.md",
            cursor_json=base / ".cursor" / "mcp.json",
            gemini_settings=base / ".gemini" / "settings.json",
            gemini_context_dir=base,
            opencode_json=opencode if opencode.is_file() else base / "opencode.json",
            vscode_json=base / ".vscode" / "mcp.json",
        )
    home = options.home_dir
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    config_dir = Path(xdg) if xdg else home / ".config"
    opencode = config_dir / "opencode" / "opencode.jsonc"
    return HostFiles(
        claude_servers=home / ".claude.json",
        claude_settings=home / ".claude" / "settings.json",
        skill=home / ".claude" / "skills" / "ipykeep" / "SKILL.md",
        codex_toml=codex_home(home, options.environ) / "config.toml",
        agents_md=codex_home(home, options.environ) / "AGENTS.md",
        cursor_json=home / ".cursor" / "mcp.json",
        gemini_settings=home / ".gemini" / "settings.json",
        gemini_context_dir=home / ".gemini",
        opencode_json=opencode if opencode.is_file() else opencode.with_suffix(".json"),
        vscode_json=None,
    )


def gemini_context_file(settings: Path, context_dir: Path) -> Path:
    """The context file Gemini CLI reads: ``GEMINI.md``, or the one ``context.fileName`` names.

    When ``context.fileName`` lists several files, AGENTS.md is preferred (it gets ipykeep's
    section anyway), then GEMINI.md, then the first one listed.
    """
    data = parse_json_object(read_text(settings) or "", settings, comments=True)
    context = data.get("context")
    names = context.get("fileName") if isinstance(context, dict) else None
    listed = [names] if isinstance(names, str) else names
    if not isinstance(listed, list) or not listed:
        return context_dir / "GEMINI.md"
    plain = [n for n in listed if isinstance(n, str) and n and "/" not in n]
    for name in ("AGENTS.md", "GEMINI.md", *plain):
        if name in plain:
            return context_dir / name
    return context_dir / "GEMINI.md"


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
    project = options.scope is Scope.project
    changes: list[FileChange] = []
    notes: list[str] = []
    if not project and options.notebook is not None:
        raise UsageError(
            "a notebook belongs to a project, not to user scope",
            hint="run `ipykeep init NOTEBOOK` (project scope) to write it to ipykeep.toml",
        )
    files = host_files(options)
    if Provider.claude_code in providers:
        changes.append(
            editors.plan_json_servers(
                files.claude_servers,
                "Claude Code MCP servers",
                launcher,
                replace=replace,
                with_type=True,
            )
        )
        if project:
            approval = gates.claude_approval(options.root, options.home_dir)
            if approval.state == "disabled":  # the user's refusal stands: nothing is allowed
                changes.append(
                    editors.left_alone(
                        files.claude_settings,
                        "Claude Code approval and permissions",
                        f"ipykeep is disabled in {approval.source}",
                    )
                )
            else:
                changes.append(
                    editors.plan_claude_local(
                        files.claude_settings,
                        "Claude Code approval and permissions",
                        allow_all=options.allow_all,
                    )
                )
        else:
            changes.append(
                editors.plan_claude_permissions(
                    files.claude_settings, "Claude Code permissions", allow_all=options.allow_all
                )
            )
        changes.append(
            editors.plan_owned_file(files.skill, "Claude Code skill", SKILL_MD, replace=replace)
        )
    if Provider.codex in providers:
        changes.append(
            editors.plan_codex_toml(
                files.codex_toml, "Codex MCP servers", launcher, replace=replace
            )
        )
    if Provider.cursor in providers:
        changes.append(
            editors.plan_json_servers(
                files.cursor_json,
                "Cursor MCP servers",
                launcher,
                replace=replace,
                with_type=False,
                extra_args=editors.CURSOR_PROJECT_ARGS,
            )
        )
    context_file: Path | None = None
    if Provider.gemini in providers:
        changes.append(
            editors.plan_json_servers(
                files.gemini_settings,
                "Gemini CLI MCP servers",
                launcher,
                replace=replace,
                with_type=False,
                comments=True,
                required={"trust": True},
            )
        )
        context_file = gemini_context_file(files.gemini_settings, files.gemini_context_dir)
    if Provider.opencode in providers:
        changes.append(
            editors.plan_opencode(
                files.opencode_json, "opencode MCP servers", launcher, replace=replace
            )
        )
    if Provider.vscode in providers:
        if files.vscode_json is None:
            notes.append(
                "VS Code: its user-level mcp.json lives in the editor's profile; "
                "run `ipykeep init --provider vscode` in each project instead"
            )
        else:
            changes.append(
                editors.plan_json_servers(
                    files.vscode_json,
                    "VS Code MCP servers",
                    launcher,
                    replace=replace,
                    with_type=True,
                    extra_args=editors.CURSOR_PROJECT_ARGS,
                    parent="servers",
                    comments=True,
                )
            )
    agents_readers = {Provider.codex} | ({Provider.cursor, Provider.opencode} if project else set())
    if providers & agents_readers or (context_file == files.agents_md):
        changes.append(editors.plan_agents_md(files.agents_md, "agent instructions"))
    if context_file is not None and context_file != files.agents_md:
        changes.append(editors.plan_agents_md(context_file, "Gemini CLI instructions"))
    if project:
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
        notes.extend(_gate_notes(options))
    return InitPlan(options, tuple(changes), tuple(notes))


def _gate_notes(options: InitOptions) -> list[str]:
    """What each chosen host still needs before it starts the project's server."""
    root, home, env = options.root, options.home_dir, options.environ
    notes: list[str] = []
    if Provider.claude_code in options.providers and not gates.claude_trusted(root, home):
        notes.append(
            "Claude Code: this workspace is not trusted yet (the rules in "
            ".claude/settings.local.json apply already; those in .claude/settings.json wait for "
            "trust). " + gates.claude_trust_fix(root, home)
        )
    if Provider.codex in options.providers:
        trust = gates.codex_trust(root, home, env)
        if trust != "trusted":
            notes.append(
                "Codex: this project is not trusted yet, so Codex ignores .codex/config.toml. "
                + gates.codex_fix(root, home, env, state=trust)
            )
    if Provider.gemini in options.providers:
        folder = gates.gemini_trust(root, home, env)
        if folder.state in ("untrusted", "unknown"):
            notes.append(
                "Gemini CLI: this folder is not trusted yet, so Gemini CLI ignores "
                ".gemini/settings.json. " + gates.gemini_trust_fix(root, home, env, folder.rule)
            )
    return notes


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
