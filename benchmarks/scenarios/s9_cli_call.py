"""CLI call: ``ipykeep exec "1+1"``, ``status`` and ``run-stale`` against a bare interpreter.

Agents that drive ipykeep from a shell pay the CLI's start-up on every call. Each side is a
fresh process started the same way (``subprocess.run``), interleaved: ``python -c pass`` with
the same interpreter, then each command against a running daemon with a warm kernel on a small
notebook. The client's own work is what differs: a daemon round trip and its rendering.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio

from benchmarks.context import RunContext
from benchmarks.notebooks import write_notebook
from benchmarks.sessions import bench_env, daemon, make_project
from benchmarks.timing import Metric, Stats, Target, timed

NAME = "cli_call"
TITLE = "9. CLI call vs bare interpreter"

COMMANDS = {
    'exec "1+1"': ["exec", "1+1"],
    "status": ["status"],
    "run-stale (plan)": ["run-stale"],
}


def _run(argv: list[str], cwd: Path) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=bench_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")


async def run(ctx: RunContext) -> list[Metric]:
    root = make_project(ctx.workdir(NAME))
    nb = write_notebook(root / "nb.ipynb", [("a", "x = 1"), ("b", "y = x + 1"), ("c", "print(y)")])
    cli = str(Path(sys.executable).parent / "ipykeep")
    samples: dict[str, list[float]] = {"bare": [], **{k: [] for k in COMMANDS}}
    with daemon(root) as client:
        rec = await client.acall(
            "create_kernel", notebook=str(nb), warm=True, wait=True, dataflow="static"
        )
        if rec.get("warm", {}).get("failed"):
            raise RuntimeError(f"warm-up failed: {rec['warm']}")
        first = 0 if ctx.smoke else 1  # the smoke test skips the page-cache round
        for round_ in range(ctx.reps(15, 3) + first):
            for side in samples:
                argv = [sys.executable, "-c", "pass"] if side == "bare" else [cli, *COMMANDS[side]]
                seconds, _ = await timed(lambda: anyio.to_thread.run_sync(_run, argv, root))
                if round_ >= first:  # the first round fills the page cache for both sides
                    samples[side].append(seconds)
    base = Stats.of(samples["bare"])
    return [
        Metric(
            NAME,
            f"ipykeep {label}",
            "s",
            Stats.of(samples[label]),
            f"ipykeep {label}",
            "python -c pass",
            base,
            Target("ratio", "<=", 3),
        )
        for label in COMMANDS
    ]
