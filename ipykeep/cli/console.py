"""``ipykeep console``: print the kernel's recent history, then attach a terminal console to it."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from ipykeep.api.errors import MissingExtraError
from ipykeep.api.serve import CONSOLE, ConsoleInfo, ConsoleParams
from ipykeep.cli.output import echo, kernel_target
from ipykeep.client.connection import connect

CONSOLE_HINT = "pip install 'ipykeep[console]'"


def render_history(info: ConsoleInfo) -> str:
    """The kernel's latest executions as a person reads them: code, then indented output."""
    where = f" ({Path(info.notebook).name})" if info.notebook else " (scratch kernel)"
    lines = [f"ipykeep console on {info.kernel_id}{where}: the agent's kernel, not a copy"]
    if info.history:
        lines.append(f"last {len(info.history)} execution(s):")
    for entry in info.history:
        what = f"cell {entry.cell_id}" if entry.cell_id else entry.kind
        lines.append(f"── {entry.handle} {what}: {entry.state}")
        lines.extend(f"   {line}" for line in entry.code.rstrip("\n").splitlines())
        lines.extend(f"   → {line}" for line in entry.output.rstrip("\n").splitlines())
    lines.append("exit, quit or Ctrl-D detaches; the kernel keeps running.")
    return "\n".join(lines)


def console(notebook: str | None, history: int) -> int:
    if importlib.util.find_spec("jupyter_console") is None:
        raise MissingExtraError(
            "ipykeep console needs jupyter_console, which is not installed",
            hint=f"install the console extra: {CONSOLE_HINT}",
        )
    client = connect(Path.cwd())
    info = client.invoke(CONSOLE, ConsoleParams(history=history, **kernel_target(notebook)))
    echo(render_history(info))
    sys.stdout.flush()
    shell = [sys.executable, "-m", "ipykeep.cli.console_shell", info.connection_file]
    # The terminal goes to the console itself: this process is replaced, not kept as a parent.
    os.execv(sys.executable, [*shell, client.descriptor.project, info.kernel_id])
