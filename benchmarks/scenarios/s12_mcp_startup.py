"""Start-up: process spawn to the first answer of ``ipykeep mcp-serve`` (stdio), in both eras.

Hosts time the opening from the moment they spawn the server: a 2025-11-25 host waits for the
``initialize`` answer, a 2026-07-28 host for the ``server/discover`` answer, and Claude Code
gives its probe ``PROBE_WAIT_S`` before it falls back to the handshake. Each era is measured on
an idle machine and with two busy loops on the CPU (``python -c 'while True: pass'``), driven
with raw JSON-RPC lines (``benchmarks/stdio_host.py``: no client library on either side of the
clock); the clock stops at the answer.

The baseline is the smallest server the same SDK makes: ``MCPServer`` with one tool, over
stdio, spawned alternately with ipykeep. With ``IPYKEEP_BENCH_BEFORE=<checkout>`` the same
spawns of another checkout's ``mcp-serve`` are interleaved too (its sources first on
``PYTHONPATH``): the way to set one build beside another.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchmarks.context import RunContext, before_checkout
from benchmarks.stdio_host import (
    HANDSHAKE_ERA,
    MODERN_ERA,
    busy_cpu,
    first_answer_seconds,
    server_env,
)
from benchmarks.timing import Metric, Stats, Target, interleave

NAME = "mcp_startup"
TITLE = "12. MCP start-up"

MINIMAL_SERVER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("minimal")


@app.tool()
def add(a: int, b: int) -> int:
    return a + b


app.run("stdio")
"""

ERAS = {HANDSHAKE_ERA: "initialize", MODERN_ERA: "server/discover"}


def ipykeep_argv() -> list[str]:
    """The console script hosts run (next to this interpreter), else ``python -m ipykeep``."""
    script = Path(sys.executable).with_name("ipykeep")
    if script.is_file():
        return [str(script), "mcp-serve"]
    return [sys.executable, "-m", "ipykeep", "mcp-serve"]


async def run(ctx: RunContext) -> list[Metric]:
    work = ctx.workdir("startup")
    (work / "ipykeep.toml").write_text("")
    (work / ".git").mkdir(exist_ok=True)
    minimal = work / "minimal_server.py"
    minimal.write_text(MINIMAL_SERVER)
    before = before_checkout()
    # Beside another checkout both run as ``python -m ipykeep``, each with its own sources first.
    here = str(Path(__file__).resolve().parents[2])
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "ipykeep": (ipykeep_argv(), server_env())
        if before is None
        else ([sys.executable, "-m", "ipykeep", "mcp-serve"], server_env(PYTHONPATH=here)),
        "minimal": ([sys.executable, str(minimal)], server_env()),
    }
    if before is not None:
        commands["before"] = (
            [sys.executable, "-m", "ipykeep", "mcp-serve"],
            server_env(PYTHONPATH=str(before)),
        )
    loads = (0,) if ctx.smoke else (0, 2)
    eras = (HANDSHAKE_ERA,) if ctx.smoke else (HANDSHAKE_ERA, MODERN_ERA)
    warmup = 0 if ctx.smoke else 1
    metrics = []
    for era in eras:
        for loops in loads:
            samples: dict[str, list[float]] = {side: [] for side in commands}

            def spawn(side: str, era: str = era) -> Callable[[], Awaitable[None]]:
                argv, env = commands[side]

                async def once() -> None:
                    seconds = await first_answer_seconds(argv, work, env, era)
                    samples[side].append(seconds * 1000)

                return once

            with busy_cpu(loops):
                await interleave(
                    {side: spawn(side) for side in commands}, ctx.reps(10, 2), warmup=warmup
                )
            ms = {side: Stats.of(v[warmup:]) for side, v in samples.items()}
            where = "idle" if loops == 0 else f"{loops} busy loops on the CPU"
            label = f"spawn → {ERAS[era]} answer ({era}, stdio, {where})"
            metrics.append(
                Metric(
                    NAME,
                    label,
                    "ms",
                    ms["ipykeep"],
                    "ipykeep mcp-serve",
                    "minimal MCPServer, same SDK",
                    ms["minimal"],
                    Target("ratio", "<=", 1.3),
                    extra={"command": " ".join(commands["ipykeep"][0]), "busy_loops": loops},
                )
            )
            if "before" in ms:
                metrics.append(
                    Metric(
                        NAME,
                        label,
                        "ms",
                        ms["ipykeep"],
                        "ipykeep mcp-serve",
                        f"mcp-serve of {before}",
                        ms["before"],
                        extra={"busy_loops": loops},
                    )
                )
    return metrics
