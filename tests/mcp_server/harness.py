"""Test harness: a temp project, and the official MCP client driven from synchronous tests.

The client lives in its own thread with its own event loop for the life of a module, so one
server process (and one kernel) is shared by the module's tests without tying anyio's cancel
scopes to pytest's fixture tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import nbformat
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from ipykeep.client.connection import DaemonClient, find_daemon, pid_alive

NOTEBOOK = "analysis.ipynb"
CSV = "data.csv"


def make_project(root: Path) -> Path:
    """A project holding a small notebook that reads a CSV."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)
    (root / "ipykeep.toml").write_text("")
    (root / CSV).write_text("x,y\n1,2\n3,4\n5,6\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import pandas as pd\ndf = pd.read_csv('data.csv')", id="load"),
        nbformat.v4.new_code_cell("total = int(df['x'].sum())\nprint(total)", id="total"),
        nbformat.v4.new_markdown_cell("Doubling the total.", id="note"),
        nbformat.v4.new_code_cell("doubled = total * 2\ndoubled", id="double"),
    ]
    nbformat.write(nb, root / NOTEBOOK)
    return root


#: The checkout the tests import ipykeep from: the server under test runs that code too.
SOURCE_ROOT = str(Path(__file__).resolve().parents[2])


def server_env(root: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": SOURCE_ROOT,
        "HOME": os.environ.get("HOME", str(root)),
        "XDG_CONFIG_HOME": str(root / ".xdg"),  # no user config leaks in
        "IPYKEEP_IDLE_TIMEOUT": "0",
    }


def stdio_params(root: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "ipykeep", "mcp-serve"],
        cwd=str(root),
        env=server_env(root),
    )


def shutdown_daemon(root: Path) -> None:
    """Stop the project's daemon (and so its kernels) and wait until it is gone."""
    desc = find_daemon(root)
    if desc is None:
        return
    with contextlib.suppress(Exception):
        DaemonClient(desc).call("shutdown")
    import time

    deadline = time.monotonic() + 20
    while pid_alive(desc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(desc.pid):
        os.kill(desc.pid, 9)


class McpSession:
    """One MCP client connection, usable from synchronous test code."""

    def __init__(
        self,
        target: StdioServerParameters | Callable[[], Any],
        *,
        mode: str = "legacy",
        **client_kwargs: Any,
    ) -> None:
        self._target = target
        self._mode = mode
        self._client_kwargs = client_kwargs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._ready: Future[Client] = Future()
        self._stop: asyncio.Event | None = None
        self._main: Future[None] | None = None

    def start(self, timeout: float = 60) -> McpSession:
        self._thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        self._ready.result(timeout)
        return self

    async def _hold(self) -> None:
        self._stop = asyncio.Event()
        target = self._target
        try:
            client = Client(
                target() if callable(target) else target, mode=self._mode, **self._client_kwargs
            )  # type: ignore[arg-type]
            async with client:
                self._ready.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def run(self, fn: Callable[[Client], Awaitable[Any]], timeout: float = 120) -> Any:
        client = self._ready.result()
        return asyncio.run_coroutine_threadsafe(fn(client), self._loop).result(timeout)

    def tool(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        timeout: float = 120,
        progress: Callable[..., Awaitable[None]] | None = None,
    ) -> CallToolResult:
        return self.run(
            lambda c: c.call_tool(name, args or {}, progress_callback=progress), timeout
        )

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._main is not None:
            with contextlib.suppress(BaseException):
                self._main.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def wire_size(result: Any) -> int:
    """Bytes of a result as the client received it (its JSON form)."""
    return len(
        json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)).encode()
    )


def text_of(result: CallToolResult) -> str:
    return "\n".join(
        getattr(b, "text", "") for b in result.content if getattr(b, "type", "") == "text"
    )


def envelope(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, text_of(result)
    env = result.structured_content
    assert isinstance(env, dict) and {"code", "message", "retryable", "hint"} <= env.keys(), env
    assert json.loads(text_of(result)) == env
    return env


#: The hosts whose forwarding rule HostView applies.
HOSTS = ("claude_code", "codex")


class HostView:
    """What a host passes to its model from a tool result.

    - Claude Code: ``structuredContent`` (as JSON) when the result has it, else the text
      blocks; image blocks either way.
    - Codex: ``structuredContent`` alone when the result has it (text and images dropped),
      else the text blocks and the image blocks.
    """

    def __init__(self, result: CallToolResult, host: str = "claude_code") -> None:
        assert host in HOSTS, host
        self.host = host
        images = [b for b in result.content if getattr(b, "type", "") == "image"]
        if result.structured_content is not None:
            self.text = json.dumps(result.structured_content, ensure_ascii=False)
            self.images = images if host == "claude_code" else []
        else:
            self.text = text_of(result)
            self.images = images

    @property
    def size(self) -> int:
        """Bytes of the forwarded channel (images are counted apart by their own caps)."""
        return len(self.text.encode())


def host_views(result: CallToolResult) -> list[HostView]:
    """The result as each host's model reads it."""
    return [HostView(result, host) for host in HOSTS]


def channel_sizes(result: CallToolResult) -> tuple[int, int]:
    """Bytes of the text channel and of the structured channel, each as a model would see it."""
    structured = (
        json.dumps(result.structured_content, ensure_ascii=False)
        if result.structured_content is not None
        else ""
    )
    return len(text_of(result).encode()), len(structured.encode())
