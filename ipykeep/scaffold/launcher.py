"""The command a host (Claude Code, Codex, Cursor, Gemini CLI, opencode, VS Code) runs to start
ipykeep's MCP server.

A host resolves a bare command on its own ``PATH``: the user's login PATH for a terminal host,
the desktop session's for an IDE, never an activated virtual environment's. So:

- ``auto`` (default): the bare ``ipykeep mcp-serve`` when the ``ipykeep`` on ``PATH`` is the one
  running and was not put there by an activated virtual environment (``pipx install``, ``uv
  tool install``, a system install); otherwise the absolute path of the running ``ipykeep``
  script (the README's unactivated ``.venv``, or an activated one an IDE would not see); and
  ``uvx --from SOURCE`` when the running ipykeep lives in uv's throw-away cache. The choice and
  its reason are printed by ``init``.
- ``path``: always the bare command ``ipykeep mcp-serve``, found on the host's ``PATH``.
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
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ipykeep.api.errors import UsageError

SERVE_ARGS: tuple[str, ...] = ("mcp-serve",)


class LauncherKind(str, enum.Enum):
    auto = "auto"
    path = "path"
    venv = "venv"
    uvx = "uvx"
    command = "command"


@dataclass(frozen=True)
class Launcher:
    command: str
    args: tuple[str, ...]
    #: Why this command was chosen (``auto``), for init's output; not part of the command.
    why: str = field(default="", compare=False)

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


def running_script() -> Path | None:
    """The ``ipykeep`` console script of the running installation (next to its Python)."""
    # Not resolved: a venv's python is a symlink to the base interpreter, the script is not.
    bindir = Path(sys.executable).absolute().parent
    for name in ("ipykeep", "ipykeep.exe"):
        script = bindir / name
        if script.is_file() and os.access(script, os.X_OK):
            return script
    return None


def _in_uv_cache(prefix: Path) -> bool:
    """Whether the environment at ``prefix`` is one of uv's cached, throw-away ones (``uvx``)."""
    parts = prefix.parts
    return "uv" in parts and any(part.startswith("archive-v") for part in parts)


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def auto_launcher(path_env: str | None = None) -> Launcher:
    """The launcher a host can run from anywhere; see the module docstring (``auto``)."""
    script = running_script()
    prefix = Path(sys.prefix)
    if script is None:
        # Run as `python -m ipykeep` (or from a source tree): this interpreter runs it again.
        python = str(Path(sys.executable).absolute())
        return Launcher(
            python,
            ("-m", "ipykeep", *SERVE_ARGS),
            why="no ipykeep script next to the running Python; the host runs it as a module",
        )
    source = installed_vcs_source()
    if _in_uv_cache(prefix) and source:
        return Launcher(
            "uvx",
            ("--from", source, "ipykeep", *SERVE_ARGS),
            why="this ipykeep runs from uv's cache, which uv may clear; uvx rebuilds it",
        )
    found = shutil.which("ipykeep", path=path_env)
    in_venv = sys.prefix != sys.base_prefix
    if found and _same_file(found, script):
        if in_venv and Path(found).absolute().parent == script.parent:
            why = (
                "`ipykeep` is on PATH only through the activated virtual environment "
                f"({prefix}); a host started from a desktop or an IDE would not find it"
            )
        else:
            return Launcher(
                "ipykeep", SERVE_ARGS, why=f"`ipykeep` on PATH is this installation ({found})"
            )
    elif found:
        why = f"`ipykeep` on PATH is another installation ({found}), not this one ({script})"
    else:
        why = "`ipykeep` is not on PATH, so a host could not start a bare `ipykeep`"
    return Launcher(str(script), SERVE_ARGS, why=why + "; written as this ipykeep's absolute path")


def resolve_launcher(
    kind: LauncherKind = LauncherKind.auto,
    *,
    uvx_from: str | None = None,
    command: str | None = None,
) -> Launcher:
    """Build the launcher of ``kind``; see the module docstring for what each kind writes."""
    if kind is LauncherKind.auto:
        return auto_launcher()
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
