"""Long calls over stdio with the official MCP client: a long cell returns a handle, progress
arrives while a call works and never after its response, and the result is read with read_cell.

The SDK offers no Tasks extension (``io.modelcontextprotocol/tasks``) to serve, so this handle and
progress path is what every client gets (docs/mcp-and-hosts.md, "Long cells").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from tests.mcp_server.harness import McpSession, stdio_params, text_of

pytestmark = pytest.mark.kernel

#: A notebook whose warm-up and whose second cell each take a few seconds.
SLOW_CELLS = [
    "import time\ntime.sleep(1.5)\nbase = 1",
    "time.sleep(2.5)\nprint('slow cell done', base)",
]


class RecordingTransport:
    """The stdio transport, recording every message the server sends in the order it arrived.

    The client's own progress callback cannot show a late notification: the client drops one
    whose request has already been answered. The wire order can.
    """

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self.received: list[dict[str, Any]] = []
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Any:
        read, write = await self._stack.enter_async_context(stdio_client(self.params))
        send, receive = anyio.create_memory_object_stream[Any](100)
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(tg.cancel_scope.cancel)

        async def pump() -> None:
            async with send:
                async for item in read:
                    if isinstance(item, SessionMessage):
                        self.received.append(
                            item.message.model_dump(mode="json", by_alias=True, exclude_none=True)
                        )
                    await send.send(item)

        tg.start_soon(pump)
        return receive, write

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self._stack.__aexit__(*exc)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def wire(project: Path) -> Iterator[tuple[McpSession, RecordingTransport]]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s, id=f"slow{i}") for i, s in enumerate(SLOW_CELLS)]
    nbformat.write(nb, project / "slow.ipynb")
    transport = RecordingTransport(stdio_params(project))
    session = McpSession(lambda: transport).start()
    try:
        yield session, transport
    finally:
        session.close()


def _progress_after_response(received: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """How many progress notifications arrived, and which came after their request's response."""
    answered: set[Any] = set()
    late: list[str] = []
    count = 0
    for message in received:
        if message.get("method") == "notifications/progress":
            count += 1
            token = message["params"]["progressToken"]
            if token in answered:
                late.append(f"{token}: {message['params']}")
        elif "id" in message and ("result" in message or "error" in message):
            answered.add(message["id"])
    return count, late


def _progress_recorder() -> tuple[list[float], Any]:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    return seen, on_progress


def test_warm_up_and_batches_report_progress_before_their_response_only(
    wire: tuple[McpSession, RecordingTransport],
) -> None:
    mcp, transport = wire
    seen, on_progress = _progress_recorder()
    created = mcp.tool("create_kernel", {"notebook": "slow.ipynb"}, progress=on_progress)
    assert not created.is_error, text_of(created)
    kid = created.structured_content["kernel_id"]
    ran = mcp.tool("run_cells", {"kernel_id": kid, "cells": ["slow1"]}, progress=on_progress)
    assert not ran.is_error and "slow cell done" in text_of(ran), text_of(ran)
    time.sleep(2.5)  # anything still on its way after the responses arrives meanwhile
    count, late = _progress_after_response(transport.received)
    assert seen and count >= 3, (seen, count)  # warm-up and the batch both reported
    assert late == [], late


def test_a_long_cell_returns_a_handle_with_progress_first_then_read_cell_has_the_result(
    wire: tuple[McpSession, RecordingTransport],
) -> None:
    mcp, transport = wire
    kid = mcp.tool("create_kernel", {"notebook": "slow.ipynb"}).structured_content["kernel_id"]
    seen, on_progress = _progress_recorder()
    before = len(transport.received)
    started = mcp.tool(
        "ipython",
        {
            "kernel_id": kid,
            "code": "import time\nfor i in range(4):\n    print('tick', i, flush=True)\n"
            "    time.sleep(1)\nprint('finished')",
            "yield_time_ms": 2500,
        },
        progress=on_progress,
    )
    assert not started.is_error, text_of(started)
    rec = started.structured_content
    assert rec["state"] == "running" and rec["handle"], rec
    assert "tick 0" in rec["output"] and "finished" not in rec["output"], rec
    assert seen, "no progress while the call waited for the cell"
    done = mcp.tool(
        "read_cell", {"kernel_id": kid, "handle": rec["handle"], "yield_time_ms": 10_000}
    )
    assert done.structured_content["state"] == "ok", text_of(done)
    assert "finished" in done.structured_content["output"], done.structured_content
    time.sleep(1.5)
    count, late = _progress_after_response(transport.received[before:])
    assert count >= 1 and late == [], (count, late)
