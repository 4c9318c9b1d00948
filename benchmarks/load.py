"""Concurrent MCP clients hammering kernels with scratch calls: correctness and latency.

``python -m benchmarks.load [--clients 10] [--calls 50] [--kernels 1 5] [--dataflow static]``
starts a temporary project, one stdio ``ipykeep mcp-serve`` per client (the official ``mcp``
client, as an agent host runs it), and makes every client send ``calls`` ``ipython`` calls
one after another, all clients at once, spread over ``kernels`` kernels. Each call prints its
own tag; a call still running after ``yield_time_ms`` is followed with ``read_cell`` until it
ends. Prints p50/p95 latency per configuration and whether every call got exactly its own
output. ``tests/reliability/test_load.py`` runs the same driver at a smaller size and asserts
only the correctness, never the times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters


@dataclass(frozen=True)
class CallOutcome:
    client: int
    call: int
    kernel_id: str
    seconds: float
    state: str
    text: str
    error: str | None = None

    @property
    def tag(self) -> str:
        return f"tag-{self.client}-{self.call}"

    @property
    def correct(self) -> bool:
        return (
            self.error is None
            and self.state == "ok"
            and self.text.count("tag-") == 1
            and self.tag in self.text
        )


def server_params(root: Path, dataflow: str) -> StdioServerParameters:
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", str(root)),
        "XDG_CONFIG_HOME": str(root / ".xdg"),
        "IPYKEEP_IDLE_TIMEOUT": "0",
        "IPYKEEP_DATAFLOW": dataflow,
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "ipykeep", "mcp-serve"], cwd=str(root), env=env
    )


def _text(result: Any) -> str:
    return "\n".join(
        getattr(b, "text", "") for b in result.content if getattr(b, "type", "") == "text"
    )


async def _one_call(client: Client, kernel_id: str, c: int, i: int) -> CallOutcome:
    tag = f"tag-{c}-{i}"
    began = time.perf_counter()
    res = await client.call_tool(
        "ipython", {"kernel_id": kernel_id, "code": f"print({tag!r})", "yield_time_ms": 30000}
    )
    texts = [_text(res)]
    summary = res.structured_content or {}
    while not res.is_error and summary.get("state") in ("queued", "running"):
        res = await client.call_tool(
            "read_cell",
            {"kernel_id": kernel_id, "handle": summary["handle"], "yield_time_ms": 30000},
        )
        texts.append(_text(res))
        summary = res.structured_content or {}
    seconds = time.perf_counter() - began
    if res.is_error:
        return CallOutcome(
            c, i, kernel_id, seconds, "error", "\n".join(texts), error=str(summary.get("code"))
        )
    return CallOutcome(c, i, kernel_id, seconds, str(summary.get("state")), "\n".join(texts))


async def run_load(
    root: Path, *, clients: int, calls: int, kernels: int, dataflow: str = "static"
) -> list[CallOutcome]:
    """Drive ``clients`` concurrent MCP clients over ``kernels`` fresh kernels of ``root``."""
    params = server_params(root, dataflow)
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(Client(params, mode="legacy")) for _ in range(clients)
        ]  # type: ignore[arg-type]
        kernel_ids = []
        for k in range(kernels):
            res = await sessions[k % clients].call_tool("create_kernel", {})
            if res.is_error:
                raise RuntimeError(_text(res))
            kernel_ids.append(res.structured_content["kernel_id"])

        async def client_loop(c: int) -> list[CallOutcome]:
            kid = kernel_ids[c % kernels]
            return [await _one_call(sessions[c], kid, c, i) for i in range(calls)]

        per_client = await asyncio.gather(*(client_loop(c) for c in range(clients)))
        for kid in kernel_ids:
            await sessions[0].call_tool("close_kernel", {"kernel_id": kid})
    return [o for outcomes in per_client for o in outcomes]


def percentile(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
        if len(values) > 1
        else values[0]
    )


def report(outcomes: list[CallOutcome]) -> dict[str, Any]:
    secs = [o.seconds for o in outcomes]
    return {
        "calls": len(outcomes),
        "correct": sum(o.correct for o in outcomes),
        "p50_s": round(percentile(secs, 50), 4),
        "p95_s": round(percentile(secs, 95), 4),
        "max_s": round(max(secs), 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.load")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--kernels", type=int, nargs="+", default=[1, 5])
    p.add_argument("--dataflow", choices=["static", "ipyflow"], default="static")
    args = p.parse_args(argv)
    from ipykeep.client.connection import DaemonClient, find_daemon

    results = {}
    for n in args.kernels:
        root = Path(tempfile.mkdtemp(prefix="ipykeep-load-"))
        (root / ".git").mkdir()
        try:
            outcomes = asyncio.run(
                run_load(
                    root, clients=args.clients, calls=args.calls, kernels=n, dataflow=args.dataflow
                )
            )
        finally:
            desc = find_daemon(root)
            if desc is not None:
                try:
                    DaemonClient(desc).call("shutdown")
                except Exception:
                    pass
        results[
            f"{args.clients} clients x {args.calls} calls on {n} kernel(s), {args.dataflow}"
        ] = report(outcomes)
    print(json.dumps(results, indent=2))
    return 0 if all(r["correct"] == r["calls"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
