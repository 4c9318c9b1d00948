"""Sub-agents in forks: two MCP sessions (the official client, over stdio) each fork one
notebook's kernel and work in their fork concurrently; no name crosses over, and the parent
keeps none of theirs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.mcp_server.harness import NOTEBOOK, McpSession, stdio_params, text_of

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

CALLS = 50


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


def _work(session: McpSession, kernel_id: str, tag: str) -> list[str]:
    """``CALLS`` executions binding ``<tag>_<i>``; each reports the tagged names it sees."""
    seen: list[str] = []
    for i in range(CALLS):
        code = (
            f"{tag}_{i} = {i}\n"
            "import json as _j\n"
            "print(_j.dumps(sorted(n for n in globals() if n.startswith(('a_', 'b_')))))"
        )
        out = text_of(_ok(session.tool("ipython", {"kernel_id": kernel_id, "code": code})))
        line = next(ln for ln in out.splitlines() if ln.startswith("["))
        seen.extend(json.loads(line))
    return seen


def test_two_sessions_on_forks_of_one_kernel(project: Path, mcp: McpSession) -> None:
    parent = _ok(mcp.tool("create_kernel", {"notebook": NOTEBOOK})).structured_content
    kid = parent["kernel_id"]
    sessions = [McpSession(stdio_params(project)).start() for _ in range(2)]
    try:
        forks = [
            _ok(s.tool("fork_kernel", {"kernel_id": kid, "name": f"agent-{tag}.ipynb"}))
            for s, tag in zip(sessions, "ab", strict=True)
        ]
        ids = [(f.structured_content or json.loads(text_of(f)))["kernel_id"] for f in forks]
        assert len(set(ids) | {kid}) == 3
        assert all(Path(project / f"agent-{tag}.ipynb").exists() for tag in "ab")
        # each fork holds what the parent's cells left
        for s, fid in zip(sessions, ids, strict=True):
            assert "9" in text_of(_ok(s.tool("ipython", {"kernel_id": fid, "code": "total"})))
        with ThreadPoolExecutor(2) as pool:
            seen_a, seen_b = pool.map(
                lambda args: _work(*args),
                [(sessions[0], ids[0], "a"), (sessions[1], ids[1], "b")],
            )
        assert seen_a and not [n for n in seen_a if not n.startswith("a_")]
        assert seen_b and not [n for n in seen_b if not n.startswith("b_")]
        assert f"a_{CALLS - 1}" in seen_a and f"b_{CALLS - 1}" in seen_b
        out = text_of(
            _ok(
                mcp.tool(
                    "ipython",
                    {
                        "kernel_id": kid,
                        "code": "print([n for n in globals() if n[:2] in ('a_', 'b_')])",
                    },
                )
            )
        )
        assert "[]" in out
        for s, fid in zip(sessions, ids, strict=True):
            _ok(s.tool("close_kernel", {"kernel_id": fid}))
    finally:
        for s in sessions:
            s.close()
