"""A bounded soak: MCP clients and CLI calls with large prints, daemon and kernel RSS over time.

``python -m benchmarks.soak [--seconds 180] [--clients 3] [--print-mb 3] [--every 10]`` starts a
temporary project with a notebook kernel, then for ``seconds``: ``clients`` official MCP
clients (stdio ``ipykeep mcp-serve``) each send ``ipython`` calls one after another, every
third one printing ``print-mb`` MB, the others a tag; beside them a CLI loop runs ``ipykeep
exec`` (a large print every other time) and ``ipykeep status``. Every ``every`` seconds the
daemon's and the kernel's RSS are sampled. Prints JSON: the samples, the calls made and whether
each got its own output, and per process the RSS at start, the highest RSS in each third of
the run (a plateau: the last third's peak is not above the middle third's by more than the
``--plateau-mb`` margin), the highest overall, and the growth from the end of the first third
to the end per call made in between (with ``--seconds 1800``: the growth over the last 20
minutes), and the calls made per second.

``--loop agent`` runs an agent's loop instead, on one MCP client: ``edit_cell`` (a new source
for one cell, with the version it last got), ``run_stale(execute=True)``, ``inspect`` of the
edited cell's value and ``ipython`` (a matplotlib plot every other time, else a print).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import nbformat
import psutil
from mcp import Client

from benchmarks.load import _text, server_params

MB = 2**20


def _cli_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_CONFIG_HOME": str(root / ".xdg"),
        "IPYKEEP_IDLE_TIMEOUT": "0",
        "IPYKEEP_DATAFLOW": "static",
    }


async def _cli(root: Path, *args: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ipykeep",
        *args,
        cwd=root,
        env=_cli_env(root),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await proc.wait()


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


async def soak(
    root: Path, seconds: float, clients: int, print_mb: int, every: float, loop: str = "prints"
) -> dict:
    from ipykeep.client.connection import DaemonClient, find_daemon

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("data = list(range(1000))", id="c0"),
        nbformat.v4.new_code_cell("y = data[:1]", id="c1"),
        nbformat.v4.new_code_cell("total = sum(y)", id="c2"),
    ]
    nbformat.write(nb, root / "nb.ipynb")
    if await _cli(root, "start", "nb.ipynb") != 0:
        raise RuntimeError("ipykeep start failed")
    desc = find_daemon(root)
    assert desc is not None
    daemon = DaemonClient(desc)
    (kernel,) = daemon.call("list_kernels")
    kid, kernel_pid = kernel["kernel_id"], int(kernel["pid"])
    deadline = time.monotonic() + seconds
    counts = {"mcp": 0, "mcp_correct": 0, "cli": 0, "cli_ok": 0}
    plot = "import matplotlib.pyplot as plt\nplt.plot(range(10)); plt.show()"

    async def agent_loop(client: Client) -> None:
        i, version = 0, None
        while time.monotonic() < deadline:
            edit = {"kernel_id": kid, "action": "replace", "cell": "c1"}
            edit["source"] = f"y = data[:{i % 50 + 1}]"
            if version is not None:
                edit["version"] = version
            res = await client.call_tool("edit_cell", edit)
            if res.is_error:  # the first edit: take the version the refusal gives
                edit["version"] = json.loads(_text(res))["details"]["version"]
                res = await client.call_tool("edit_cell", edit)
            version = (res.structured_content or {}).get("version")
            calls = [
                ("run_stale", {"kernel_id": kid, "execute": True}),
                ("inspect", {"kernel_id": kid, "name": "y"}),
                ("ipython", {"kernel_id": kid, "code": plot if i % 2 else f"print({i})"}),
            ]
            results = [res] + [await client.call_tool(name, args) for name, args in calls]
            counts["mcp"] += len(results)
            counts["mcp_correct"] += sum(not r.is_error for r in results)
            i += 1

    big = f"print('x' * {print_mb * 1_000_000})"

    async def mcp_loop(client: Client, c: int) -> None:
        i = 0
        while time.monotonic() < deadline:
            tag = f"tag-{c}-{i}"
            # the tag first: past ``output_cap_bytes`` the rest of a large print is not recorded
            code = f"print({tag!r}); {big}" if i % 3 == 0 else f"print({tag!r})"
            res = await client.call_tool(
                "ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 30000}
            )
            counts["mcp"] += 1
            counts["mcp_correct"] += int(not res.is_error and tag in _text(res))
            i += 1

    async def cli_loop() -> None:
        i = 0
        while time.monotonic() < deadline:
            args = ("exec", big) if i % 2 == 0 else ("status",)
            counts["cli"] += 1
            counts["cli_ok"] += int(await _cli(root, *args) == 0)
            i += 1

    samples: list[dict[str, float]] = []
    started = time.monotonic()

    def sample() -> dict[str, float]:
        return {
            "t": round(time.monotonic() - started, 1),
            "calls": counts["mcp"] + counts["cli"],
            "daemon_mb": round(_rss(desc.pid) / MB, 2),
            "kernel_mb": round(_rss(kernel_pid) / MB, 2),
        }

    async def sampler() -> None:
        while time.monotonic() < deadline:
            samples.append(sample())
            await asyncio.sleep(every)

    params = server_params(root, "static")
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(Client(params, mode="legacy"))  # type: ignore[arg-type]
            for _ in range(clients)
        ]
        if loop == "agent":
            await asyncio.gather(sampler(), agent_loop(sessions[0]))
        else:
            await asyncio.gather(
                sampler(), cli_loop(), *(mcp_loop(s, c) for c, s in enumerate(sessions))
            )
    samples.append(sample())
    return {"calls": counts, "samples": samples}


def summary(samples: list[dict[str, float]], key: str, margin_mb: float) -> dict[str, Any]:
    values = [s[key] for s in samples]
    third = max(1, len(values) // 3)
    peaks = [max(values[:third]), max(values[third : 2 * third]), max(values[2 * third :])]
    first = samples[third - 1]
    calls = samples[-1]["calls"] - first["calls"]
    grown = samples[-1][key] - first[key]
    return {
        "start_mb": values[0],
        "end_mb": values[-1],
        "peak_mb": max(values),
        "peak_per_third_mb": peaks,
        "plateau": peaks[2] <= peaks[1] + margin_mb,
        "after_first_third_mb": round(grown, 2),
        "after_first_third_kb_per_call": round(grown * 1024 / calls, 2) if calls else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--print-mb", type=int, default=3)
    p.add_argument("--every", type=float, default=10)
    p.add_argument("--plateau-mb", type=float, default=30)
    p.add_argument("--loop", choices=("prints", "agent"), default="prints")
    args = p.parse_args(argv)
    from ipykeep.client.connection import DaemonClient, find_daemon

    root = Path(tempfile.mkdtemp(prefix="ipykeep-soak-"))
    (root / ".git").mkdir()
    try:
        result = asyncio.run(
            soak(root, args.seconds, args.clients, args.print_mb, args.every, args.loop)
        )
    finally:
        desc = find_daemon(root)
        if desc is not None:
            try:
                DaemonClient(desc).call("shutdown")
            except Exception:
                pass
    for key in ("daemon_mb", "kernel_mb"):
        result[key.replace("_mb", "")] = summary(result["samples"], key, args.plateau_mb)
    last = result["samples"][-1]
    result["calls_per_s"] = round(last["calls"] / last["t"], 1) if last["t"] else None
    print(json.dumps(result, indent=2))
    calls = result["calls"]
    correct = calls["mcp"] == calls["mcp_correct"] and calls["cli"] == calls["cli_ok"]
    return 0 if correct and result["daemon"]["plateau"] and result["kernel"]["plateau"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
