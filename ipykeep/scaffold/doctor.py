"""``ipykeep doctor``: check the installation and the project, and explain how to fix what fails.

Checks: the Python and package versions (``mcp`` must be 2.x), the configuration, that the
kernel's Python (``Config.python``) can import ipykernel and ipyflow, whether the project's daemon
answers, that every host config with an ipykeep entry points at a command that exists, and
the hosts' own gates (Claude Code's workspace trust, its approval of project servers and its
permission rules for ipykeep's tools; Codex's project trust and tool approval mode; Gemini CLI's
folder trust and the entry's ``trust`` flag; opencode's ``enabled``; Cursor's and VS Code's
``--project``; see ``gates.py``), each unfinished one with the one step that finishes it. A
check that cannot run yet, or a daemon that is not running (it starts on demand), is a warning,
never a failure.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from ipykeep.api.errors import ConfigError, IpykeepError
from ipykeep.environments import discovery
from ipykeep.project.config import Config, load_config
from ipykeep.scaffold import gates
from ipykeep.scaffold.editors import (
    CODEX_APPROVAL,
    CODEX_APPROVAL_KEY,
    CURSOR_PROJECT_ARGS,
    SERVER_NAME,
)
from ipykeep.scaffold.files import read_text
from ipykeep.scaffold.jsonfile import parse_json_object


class Status(str, enum.Enum):
    ok = "ok"
    warn = "warn"
    fail = "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class DoctorReport:
    root: Path
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.status is not Status.fail for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def as_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "ok": self.ok, "checks": [c.as_dict() for c in self.checks]}


#: Distributions ipykeep needs, with the major version it was built against (None: any).
REQUIRED: tuple[tuple[str, int | None], ...] = (
    ("mcp", 2),
    ("ipyflow-core", None),
    ("ipykernel", None),
    ("jupyter_client", None),
)


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 10):
        return Check(
            "python",
            Status.fail,
            f"Python {version} ({sys.executable})",
            "use Python 3.10 or newer",
        )
    return Check("python", Status.ok, f"Python {version} ({sys.executable})")


def check_package(name: str, major: int | None) -> Check:
    install = (
        f"{sys.executable} -m pip install '{name}{f'>={major},<{major + 1}' if major else ''}'"
    )
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return Check(name, Status.fail, "not installed next to ipykeep", f"run: {install}")
    if major is not None:
        try:
            found = int(version.split(".")[0])
        except ValueError:
            found = -1
        if found != major:
            return Check(
                name,
                Status.fail,
                f"{version} installed, ipykeep needs {major}.x",
                f"run: {install}",
            )
    return Check(name, Status.ok, version)


def check_config(root: Path) -> tuple[Check, Config | None]:
    try:
        config = load_config(root)
    except IpykeepError as exc:
        return Check(
            "config", Status.fail, exc.message, exc.hint or "fix the setting named above"
        ), None
    return Check("config", Status.ok, f"loaded for {root}"), config


def resolve_command(command: str, root: Path) -> str | None:
    """Where ``command`` is found the way a host started in ``root`` would find it, or None.

    A bare name is looked up on PATH; a path with a separator is taken relative to ``root``.
    """
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command)
        if not path.is_absolute():
            path = root / path
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(command)
    return found


_IMPORT_PROBE = """\
import json, sys
missing = {}
for name in ("ipykernel", "ipyflow"):
    try:
        __import__(name)
    except Exception as exc:
        missing[name] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps({"version": sys.version.split()[0], "missing": missing}))
"""


def check_environment(config: Config, root: Path) -> tuple[Check, str | None]:
    """Which environment a local kernel runs in and why, and its interpreter (None: none)."""
    name = "kernel environment"
    try:
        info = discovery.discover(root, config)
    except IpykeepError as exc:
        return Check(name, Status.fail, exc.message, exc.hint), None
    detail = f"{info.why}: {info.prefix or info.python}"
    if info.kind not in ("setting", "ipykeep") and not discovery.has_ipykernel(info):
        if config.install_kernel:
            return Check(
                name,
                Status.warn,
                f"{detail}; ipykernel is installed at first start (install_kernel = true)",
            ), None
        return Check(
            name,
            Status.fail,
            f"{detail}; it has no ipykernel",
            f"run: {discovery.kernel_fix(info)}",
        ), None
    return Check(name, Status.ok, detail), info.python


def check_kernel_python(
    config: Config, root: Path, timeout: float = 120.0, python_name: str | None = None
) -> Check:
    name = "kernel python"
    wanted = python_name or config.python or sys.executable
    python = resolve_command(wanted, root)
    if python is None:
        return Check(
            name,
            Status.fail,
            f"{wanted} not found or not executable",
            "set python in ipykeep.toml (or IPYKEEP_PYTHON) to an existing interpreter",
        )
    try:
        proc = subprocess.run(
            [python, "-c", _IMPORT_PROBE], cwd=root, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return Check(
            name,
            Status.fail,
            f"{python} did not answer within {timeout:.0f} s",
            "check that it runs",
        )
    except OSError as exc:
        return Check(name, Status.fail, f"{python} cannot be started ({exc})", "check that it runs")
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return Check(
            name,
            Status.fail,
            f"{python} could not run the import probe: {last}",
            "check that it is a working Python 3 interpreter",
        )
    missing: dict[str, str] = result.get("missing", {})
    install = f"{python} -m pip install ipykernel ipyflow-core"
    if set(missing) == {"ipyflow"} and config.dataflow == "static":
        return Check(name, Status.warn, f"{python}: ipykernel ok, no ipyflow (dataflow = static)")
    if missing:
        why = "; ".join(f"{module}: {error}" for module, error in missing.items())
        alternative = (
            "" if "ipykernel" in missing else '  (or set dataflow = "static" in ipykeep.toml)'
        )
        return Check(
            name,
            Status.fail,
            f"{python} cannot import {' and '.join(missing)} ({why})",
            f"run: {install}{alternative}",
        )
    return Check(
        name, Status.ok, f"{python} (Python {result.get('version')}) imports ipykernel and ipyflow"
    )


def check_daemon(root: Path) -> Check:
    name = "daemon"
    try:
        from ipykeep.client import (
            connection as client,  # imported lazily: the client may not be installed
        )
    except ImportError:
        return Check(name, Status.warn, "not checked (this ipykeep has no daemon client)")
    descriptor = client.find_daemon(root)
    if descriptor is None:
        return Check(name, Status.warn, "not running (it starts on demand)")
    try:
        daemon = client.DaemonClient(descriptor)
        answer = daemon.call("ping")
        if inspect.isawaitable(answer):
            answer = asyncio.run(_settle(answer, daemon))
        else:
            _close(daemon)
    except Exception as exc:  # any failure to talk to it is the finding itself
        message = exc.message if isinstance(exc, IpykeepError) else f"{type(exc).__name__}: {exc}"
        return Check(
            name,
            Status.fail,
            f"a daemon is registered for {root} but did not answer ({message})",
            "stop it with `ipykeep daemon stop` (or end its process) "
            "and let the next call start a new one",
        )
    pid = getattr(descriptor, "pid", None)
    version = getattr(descriptor, "version", None)
    about = ", ".join(
        x for x in (f"pid {pid}" if pid else "", f"version {version}" if version else "") if x
    )
    return Check(name, Status.ok, f"running and answering{f' ({about})' if about else ''}")


async def _settle(awaitable: Any, daemon: Any) -> Any:
    try:
        return await awaitable
    finally:
        closer = getattr(daemon, "aclose", None) or getattr(daemon, "close", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result


def _close(daemon: Any) -> None:
    closer = getattr(daemon, "close", None)
    if closer is not None:
        closer()


def _json_entry(parent: str, *, comments: bool = False) -> Callable[[Path], Any]:
    """A loader of ``<parent>.ipykeep`` from a JSON host file (None when it has none)."""

    def load(path: Path) -> Any:
        text = read_text(path)
        if text is None:
            return None
        servers = parse_json_object(text, path, comments=comments).get(parent)
        return servers.get(SERVER_NAME) if isinstance(servers, dict) else None

    return load


def _load_opencode_entry(path: Path) -> Any:
    """opencode's ``mcp.ipykeep``, with its argv split as ``command`` + ``args`` like the rest."""
    entry = _json_entry("mcp", comments=True)(path)
    if not isinstance(entry, dict):
        return entry
    argv = entry.get("command")
    if not isinstance(argv, list) or not argv:
        return {**entry, "command": None, "args": []}
    return {**entry, "command": argv[0], "args": argv[1:]}


def _load_toml_entry(path: Path) -> Any:
    text = read_text(path)
    if text is None:
        return None
    try:
        doc = tomlkit.parse(text).unwrap()
    except TOMLKitError as exc:
        line = getattr(exc, "line", None)
        raise ConfigError(
            f"{path}{f': line {line}' if line else ''}: not valid TOML ({exc})",
            hint=f"fix the syntax of {path}",
        ) from exc
    servers = doc.get("mcp_servers")
    return servers.get(SERVER_NAME) if isinstance(servers, dict) else None


def _opencode_file(directory: Path) -> Path:
    jsonc = directory / "opencode.jsonc"
    return jsonc if jsonc.is_file() else directory / "opencode.json"


def host_config_files(
    root: Path, home: Path
) -> tuple[tuple[str, Path, Callable[[Path], Any]], ...]:
    servers, gemini = _json_entry("mcpServers"), _json_entry("mcpServers", comments=True)
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    config_dir = Path(xdg) if xdg else home / ".config"
    return (
        ("Claude Code (project)", root / ".mcp.json", servers),
        ("Codex (project)", root / ".codex" / "config.toml", _load_toml_entry),
        ("Cursor (project)", root / ".cursor" / "mcp.json", servers),
        ("Gemini CLI (project)", root / ".gemini" / "settings.json", gemini),
        ("opencode (project)", _opencode_file(root), _load_opencode_entry),
        ("VS Code (project)", root / ".vscode" / "mcp.json", _json_entry("servers", comments=True)),
        ("Claude Code (user)", home / ".claude.json", servers),
        ("Codex (user)", gates.codex_home(home) / "config.toml", _load_toml_entry),
        ("Cursor (user)", home / ".cursor" / "mcp.json", servers),
        ("Gemini CLI (user)", home / ".gemini" / "settings.json", gemini),
        ("opencode (user)", _opencode_file(config_dir / "opencode"), _load_opencode_entry),
    )


#: Hosts whose entry must name the project (they may start the server outside it).
_WORKSPACE_HOSTS = {"Cursor": "cursor", "VS Code": "vscode"}


def check_hosts(root: Path, home: Path | None = None) -> list[Check]:
    home = home or Path.home()
    checks: list[Check] = []
    seen: set[str] = set()  # hosts whose own gates were checked already
    for label, path, load in host_config_files(root, home):
        name = f"host {label}"
        host = label.rsplit(" (", 1)[0]
        try:
            entry = load(path)
        except IpykeepError as exc:
            checks.append(Check(name, Status.fail, exc.message, exc.hint))
            continue
        if entry is None:
            continue
        command = entry.get("command") if isinstance(entry, dict) else None
        args = (entry.get("args") or []) if isinstance(entry, dict) else []
        if not isinstance(command, str) or not command:
            checks.append(
                Check(
                    name,
                    Status.fail,
                    f"{path}: the ipykeep entry has no command",
                    "rerun `ipykeep init --replace`",
                )
            )
            continue
        shown = " ".join([command, *map(str, args)])
        found = resolve_command(command, root)
        if found is None:
            checks.append(
                Check(
                    name,
                    Status.fail,
                    f"{path}: `{command}` is not found from {root}",
                    "rerun `ipykeep init --replace` with the ipykeep you want hosts to run "
                    "(it writes that ipykeep's absolute path when `ipykeep` is not on PATH)",
                )
            )
        elif host in _WORKSPACE_HOSTS and "--project" not in map(str, args):
            checks.append(
                Check(
                    name,
                    Status.warn,
                    f"{shown}: no --project, "
                    f"so a server {host} starts outside the workspace serves the wrong project",
                    f"rerun `ipykeep init --provider {_WORKSPACE_HOSTS[host]}` "
                    f"(adds {' '.join(CURSOR_PROJECT_ARGS)})",
                )
            )
        else:
            checks.append(Check(name, Status.ok, f"{shown}  ({found})"))
        if isinstance(entry, dict):
            checks.extend(_entry_gate(label, path, entry))
        if host not in seen:
            seen.add(host)
            checks.extend(_host_gate(label, root, home))
    if not checks:
        checks.append(
            Check(
                "hosts",
                Status.warn,
                "no host config has an ipykeep entry",
                "run `ipykeep init` in the project",
            )
        )
    return checks


def _entry_gate(label: str, path: Path, entry: dict[str, Any]) -> list[Check]:
    """What the entry itself must say for the host to use the tools."""
    if label.startswith("Codex"):
        return [_codex_approval(label, path, entry)]
    if label.startswith("Gemini CLI"):
        name = f"host {label} trust flag"
        if entry.get("trust") is True:
            return [Check(name, Status.ok, '"trust": true (tools run without asking)')]
        return [
            Check(
                name,
                Status.warn,
                'no "trust": true: Gemini CLI asks before each tool call, and a headless run '
                "leaves ipykeep's tools out",
                f'add "trust": true to mcpServers.{SERVER_NAME} in {path} '
                "(or rerun `ipykeep init --provider gemini`)",
            )
        ]
    if label.startswith("opencode"):
        name = f"host {label} enabled"
        if entry.get("type") != "local":
            return [
                Check(
                    name,
                    Status.fail,
                    f'mcp.{SERVER_NAME} has type {entry.get("type")!r}, not "local"',
                    "rerun `ipykeep init --provider opencode --replace`",
                )
            ]
        if entry.get("enabled") is False:
            return [
                Check(
                    name,
                    Status.warn,
                    '"enabled": false: opencode does not start ipykeep',
                    f'set "enabled": true in mcp.{SERVER_NAME} of {path}',
                )
            ]
    return []


def _codex_approval(label: str, path: Path, entry: dict[str, Any]) -> Check:
    """Whether Codex runs ipykeep's tools without asking (``codex exec`` cannot ask)."""
    name = f"host {label} tool approval"
    mode = entry.get(CODEX_APPROVAL_KEY)
    fix = (
        f'set {CODEX_APPROVAL_KEY} = "{CODEX_APPROVAL}" under [mcp_servers.{SERVER_NAME}] in '
        f"{path} (or rerun `ipykeep init --provider codex`)"
    )
    if mode == CODEX_APPROVAL:
        return Check(name, Status.ok, f'{CODEX_APPROVAL_KEY} = "{mode}"')
    shown = f'{CODEX_APPROVAL_KEY} = "{mode}"' if mode is not None else f"no {CODEX_APPROVAL_KEY}"
    return Check(
        name,
        Status.warn,
        f"{shown}: Codex asks before each tool that runs code, and `codex exec` "
        "(approval_policy = never) refuses them",
        fix,
    )


def _claude_trust(root: Path, home: Path) -> tuple[bool, Check]:
    name = "host Claude Code trust"
    if gates.claude_trusted(root, home):
        return True, Check(name, Status.ok, f"workspace trusted ({home / '.claude.json'})")
    return False, Check(
        name,
        Status.warn,
        "workspace not trusted yet: Claude Code ignores the permissions.allow rules of "
        ".claude/settings.json until it is (those of .claude/settings.local.json apply already)",
        gates.claude_trust_fix(root, home),
    )


def _claude_permissions(root: Path, home: Path, *, trusted: bool) -> Check:
    name = "host Claude Code permissions"
    allowed = gates.claude_permissions(root, home, trusted=trusted)
    local = root / ".claude" / "settings.local.json"
    if allowed.denied:
        return Check(
            name,
            Status.warn,
            f"denied by permissions.deny: {', '.join(allowed.denied)}",
            "remove those rules from permissions.deny if ipykeep's tools should run",
        )
    if allowed.all_tools:
        return Check(name, Status.ok, "every ipykeep tool is allowed without asking")
    if allowed.read_only:
        return Check(
            name,
            Status.ok,
            "read-only tools allowed; tools that run code ask first (`claude -p` refuses them; "
            f"`ipykeep init --allow-all` allows them in {local})",
        )
    shared = root / ".claude" / "settings.json"
    waiting = gates.claude_permissions(root, home, only=shared)
    if not trusted and (waiting.read_only or waiting.all_tools):
        return Check(
            name,
            Status.warn,
            f"ipykeep's rules are in {shared}, which Claude Code ignores until the workspace is "
            "trusted: it asks before every tool call, and `claude -p` refuses them",
            gates.claude_trust_fix(root, home),
        )
    return Check(
        name,
        Status.warn,
        "no permission rule for ipykeep: Claude Code asks before every tool call, "
        "and `claude -p` refuses them",
        f"run `ipykeep init --provider claude_code` (allows the read-only tools in {local}; "
        "--allow-all allows every tool)",
    )


def _host_gate(label: str, root: Path, home: Path) -> list[Check]:
    """The host's own gates: Claude Code's trust and approval, Codex's and Gemini CLI's trust."""
    if label == "Claude Code (project)":
        trusted, trust = _claude_trust(root, home)
        approval = gates.claude_approval(root, home)
        name = "host Claude Code approval"
        if approval.state == "approved":
            gate = Check(name, Status.ok, f"ipykeep approved ({approval.source})")
        elif approval.state == "disabled":
            return [
                trust,
                Check(
                    name,
                    Status.fail,
                    f"ipykeep is disabled for this project ({approval.source})",
                    gates.claude_fix(root, approval),
                ),
            ]
        else:
            gate = Check(
                name,
                Status.warn,
                "not approved yet: Claude Code asks before starting project servers",
                gates.claude_fix(root, approval),
            )
        return [trust, gate, _claude_permissions(root, home, trusted=trusted)]
    if label == "Codex (project)":
        trust_level = gates.codex_trust(root, home)
        name = "host Codex trust"
        if trust_level == "trusted":
            config = gates.codex_home(home) / "config.toml"
            return [Check(name, Status.ok, f"project trusted ({config})")]
        detail = (
            "project marked untrusted" if trust_level == "untrusted" else "project not trusted yet"
        )
        return [
            Check(
                name,
                Status.warn,
                f"{detail}: Codex ignores .codex/config.toml until it is",
                gates.codex_fix(root, home, state=trust_level),
            )
        ]
    if label.startswith("Gemini CLI"):
        folder = gates.gemini_trust(root, home)
        name = "host Gemini CLI folder trust"
        if folder.state in ("trusted", "off"):
            return [Check(name, Status.ok, f"folder trusted ({folder.why})")]
        return [
            Check(
                name,
                Status.warn,
                f"folder not trusted ({folder.why}): Gemini CLI ignores .gemini/settings.json "
                "and starts no MCP server here, and a headless run refuses the folder",
                gates.gemini_trust_fix(root, home, rule=folder.rule),
            )
        ]
    return []


def run_doctor(root: Path, *, home: Path | None = None) -> DoctorReport:
    """Run every check for the project at ``root``; never raises for a failed check."""
    checks: list[Check] = [check_python()]
    try:
        ipykeep_version = metadata.version("ipykeep")
    except metadata.PackageNotFoundError:
        ipykeep_version = "not installed (running from source)"
    checks.append(Check("ipykeep", Status.ok, ipykeep_version))
    checks.extend(check_package(name, major) for name, major in REQUIRED)
    config_check, config = check_config(root)
    checks.append(config_check)
    if config is None:
        checks.append(
            Check("kernel python", Status.warn, "not checked (the configuration is invalid)")
        )
    elif config.kernel_provider == "local":
        environment, python = check_environment(config, root)
        checks.append(environment)
        if python is not None:
            checks.append(check_kernel_python(config, root, python_name=python))
    else:
        checks.append(check_kernel_python(config, root))
    checks.append(check_daemon(root))
    checks.extend(check_hosts(root, home))
    return DoctorReport(root, tuple(checks))


def render_table(report: DoctorReport) -> str:
    width = max(len(c.name) for c in report.checks)
    lines = [f"ipykeep doctor — project {report.root}", ""]
    for c in report.checks:
        lines.append(f"{c.status.value:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.status is not Status.ok:
            # A fix spanning lines (a TOML block to paste) keeps its lines as they are.
            first, *rest = c.fix.split("\n")
            lines.append(f"{'':<4}  {'':<{width}}  fix: {first}")
            lines.extend(rest)
    failed = sum(c.status is Status.fail for c in report.checks)
    warned = sum(c.status is Status.warn for c in report.checks)
    lines += [
        "",
        f"{failed} failed, {warned} warning(s)" if failed or warned else "all checks passed",
    ]
    return "\n".join(lines) + "\n"
