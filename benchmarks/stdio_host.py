"""A stand-in for an agent host's stdio MCP client: raw JSON-RPC lines to a spawned server.

It opens a session the way hosts do, with no client library of its own on the clock: the
2025-11-25 handshake (``initialize``, ``notifications/initialized``), the 2026-07-28 probe
(``server/discover`` in the per-request ``_meta`` envelope), or Claude Code's opening, which
probes first, waits ``PROBE_WAIT_S`` for the answer and otherwise falls back to the handshake,
discovering again if the server refuses the handshake with ``-32022`` (its connection was
already opened in the 2026-07-28 era by the probe). Used by the start-up benchmark and by the
tests of the opening under CPU load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HANDSHAKE_ERA = "2025-11-25"
MODERN_ERA = "2026-07-28"
#: Seconds Claude Code waits for its ``server/discover`` probe before it sends ``initialize``.
PROBE_WAIT_S = 2.4
#: JSON-RPC error code of a request in a protocol version the connection does not serve.
UNSUPPORTED_PROTOCOL_VERSION = -32022
CLIENT_INFO = {"name": "stdio-host", "version": "1"}


def envelope() -> dict[str, Any]:
    """The 2026-07-28 per-request ``_meta`` envelope."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN_ERA,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def request(rid: int, method: str, params: dict[str, Any] | None = None, *, modern: bool) -> bytes:
    """A request line; ``modern`` stamps the 2026-07-28 envelope on it."""
    body = dict(params or {})
    if modern:
        body["_meta"] = {**body.get("_meta", {}), **envelope()}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if body:
        message["params"] = body
    return (json.dumps(message) + "\n").encode()


def initialize(rid: int) -> bytes:
    params = {"protocolVersion": HANDSHAKE_ERA, "capabilities": {}, "clientInfo": CLIENT_INFO}
    return request(rid, "initialize", params, modern=False)


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


@dataclass
class StdioHost:
    """One spawned server and the lines exchanged with it."""

    proc: asyncio.subprocess.Process
    started: float
    #: the protocol era the session ended up in (set by an opening)
    era: str = ""
    #: what the opening did, in order (``probe``, ``probe unanswered``, ``initialize``, …)
    steps: list[str] = field(default_factory=list)
    #: ids of every answer read so far
    answered_ids: set[Any] = field(default_factory=set)
    _next_id: int = 0
    _early: dict[Any, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    async def spawn(cls, argv: Sequence[str], cwd: Path, env: dict[str, str]) -> StdioHost:
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 24,
        )
        return cls(proc, started)

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        await self.proc.stdin.drain()

    async def answer(self, rid: int, timeout: float | None = 120.0) -> dict[str, Any] | None:
        """The answer to ``rid``, or None if none came within ``timeout`` s (later ones are kept
        for when they are asked for; notifications are skipped)."""
        if rid in self._early:
            return self._early.pop(rid)
        assert self.proc.stdout is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            except asyncio.TimeoutError:
                return None
            if not line:
                raise EOFError(f"the server closed stdout before answering request {rid}")
            message: dict[str, Any] = json.loads(line)
            if "method" in message:
                continue
            self.answered_ids.add(message.get("id"))
            if message.get("id") == rid:
                return message
            self._early[message.get("id")] = message

    async def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request in the session's era, and its answer."""
        rid = self.new_id()
        await self.send(request(rid, method, params, modern=self.era == MODERN_ERA))
        reply = await self.answer(rid)
        assert reply is not None
        return reply

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.ask("tools/call", {"name": name, "arguments": arguments})

    # -- openings ------------------------------------------------------------------------------
    async def open_handshake(self) -> dict[str, Any]:
        """The 2025-11-25 opening; the ``initialize`` answer."""
        rid = self.new_id()
        await self.send(initialize(rid))
        reply = await self.answer(rid)
        assert reply is not None
        await self.send(INITIALIZED)
        self.era = HANDSHAKE_ERA
        return reply

    async def open_discover(self) -> dict[str, Any]:
        """The 2026-07-28 opening; the ``server/discover`` answer."""
        rid = self.new_id()
        await self.send(request(rid, "server/discover", modern=True))
        reply = await self.answer(rid)
        assert reply is not None
        self.era = MODERN_ERA
        return reply

    async def open_like_claude_code(self, probe_wait: float = PROBE_WAIT_S) -> None:
        """Probe, wait ``probe_wait`` s, fall back to the handshake, re-discover on ``-32022``;
        ``era`` and ``steps`` say what happened. Raises if no era could be opened. A
        ``probe_wait`` of 0 plays a probe answered too late, whatever the machine's speed."""
        probe = self.new_id()
        await self.send(request(probe, "server/discover", modern=True))
        self.steps.append("probe")
        reply = await self.answer(probe, probe_wait) if probe_wait > 0 else None
        if reply is not None and "result" in reply:
            self.era = MODERN_ERA
            return
        self.steps.append("probe unanswered" if reply is None else "probe refused")
        init = self.new_id()
        await self.send(initialize(init))
        self.steps.append("initialize")
        answered = await self.answer(init)
        assert answered is not None
        if "result" in answered:
            await self.send(INITIALIZED)
            self.era = HANDSHAKE_ERA
            return
        code = answered.get("error", {}).get("code")
        if code != UNSUPPORTED_PROTOCOL_VERSION:
            raise RuntimeError(f"initialize failed: {answered}")
        self.steps.append("-32022: discover again")
        await self.open_discover()

    async def close(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 20)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def first_answer_seconds(
    argv: Sequence[str], cwd: Path, env: dict[str, str], era: str
) -> float:
    """Seconds from spawning ``argv`` to the answer that opens a session in ``era``."""
    host = await StdioHost.spawn(argv, cwd, env)
    try:
        reply = await (host.open_discover() if era == MODERN_ERA else host.open_handshake())
        elapsed = time.perf_counter() - host.started
        if "result" not in reply:
            raise RuntimeError(f"the {era} opening failed: {reply}")
        return elapsed
    finally:
        await host.close()


@contextlib.contextmanager
def busy_cpu(loops: int = 2) -> Any:
    """``loops`` processes spinning on the CPU (``python -c 'while True: pass'``) meanwhile."""
    import subprocess
    import sys

    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(loops)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def server_env(**extra: str) -> dict[str, str]:
    """This environment, with no idle expiry of the daemon."""
    return {**os.environ, "IPYKEEP_IDLE_TIMEOUT": "0", **extra}
