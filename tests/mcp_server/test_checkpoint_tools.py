"""The ``checkpoint`` and ``restore`` tools over stdio with the official MCP client."""

from __future__ import annotations

import pytest

from tests.mcp_server.harness import McpSession, envelope, text_of

pytestmark = pytest.mark.kernel


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


def test_checkpoint_and_rollback_of_a_mutated_dataframe(mcp: McpSession) -> None:
    kid = _ok(mcp.tool("create_kernel", {})).structured_content["kernel_id"]
    _ok(
        mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})"},
        )
    )
    made = _ok(mcp.tool("checkpoint", {"kernel_id": kid, "name": "before"}))
    assert "df" in text_of(made) and "before" in text_of(made)
    _ok(
        mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "df.drop(index=0, inplace=True)\ndf['a'] *= 10\ntmp = 1"},
        )
    )
    back = _ok(mcp.tool("restore", {"kernel_id": kid, "name": "before"}))
    assert "tmp" in text_of(back)  # deleted: it was made after the checkpoint
    res = _ok(
        mcp.tool(
            "ipython", {"kernel_id": kid, "code": "print(df['a'].tolist(), 'tmp' in globals())"}
        )
    )
    assert "[1, 2, 3] False" in text_of(res)
    env = envelope(mcp.tool("restore", {"kernel_id": kid, "name": "nope"}))
    assert env["code"] == "unknown_checkpoint" and "known: before" in env["hint"]
    env = envelope(mcp.tool("checkpoint", {"kernel_id": kid, "name": "../x"}))
    assert env["code"] == "checkpoint_error" and "not a checkpoint name" in env["message"]
