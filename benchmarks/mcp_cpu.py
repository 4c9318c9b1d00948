"""CPU per MCP call: ``mcp-serve`` and its daemon, for this build and others, side by side.

``python -m benchmarks.mcp_cpu [--calls 300] [--rounds 3] [--side NAME=CHECKOUT[,VAR=VALUE...]]``
starts one stdio ``ipykeep mcp-serve`` per side (the official client, a scratch kernel in a
project of its own), then makes ``calls`` ``ipython("1+1")`` calls on each side in turn, for
``rounds`` rounds, and reads the CPU time (user + system, ``/proc``) that the side's
``mcp-serve`` and daemon spent meanwhile. CPU time is what a call costs the machine whatever
else runs on it, so it compares builds on a busy machine where wall times drown in the noise.
``this`` is always a side: the checkout this module belongs to. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

from benchmarks.sessions import Mcp, make_project, mcp_server
from ipykeep.client.connection import find_daemon

HERE = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def serve_pid(root: Path) -> int:
    """The ``mcp-serve`` process serving ``root`` (its working directory)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if b"mcp-serve" in cmdline and Path(os.readlink(entry / "cwd")) == root:
                return int(entry.name)
        except OSError:
            continue
    raise RuntimeError(f"no mcp-serve runs in {root}")


def parse_side(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition("=")
    checkout, *assignments = rest.split(",")
    env = {"PYTHONPATH": str(Path(checkout).resolve())}
    env.update(dict(a.split("=", 1) for a in assignments))
    return name, env


async def main(calls: int, rounds: int, sides: dict[str, dict[str, str]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ipykeep-mcp-cpu-"))
    async with AsyncExitStack() as stack:
        served: dict[str, tuple[Mcp, str, list[int]]] = {}
        for name, env in sides.items():
            root = make_project(tmp / name).resolve()
            mcp = await stack.enter_async_context(mcp_server(root, dataflow="static", env=env))
            kid = (await mcp.call("create_kernel", {})).data["kernel_id"]
            for _ in range(20):  # warm-up (a hand-over, where a build makes one, happens here)
                await mcp.call("ipython", {"kernel_id": kid, "code": "1+1"})
            daemon = find_daemon(root)
            assert daemon is not None
            served[name] = (mcp, kid, [serve_pid(root), daemon.pid])
        per_call: dict[str, list[float]] = {name: [] for name in sides}
        wall: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, (mcp, kid, pids) in served.items():
                before = sum(cpu_seconds(p) for p in pids)
                t0 = time.perf_counter()
                for _ in range(calls):
                    await mcp.call("ipython", {"kernel_id": kid, "code": "1+1"})
                wall[name].append((time.perf_counter() - t0) / calls * 1000)
                per_call[name].append((sum(cpu_seconds(p) for p in pids) - before) / calls * 1000)
    print(f"{calls} ipython('1+1') calls a round, {rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print("| side | CPU ms per call, mcp-serve + daemon (per round) | wall ms per call |")
    print("|---|---|---|")
    for name in sides:
        cpu = " / ".join(f"{x:.2f}" for x in per_call[name])
        print(
            f"| {name} | {cpu} (median {statistics.median(per_call[name]):.2f}) | "
            f"{statistics.median(wall[name]):.2f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_cpu")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", action="append", default=[], metavar="NAME=CHECKOUT[,VAR=VALUE]")
    args = parser.parse_args()
    chosen = {"this": {"PYTHONPATH": str(HERE)}, **dict(parse_side(s) for s in args.side)}
    sys.exit(asyncio.run(main(args.calls, args.rounds, chosen)))
