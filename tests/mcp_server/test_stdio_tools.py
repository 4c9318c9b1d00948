"""The tools over stdio with the official MCP client: one server and one scratch kernel per module.

Tests run in file order and share the kernel; the last one kills and restarts it.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipykeep.mcp_server.catalog import TOOLS_LIST_BUDGET
from tests.mcp_server.harness import (
    McpSession,
    channel_sizes,
    envelope,
    server_env,
    text_of,
)

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def kid(mcp: McpSession) -> Iterator[str]:
    res = mcp.tool("create_kernel", {})
    assert not res.is_error, text_of(res)
    yield res.structured_content["kernel_id"]


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


def test_tools_list_is_small(mcp: McpSession) -> None:
    listed = mcp.run(lambda c: c.list_tools())
    size = len(
        json.dumps(
            listed.model_dump(mode="json", by_alias=True, exclude_none=True),
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )
    assert size <= TOOLS_LIST_BUDGET, size
    assert {t.name for t in listed.tools} >= {"ipython", "read_cell", "run_stale", "inspect"}
    assert all(t.output_schema is None for t in listed.tools)
    # as a host receives them: a read-only tool says so; one that runs code leaves every hint
    # at the protocol's defaults (not read-only, destructive, open-world)
    by_name = {t.name: t for t in listed.tools}
    assert by_name["list_cells"].annotations.read_only_hint is True
    assert by_name["ipython"].annotations is None
    templates = mcp.run(lambda c: c.list_resource_templates())
    assert [t.uri_template for t in templates.resource_templates] == [
        "ipykeep://artifacts/{kernel_id}/{name}"
    ]


def test_ipython_runs_code_and_keeps_state(mcp: McpSession, kid: str) -> None:
    _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "kept = 41"}))
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "print(kept + 1)"}))
    assert res.structured_content["state"] == "ok"
    assert res.structured_content["handle"].startswith("c")
    assert "42" in text_of(res)
    listed = _ok(mcp.tool("list_kernels"))
    (k,) = listed.structured_content["kernels"]
    assert k["kernel_id"] == kid and k["state"] in ("idle", "busy") and k["cwd"]


def test_failure_is_a_record_not_an_error(mcp: McpSession, kid: str) -> None:
    res = mcp.tool("ipython", {"kernel_id": kid, "code": "1/0"})
    assert not res.is_error  # the tool worked; the code failed
    assert res.structured_content["state"] == "failed"
    assert res.structured_content["error"]["ename"] == "ZeroDivisionError"
    assert "ZeroDivisionError" in text_of(res)


def test_long_output_is_bounded_and_readable_in_full(mcp: McpSession, kid: str) -> None:
    res = _ok(
        mcp.tool(
            "ipython",
            {"kernel_id": kid, "code": "for i in range(3000):\n    print(f'line {i:04d}')"},
        )
    )
    # a model reads one channel (the host picks it): each stays within budget on its own
    text_bytes, structured_bytes = channel_sizes(res)
    assert text_bytes < 4096 and structured_bytes < 4096, (text_bytes, structured_bytes)
    text = text_of(res)
    assert "line 0000" in text and "line 2999" in text and "line 1500" not in text
    uri = res.structured_content["uri"]
    assert uri.startswith("ipykeep://artifacts/") and uri in text
    assert ".ipykeep/kernels/" in text  # the marker names the file too
    full = mcp.run(lambda c: c.read_resource(uri))
    body = full.contents[0].text
    assert (
        body.count("\n") == 3000 and body.startswith("line 0000\n") and body.endswith("line 2999\n")
    )


def test_yield_zero_returns_handle_and_second_call_is_not_blocked(
    mcp: McpSession, kid: str
) -> None:
    started = mcp.tool(
        "ipython",
        {
            "kernel_id": kid,
            "code": "import time\ntime.sleep(3)\nprint('slept')",
            "yield_time_ms": 0,
        },
    )
    _ok(started)
    assert started.structured_content["state"] in ("queued", "running")
    handle = started.structured_content["handle"]
    t0 = time.monotonic()
    quick = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "print(6 * 7)"}))
    elapsed = time.monotonic() - t0
    assert quick.structured_content["state"] == "ok" and "42" in text_of(quick)
    assert elapsed < 1.0, f"second call took {elapsed:.2f}s while the first was running"
    done = _ok(mcp.tool("read_cell", {"kernel_id": kid, "handle": handle, "yield_time_ms": 10_000}))
    assert done.structured_content["state"] == "ok"
    assert "slept" in text_of(done)
    # the reader's cursor moved: reading again returns no new output
    again = _ok(mcp.tool("read_cell", {"kernel_id": kid, "cell_id": handle}))
    assert "slept" not in text_of(again)
    again = _ok(mcp.tool("read_cell", {"kernel_id": kid, "handle": handle, "cursor": 0}))
    assert "slept" in text_of(again)


def test_matplotlib_plot_returns_image_content(mcp: McpSession, kid: str) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 30_000}))
    images = [b for b in res.content if b.type == "image"]
    assert len(images) == 1, text_of(res)
    assert images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert res.structured_content is None  # text + images: the shape every host forwards whole
    assert "images: ipykeep://artifacts/" in text_of(res)


def test_large_figure_is_downscaled(mcp: McpSession, kid: str) -> None:
    pil = pytest.importorskip("PIL.Image")
    code = (
        "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(30, 15), dpi=100)\n"
        "plt.plot(range(100))\nplt.show()"
    )
    res = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 30_000}))
    (image,) = [b for b in res.content if b.type == "image"]
    data = base64.b64decode(image.data)
    assert len(data) <= 200_000
    assert max(pil.open(io.BytesIO(data)).size) <= 1024
    assert "scaled from" in text_of(res)


def test_errors_are_envelopes_and_server_survives(mcp: McpSession, kid: str, project: Path) -> None:
    assert (
        envelope(mcp.tool("ipython", {"kernel_id": "k999", "code": "1"}))["code"]
        == "unknown_kernel"
    )
    assert (
        envelope(mcp.tool("read_cell", {"kernel_id": kid, "handle": "c99999"}))["code"]
        == "unknown_cell"
    )
    assert envelope(mcp.tool("ipython", {"kernel_id": kid}))["code"] == "bad_argument"
    assert (
        envelope(mcp.tool("ipython", {"kernel_id": kid, "code": "1", "yield_time_ms": -1}))["code"]
        == "bad_argument"
    )
    assert (
        envelope(mcp.tool("ipython", {"kernel_id": kid, "code": "1", "nope": True}))["code"]
        == "bad_argument"
    )
    assert envelope(mcp.tool("no_such_tool", {}))["code"] == "bad_argument"
    outside = envelope(mcp.tool("create_kernel", {"cwd": str(project.parent)}))
    assert outside["code"] == "bad_argument" and "outside the project" in outside["message"]
    remote = envelope(mcp.tool("create_kernel", {"cwd": "s3://bucket/home/me"}))
    assert remote["code"] == "not_supported"
    bad_nb = envelope(mcp.tool("create_kernel", {"notebook": "missing.ipynb"}))
    assert bad_nb["code"] == "notebook_invalid"
    # a closed kernel (a second one, so the daemon keeps running for the module's kernel)
    other = _ok(mcp.tool("create_kernel", {"warm": False, "cwd": "."})).structured_content[
        "kernel_id"
    ]
    closed = _ok(mcp.tool("close_kernel", {"kernel_id": other}))
    assert closed.structured_content["state"] == "closed"
    env = envelope(mcp.tool("ipython", {"kernel_id": other, "code": "1"}))
    assert env["code"] == "unknown_kernel" and "closed" in env["message"]
    with pytest.raises(Exception):  # noqa: B017 (the SDK raises its own error type per transport)
        mcp.run(lambda c: c.read_resource("ipykeep://artifacts/k1/../../secret"))
    # still serving
    assert "42" in text_of(_ok(mcp.tool("ipython", {"kernel_id": kid, "code": "print(42)"})))


def test_markdown_and_list_cells(mcp: McpSession, kid: str) -> None:
    res = _ok(mcp.tool("markdown", {"kernel_id": kid, "source": "# Findings\nAll good."}))
    record = Path(json.loads(text_of(res))["record"])
    assert "Findings" in record.read_text()
    cells = _ok(mcp.tool("list_cells", {"kernel_id": kid}))
    assert "recent scratch executions" in text_of(cells)
    assert cells.structured_content["kernel_id"] == kid


def test_stdout_carries_only_protocol(project: Path, kid: str) -> None:
    """A raw stdio session: every stdout line is a JSON-RPC message (logs go to stderr)."""
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "ipython",
                "arguments": {"kernel_id": kid, "code": "print('to the agent')"},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "ipython", "arguments": {"kernel_id": "k999", "code": "1"}},
        },
    ]
    # started elsewhere, pointed at the project: it must reach the same daemon and kernel
    proc = subprocess.Popen(
        [sys.executable, "-m", "ipykeep", "mcp-serve", "--project", str(project)],
        cwd=project.parent,
        env=server_env(project),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout
    replies = {}
    for msg in msgs:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        while "id" in msg and msg["id"] not in replies:
            line = proc.stdout.readline()
            assert line, "server closed stdout"
            parsed = json.loads(line)  # anything but JSON-RPC here breaks the host
            assert parsed.get("jsonrpc") == "2.0", line
            if "id" in parsed:
                replies[parsed["id"]] = parsed
    proc.stdin.close()  # end of session: the server exits
    rest = proc.stdout.read()
    proc.wait(timeout=30)
    assert proc.stderr is not None
    proc.stderr.close()
    for line in rest.splitlines():
        assert json.loads(line).get("jsonrpc") == "2.0", line
    assert "to the agent" in replies[3]["result"]["content"][0]["text"]
    assert replies[4]["result"]["isError"] is True


def _start_and_wait_for(mcp: McpSession, kid: str, code: str, marker: str = "READY") -> str:
    """Start ``code`` (it prints ``marker`` once it is where the test wants it); return its
    handle."""
    run = _ok(mcp.tool("ipython", {"kernel_id": kid, "code": code, "yield_time_ms": 0}))
    handle = run.structured_content["handle"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        res = _ok(
            mcp.tool(
                "read_cell", {"kernel_id": kid, "handle": handle, "cursor": 0, "yield_time_ms": 100}
            )
        )
        assert res.structured_content["state"] in ("queued", "running"), text_of(res)
        if marker in text_of(res):
            return handle
    raise AssertionError(f"{handle} never printed {marker}")


def test_interrupt_keeps_state(mcp: McpSession, kid: str) -> None:
    _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "survivor = 'still here'"}))
    handle = _start_and_wait_for(
        mcp, kid, "import time\nprint('READY', flush=True)\ntime.sleep(60)"
    )
    t0 = time.monotonic()
    res = _ok(mcp.tool("interrupt", {"kernel_id": kid, "handle": handle}))
    elapsed = time.monotonic() - t0
    assert res.structured_content["action"] == "interrupted", text_of(res)
    assert elapsed < 1.5, f"interrupt took {elapsed:.2f}s"
    after = _ok(mcp.tool("read_cell", {"kernel_id": kid, "handle": handle, "yield_time_ms": 2000}))
    assert after.structured_content["state"] in ("interrupted", "failed")
    assert "still here" in text_of(
        _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "print(survivor)"}))
    )
    done = _ok(mcp.tool("interrupt", {"kernel_id": kid, "handle": handle}))
    assert done.structured_content["action"] == "already_finished"


def test_interrupt_top_level_await(mcp: McpSession, kid: str) -> None:
    _start_and_wait_for(
        mcp, kid, "import asyncio\nprint('READY', flush=True)\nawait asyncio.sleep(60)"
    )
    t0 = time.monotonic()
    res = _ok(mcp.tool("interrupt", {"kernel_id": kid}))
    assert res.structured_content["action"] == "interrupted", text_of(res)
    # ~0.3-0.8 s on an ipyflow kernel (its tracer slows traceback formatting; the kernel
    # set-up warms the first one); margin for a loaded machine.
    assert time.monotonic() - t0 < 2.0
    assert "still here" in text_of(
        _ok(mcp.tool("ipython", {"kernel_id": kid, "code": "print(survivor)"}))
    )


def test_interrupt_ignored_kills_and_restarts(mcp: McpSession, kid: str) -> None:
    code = (
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('READY', flush=True)\ntime.sleep(60)"
    )
    _start_and_wait_for(mcp, kid, code)
    t0 = time.monotonic()
    res = _ok(mcp.tool("interrupt", {"kernel_id": kid}))
    assert res.structured_content["action"] == "killed_and_restarted", text_of(res)
    assert time.monotonic() - t0 < 15
    nxt = mcp.tool("ipython", {"kernel_id": kid, "code": "print(survivor)"})
    assert nxt.structured_content["state"] == "failed"  # the state went with the old process
    notices = nxt.structured_content.get("notices") or []
    assert any("restarted" in n for n in notices), nxt.structured_content
    assert "notice:" in text_of(nxt)
