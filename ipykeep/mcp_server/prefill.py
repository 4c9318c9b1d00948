"""Filling the handshake cache before a host's first start (run by ``ipykeep init``).

With an empty cache, the first ``ipykeep mcp-serve`` of an installation answers ``initialize``
only once the SDK has imported (1–3 s, far longer where the installer left no bytecode), and
hosts time the handshake from the spawn. ``prefill`` serves one real session per handshake-era
protocol version over in-process pipes, each asking ``initialize`` and ``tools/list`` (with
empty params and with none, as hosts differ): the
early path (``early.py``) learns the SDK's own answers exactly as it does from a host, so they
are written by the same code and checked the same way at every later start (an answer that
differs is corrected, never kept).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ipykeep.mcp_server.early import EarlyAnswers, HandshakeCache, enabled
from ipykeep.mcp_server.inflight import Ledger
from ipykeep.mcp_server.server import IpykeepMcp
from ipykeep.mcp_server.session import INITIALIZED_LINE, Handshake
from ipykeep.mcp_server.stdio import Replay, serve_pipes
from ipykeep.project.config import Config

#: Seconds one version's session may take.
SESSION_TIMEOUT_S = 60.0


def _request(rid: int, method: str, params: Mapping[str, object] | None) -> bytes:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return (json.dumps(message) + "\n").encode()


async def _learn(app: IpykeepMcp, cache: HandshakeCache, version: str) -> None:
    """One session of ``version``: the handshake and ``tools/list``, answered by the SDK."""
    early = EarlyAnswers(cache)
    early.answering = False  # learn only: the SDK answers
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    loop = asyncio.get_running_loop()
    serving = loop.create_task(
        serve_pipes(app.server(), in_r, out_w, Replay(), Ledger(), Handshake(), early=early)
    )
    try:
        init = {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "ipykeep-init", "version": "0"},
        }
        # hosts ask tools/list with empty params or none: two keys of the cache
        requests = _request(1, "initialize", init) + INITIALIZED_LINE
        os.write(in_w, requests + _request(2, "tools/list", {}) + _request(3, "tools/list", None))
        answered: set[object] = set()
        buffer = b""
        while answered != {1, 2, 3}:
            chunk = await loop.run_in_executor(None, os.read, out_r, 1 << 20)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            answered |= {json.loads(line).get("id") for line in lines if line.strip()}
    finally:
        os.close(in_w)  # end of input: the session ends
        await asyncio.wait_for(serving, SESSION_TIMEOUT_S)
        for fd in (in_r, out_r, out_w):
            os.close(fd)


async def prefill(project: Path, cache: HandshakeCache | None = None) -> list[str]:
    """Learn the answers for every handshake-era version; the versions learnt."""
    if not enabled():
        return []
    cache = cache or HandshakeCache.for_install()
    app = IpykeepMcp(project, Config())
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        await _learn(app, cache, version)
    return list(HANDSHAKE_PROTOCOL_VERSIONS)
