"""The ipykeep side of each scenario: temp projects, MCP over stdio, the daemon, the engine.

Every context manager here cleans up whatever happens inside it: MCP servers are closed by
their client, daemons are stopped with the ``shutdown`` RPC (then killed if they linger), and
in-process engines close their kernels.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ipykeep.client.connection import DaemonClient, ensure_daemon, find_daemon, pid_alive
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths


def bench_env() -> dict[str, str]:
    """Environment for daemons and servers started here: no idle expiry, no user config."""
    env = dict(os.environ)
    env["IPYKEEP_IDLE_TIMEOUT"] = "0"
    env.pop("IPYKEEP_DATAFLOW", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def make_project(root: Path) -> Path:
    """An empty ipykeep project at ``root`` (its own root: ``.git`` and ``ipykeep.toml``)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)
    (root / "ipykeep.toml").touch()
    return root


def stop_daemon(root: Path, timeout: float = 20.0) -> None:
    """Stop the project's daemon (and its kernels) with the ``shutdown`` RPC; kill if it lingers."""
    desc = find_daemon(root)
    if desc is None:
        return
    with contextlib.suppress(Exception):
        DaemonClient(desc).call("shutdown")
    deadline = time.monotonic() + timeout
    while pid_alive(desc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(desc.pid):
        with contextlib.suppress(OSError):
            os.kill(desc.pid, signal.SIGKILL)


@contextlib.contextmanager
def daemon(root: Path) -> Iterator[DaemonClient]:
    """The project's daemon over JSON-RPC, started here and stopped on exit."""
    os.environ["IPYKEEP_IDLE_TIMEOUT"] = "0"  # ensure_daemon passes our environment on
    try:
        yield ensure_daemon(root)
    finally:
        stop_daemon(root)


def wire_bytes(result: Any) -> int:
    """Bytes of an MCP result as the client received it (its JSON form)."""
    return len(
        json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)).encode()
    )


def model_bytes(result: Any) -> int:
    """Bytes a model reads of a result: the channel hosts forward (structuredContent when
    present, as Claude Code and Codex do, else the text); images not counted (capped apart)."""
    if result.structured_content is not None:
        return len(json.dumps(result.structured_content, ensure_ascii=False).encode())
    return len(
        "\n".join(
            getattr(b, "text", "") for b in result.content if getattr(b, "type", "") == "text"
        ).encode()
    )


@dataclass
class McpCall:
    result: Any

    @property
    def bytes(self) -> int:
        # measured when asked, not inside a timed call: the client's own bookkeeping
        return wire_bytes(self.result)

    @property
    def model_bytes(self) -> int:
        return model_bytes(self.result)

    @property
    def text(self) -> str:
        return "\n".join(
            getattr(b, "text", "") for b in self.result.content if getattr(b, "type", "") == "text"
        )

    @property
    def data(self) -> Any:
        if self.result.structured_content is not None:
            return self.result.structured_content
        with contextlib.suppress(ValueError):
            return json.loads(self.text)
        return None


class Mcp:
    """An initialized MCP client session to ``ipykeep mcp-serve`` (stdio)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def call(self, name: str, args: dict[str, Any] | None = None) -> McpCall:
        result = await self.session.call_tool(name, args or {})
        if getattr(result, "is_error", False):
            raise RuntimeError(f"MCP tool {name} failed: {wire_text(result)}")
        return McpCall(result)

    async def tools_list_bytes(self) -> int:
        """Bytes of the ``tools/list`` result as the wire carries it (compact JSON)."""
        listed = await self.session.list_tools()
        compact = json.dumps(
            listed.model_dump(mode="json", by_alias=True, exclude_none=True),
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return len(compact.encode())


def wire_text(result: Any) -> str:
    return "\n".join(
        getattr(b, "text", "") for b in result.content if getattr(b, "type", "") == "text"
    )[:2000]


@contextlib.asynccontextmanager
async def mcp_server(
    root: Path,
    *,
    dataflow: str | None = None,
    log: Path | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Mcp]:
    """``ipykeep mcp-serve`` for ``root`` through the official MCP client (``env``: variables
    added to the server's and its daemon's); the daemon it starts is stopped on exit."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server_env = {**bench_env(), **(env or {})}
    if dataflow:
        server_env["IPYKEEP_DATAFLOW"] = dataflow
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ipykeep", "mcp-serve"], cwd=str(root), env=server_env
    )
    errlog = open(log or os.devnull, "a")
    try:
        with anyio.fail_after(900):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield Mcp(session)
    finally:
        errlog.close()
        await anyio.to_thread.run_sync(stop_daemon, root)


@contextlib.asynccontextmanager
async def engine(root: Path, **config: Any) -> AsyncIterator[Engine]:
    """An in-process engine with every layer installed; its kernels are closed on exit."""
    eng = compose(ProjectPaths(root), Config(idle_timeout=0, **config)).engine
    try:
        yield eng
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(eng.shutdown(), 30)
