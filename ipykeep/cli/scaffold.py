"""The ``init`` and ``doctor`` commands: thin typer wrappers over :mod:`.init` and :mod:`.doctor`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ipykeep.api.errors import IpykeepError
from ipykeep.cli.options import fail, pick_notebook
from ipykeep.project.layout import find_project_root
from ipykeep.scaffold.doctor import render_table, run_doctor
from ipykeep.scaffold.files import ChangeStatus
from ipykeep.scaffold.init import (
    InitOptions,
    InitPlan,
    Provider,
    Scope,
    expand_providers,
    resolve_notebook,
    run_init,
)
from ipykeep.scaffold.launcher import LauncherKind, resolve_launcher

_VERBS = {
    ChangeStatus.create: ("created", "would create"),
    ChangeStatus.update: ("updated", "would update"),
    ChangeStatus.unchanged: ("unchanged", "unchanged"),
    ChangeStatus.conflict: ("conflict", "conflict"),
}


def render_plan(plan: InitPlan, *, dry_run: bool) -> str:
    """One line per file: what happened (or would happen) and why."""
    lines = []
    width = max((len(plan.display(c.path)) for c in plan.changes), default=0)
    for c in plan.changes:
        verb = _VERBS[c.status][1 if dry_run else 0]
        note = f" — {c.note}" if c.note else ""
        lines.append(f"{verb:<12} {plan.display(c.path):<{width}}  {c.label}{note}")
    if not plan.writes:
        lines.append("no changes")
    elif dry_run:
        lines.append("dry run: nothing written")
    if plan.conflicts:
        count = len(plan.conflicts)
        lines.append(
            f"{count} existing ipykeep entr{'y' if count == 1 else 'ies'} left alone; --replace overwrites"
        )
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines) + "\n"


_NOTEBOOK_HELP = "Notebook to bind by default (written to ipykeep.toml)."
_PROVIDER_HELP = "Host to configure; repeat for several. Default: all."
_SCOPE_HELP = "project: files in this project; user: the hosts' user-level files."
_LAUNCHER_HELP = (
    "How hosts start the server: path (`ipykeep` on PATH), venv (.venv/bin/ipykeep), "
    "uvx (uvx --from SOURCE ipykeep), command (--command)."
)


def init_command(
    notebook: Annotated[
        Path | None, typer.Argument(help=_NOTEBOOK_HELP, show_default=False)
    ] = None,
    notebook_opt: Annotated[
        Path | None, typer.Option("--notebook", "-n", metavar="NOTEBOOK", help=_NOTEBOOK_HELP)
    ] = None,
    provider: Annotated[
        list[Provider] | None, typer.Option("--provider", "-p", help=_PROVIDER_HELP)
    ] = None,
    scope: Annotated[Scope, typer.Option(help=_SCOPE_HELP)] = Scope.project,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite an existing, different ipykeep entry.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print a diff of every change; write nothing.")
    ] = False,
    launcher: Annotated[LauncherKind, typer.Option(help=_LAUNCHER_HELP)] = LauncherKind.path,
    uvx_from: Annotated[
        str | None, typer.Option("--uvx-from", help="ipykeep's source for --launcher uvx.")
    ] = None,
    command: Annotated[
        str | None, typer.Option("--command", help="Command line for --launcher command.")
    ] = None,
) -> None:
    """Register ipykeep with Claude Code, Codex and Cursor, and set up this project."""
    try:
        notebook = pick_notebook(notebook, notebook_opt)
        cwd = Path.cwd()
        root = find_project_root(cwd)
        options = InitOptions(
            root=root,
            notebook=resolve_notebook(root, notebook, cwd) if notebook is not None else None,
            providers=expand_providers(provider),
            scope=scope,
            replace=replace,
            launcher=resolve_launcher(launcher, uvx_from=uvx_from, command=command),
        )
        plan = run_init(options, dry_run=dry_run)
    except IpykeepError as exc:
        raise fail(exc) from None
    if dry_run:
        typer.echo(plan.diff(), nl=False)
    typer.echo(render_plan(plan, dry_run=dry_run), nl=False)
    if plan.conflicts:
        raise typer.Exit(1)


def doctor_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check the installation, the configuration, the kernel's Python, the daemon and host configs."""
    report = run_doctor(find_project_root(Path.cwd()))
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(render_table(report), nl=False)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    """Add ``init`` and ``doctor`` to ``app``."""
    app.command("init")(init_command)
    app.command("doctor")(doctor_command)
