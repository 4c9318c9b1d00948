"""Start-up: process spawn to the ``initialize`` reply of ``ipykeep mcp-serve`` (stdio).

Hosts start their first request as soon as the server process exists (Claude Code) or expose
the tools only once the handshake is done (Codex), so this is the time an agent waits. The
baseline is the smallest server the same SDK makes: ``MCPServer`` with one tool, run over
stdio. Both are spawned alternately and driven with raw JSON-RPC lines (no client library
start-up on either side); the clock stops at the ``initialize`` response.

``mcp-serve`` answers the handshake from its cache of the SDK's own answers while the SDK is
still importing (``ipykeep/mcp_server/early.py``); the warm-up spawn fills that cache, as a
host's first start does. The same server with the early path off is measured beside it, and a
host's first start (an empty cache of its own) with and without what ``ipykeep init`` learnt.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.context import RunContext
from benchmarks.timing import Metric, Stats, Target, interleave
from ipykeep.mcp_server.early import HandshakeCache, install_key
from ipykeep.mcp_server.prefill import prefill

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

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def ipykeep_argv() -> list[str]:
    """The console script hosts run (next to this interpreter), else ``python -m ipykeep``."""
    script = Path(sys.executable).with_name("ipykeep")
    if script.is_file():
        return [str(script), "mcp-serve"]
    return [sys.executable, "-m", "ipykeep", "mcp-serve"]


async def initialize_seconds(argv: list[str], cwd: Path, **extra_env: str) -> float:
    """Seconds from spawning ``argv`` to reading its reply to ``initialize``."""
    env = {**os.environ, "IPYKEEP_IDLE_TIMEOUT": "0", **extra_env}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        await proc.stdin.drain()
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            if not line:
                raise RuntimeError(f"{argv[0]} closed stdout before answering initialize")
            msg = json.loads(line)
            if msg.get("id") == 1:
                elapsed = time.perf_counter() - t0
                if "result" not in msg:
                    raise RuntimeError(f"initialize failed: {msg}")
                return elapsed
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


def fresh_cache(ctx: RunContext) -> dict[str, str]:
    """The environment of a start with an empty handshake cache of its own."""
    return {"XDG_CACHE_HOME": str(ctx.workdir("cache"))}


async def run(ctx: RunContext) -> list[Metric]:
    work = ctx.workdir("startup")
    (work / "ipykeep.toml").write_text("")
    (work / ".git").mkdir(exist_ok=True)
    minimal = work / "minimal_server.py"
    minimal.write_text(MINIMAL_SERVER)
    ours = ipykeep_argv()
    base = [sys.executable, str(minimal)]

    async def via_ipykeep() -> None:
        samples["ipykeep"].append(await initialize_seconds(ours, work))

    async def via_ipykeep_no_early() -> None:
        samples["no_early"].append(
            await initialize_seconds(ours, work, IPYKEEP_MCP_EARLY_HANDSHAKE="0")
        )

    async def via_minimal() -> None:
        samples["minimal"].append(await initialize_seconds(base, work))

    async def first_start() -> None:  # a new user's cache: nothing learnt yet
        samples["first"].append(await initialize_seconds(ours, work, **fresh_cache(ctx)))

    async def first_start_after_init() -> None:  # what ``ipykeep init`` learnt, not timed
        env = fresh_cache(ctx)
        cache = Path(env["XDG_CACHE_HOME"]) / "ipykeep" / f"mcp-handshake-{install_key()}.json"
        await prefill(work, HandshakeCache(cache))
        samples["after_init"].append(await initialize_seconds(ours, work, **env))

    samples: dict[str, list[float]] = {
        "ipykeep": [],
        "no_early": [],
        "minimal": [],
        "first": [],
        "after_init": [],
    }
    sides = {
        "ipykeep": via_ipykeep,
        "no_early": via_ipykeep_no_early,
        "minimal": via_minimal,
        "first": first_start,
        "after_init": first_start_after_init,
    }
    if ctx.smoke:  # one spawn each of ipykeep and the minimal server
        for side in ("no_early", "first", "after_init"):
            del sides[side]
    warmup = 0 if ctx.smoke else 1
    await interleave(sides, ctx.reps(10, 2), warmup=warmup)
    # spawn-to-reply time is measured inside each call (the wrapper adds only the wait for exit)
    ms = {
        k: Stats.of([x * 1000 for x in v[warmup:]]) for k, v in samples.items() if v
    }  # first: warm-up
    first = Metric(
        NAME,
        "spawn → initialize reply (stdio)",
        "ms",
        ms["ipykeep"],
        "ipykeep mcp-serve",
        "minimal MCPServer, same SDK",
        ms["minimal"],
        Target("ratio", "<=", 1.3),
        extra={"command": " ".join(ours), "goal_ms": 300},
    )
    if ctx.smoke:
        return [first]
    return [
        Metric(
            NAME,
            "spawn → initialize reply (stdio)",
            "ms",
            ms["ipykeep"],
            "ipykeep mcp-serve",
            "minimal MCPServer, same SDK",
            ms["minimal"],
            Target("ratio", "<=", 1.3),
            extra={"command": " ".join(ours), "goal_ms": 300},
        ),
        Metric(
            NAME,
            "spawn → initialize reply, early answers off",
            "ms",
            ms["no_early"],
            "IPYKEEP_MCP_EARLY_HANDSHAKE=0",
            "minimal MCPServer, same SDK",
            ms["minimal"],
            Target("ratio", "<=", 1.3),
        ),
        Metric(
            NAME,
            "a host's first start: after `ipykeep init` vs an empty cache",
            "ms",
            ms["after_init"],
            "cache filled by init (another client's name and capabilities)",
            "empty handshake cache",
            ms["first"],
        ),
    ]
