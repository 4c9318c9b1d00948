"""The ``init`` and ``doctor`` commands: thin wrappers over ``scaffold.init`` and ``.doctor``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ipykeep.cli.output import echo
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
        entries = "entry" if count == 1 else "entries"
        lines.append(f"{count} existing ipykeep {entries} left alone; --replace overwrites")
    launcher = plan.options.launcher
    if launcher.why and any(c.label.endswith("MCP servers") for c in plan.changes):
        lines.append(f"launcher: {shlex.join(launcher.argv())} ({launcher.why})")
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines) + "\n"


def init(
    notebook: Path | None,
    provider: list[Provider] | None,
    scope: Scope,
    replace: bool,
    dry_run: bool,
    launcher: LauncherKind,
    uvx_from: str | None,
    command: str | None,
    allow_all: bool,
) -> int:
    cwd = Path.cwd()
    root = find_project_root(cwd)
    options = InitOptions(
        root=root,
        notebook=resolve_notebook(root, notebook, cwd) if notebook is not None else None,
        providers=expand_providers(provider),
        scope=scope,
        replace=replace,
        launcher=resolve_launcher(launcher, uvx_from=uvx_from, command=command),
        allow_all=allow_all,
    )
    plan = run_init(options, dry_run=dry_run)
    if dry_run:
        echo(plan.diff(), nl=False)
    echo(render_plan(plan, dry_run=dry_run), nl=False)
    return 1 if plan.conflicts else 0


def doctor(as_json: bool) -> int:
    report = run_doctor(find_project_root(Path.cwd()))
    if as_json:
        echo(json.dumps(report.as_dict(), indent=2))
    else:
        echo(render_table(report), nl=False)
    return report.exit_code
