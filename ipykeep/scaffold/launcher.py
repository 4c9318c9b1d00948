"""The command a host (Claude Code, Codex, Cursor) runs to start ipykeep's MCP server.

Hosts launch project MCP servers with the project directory as working directory, and config
files are shared (committed, synced between machines), so the launcher never holds a
machine-specific absolute path:

- ``path`` (default): the bare command ``ipykeep mcp-serve``, found on the host's ``PATH``
  (``pipx install``, ``uv tool install``, or an activated environment).
- ``venv``: ``.venv/bin/ipykeep mcp-serve``, relative to the project directory, for ipykeep
  installed in the project's own virtual environment.
- ``uvx``: ``uvx --from SOURCE ipykeep mcp-serve``. SOURCE must name this project's source (a
  ``git+https://…`` URL or a path relative to the project), because the name ``ipykeep`` on PyPI
  belongs to an unrelated package: a bare ``uvx ipykeep`` would run the wrong program. Without an
  explicit SOURCE, the URL ipykeep itself was installed from is used when it was installed from
  a version-control URL; otherwise SOURCE is required.
- ``command``: an explicit command line, split like a shell would (``shlex``).
"""

from __future__ import annotations

import enum
import json
import shlex
from dataclasses import dataclass
from importlib import metadata

from ipykeep.api.errors import UsageError

SERVE_ARGS: tuple[str, ...] = ("mcp-serve",)


class LauncherKind(str, enum.Enum):
    path = "path"
    venv = "venv"
    uvx = "uvx"
    command = "command"


@dataclass(frozen=True)
class Launcher:
    command: str
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        return [self.command, *self.args]


def installed_vcs_source() -> str | None:
    """``git+URL@commit`` when ipykeep was installed from a VCS URL (PEP 610), else None."""
    try:
        raw = metadata.distribution("ipykeep").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    vcs = info.get("vcs_info")
    url = info.get("url")
    if not isinstance(vcs, dict) or not isinstance(url, str):
        return None
    ref = vcs.get("requested_revision") or vcs.get("commit_id")
    source = f"{vcs.get('vcs', 'git')}+{url}"
    return f"{source}@{ref}" if ref else source


def resolve_launcher(
    kind: LauncherKind = LauncherKind.path,
    *,
    uvx_from: str | None = None,
    command: str | None = None,
) -> Launcher:
    """Build the launcher of ``kind``; see the module docstring for what each kind writes."""
    if kind is LauncherKind.path:
        return Launcher("ipykeep", SERVE_ARGS)
    if kind is LauncherKind.venv:
        return Launcher(".venv/bin/ipykeep", SERVE_ARGS)
    if kind is LauncherKind.uvx:
        source = uvx_from or installed_vcs_source()
        if not source:
            raise UsageError(
                "--launcher uvx needs --uvx-from SOURCE naming ipykeep's own source",
                hint="pass e.g. --uvx-from git+https://github.com/OWNER/ipykeep or a path relative "
                "to the project; a bare `uvx ipykeep` would run an unrelated PyPI package",
            )
        return Launcher("uvx", ("--from", source, "ipykeep", *SERVE_ARGS))
    if not command or not command.strip():
        raise UsageError(
            "--launcher command needs --command 'CMD ARG…'",
            hint="e.g. --command 'hatch run ipykeep mcp-serve'",
        )
    try:
        parts = shlex.split(command)
    except ValueError as exc:
        raise UsageError(
            f"--command {command!r} cannot be split: {exc}", hint="check its quoting"
        ) from exc
    return Launcher(parts[0], tuple(parts[1:]))
