"""Property-based fuzzing of the daemon's RPC surface and of every MCP tool's arguments.

Whatever arrives, the answer is a result or a typed error (never ``internal``), and it comes
back (no hang). Calls that would start processes (a kernel without a notebook, a Jupyter
server) are steered to fail validation instead, so the fuzzing stays cheap; everything else is
sent as drawn, against a live kernel.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ipykeep.api import methods as api
from ipykeep.client.connection import DaemonClient
from ipykeep.client.wire import encode_request
from ipykeep.mcp_server.catalog import TOOLS
from tests.conftest import stop_daemon
from tests.mcp_server.harness import McpSession, stdio_params
from tests.reliability.helpers import start_project

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
# kernel ids and names that never hit the live kernel k1 by accident
texts = st.text(max_size=40).filter(lambda s: s not in ("k1",))
FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

#: Every declared RPC method (its params from the declaration).
METHODS = sorted(api.BY_NAME)
SPAWNING = {"create_kernel", "serve", "unserve", "publish", "close_kernel", "restart", "shutdown"}
#: Methods that change the kernel's environment (installs from a package index): aimed, like
#: the spawning ones, at kernels that do not exist.
INSTALLING = {"add_packages"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, DaemonClient]]:
    root = tmp_path_factory.mktemp("fuzz") / "p"
    client = start_project(root, ["x = 1"])
    yield root, client
    stop_daemon(root)


def _raw_call(client: DaemonClient, payload: bytes) -> dict[str, Any]:
    ep = client.descriptor.endpoint
    with socket.create_connection((ep.host, ep.port), timeout=10) as sock:
        sock.settimeout(60)  # a hang fails the test
        sock.sendall(payload)
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


@st.composite
def rpc_requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    method = draw(st.sampled_from(METHODS) | st.text(max_size=12))
    keys = [
        "kernel_id",
        "notebook",
        "code",
        "handle",
        "cells",
        "cursor",
        "yield_time_ms",
        "name",
        "path",
        "uri",
        "source",
        "execute",
        "cwd",
        "python",
        "dataflow",
        "warm",
        "request_id",
        "reader",
        "timeout",
    ]
    declared = api.BY_NAME.get(method)
    if declared is not None and draw(
        st.booleans()
    ):  # mostly the method's own parameters, wrongly typed or not
        keys = list(declared.params.model_fields) or keys
    params = draw(
        st.dictionaries(
            st.sampled_from(keys) | st.text(max_size=6), json_values | texts, max_size=5
        )
    )
    if method in SPAWNING or method in INSTALLING:
        params["kernel_id"] = draw(texts)  # never the live kernel: these fail as unknown kernels
        params["notebook"] = "missing-" + draw(st.text(max_size=10)) + ".ipynb"
        params.pop("cwd", None)
    if method == "execute" and isinstance(params.get("code"), str):
        params["code"] = "pass  # " + params["code"].replace(
            "\n", " "
        )  # exercise the path, not the user's code
    return method, params


@FUZZ
@given(request=rpc_requests())
@example(request=("status", {"notebook": "a\0b"}))
@example(request=("watch_file", {"path": "a\0"}))
@example(request=("execute", {"code": 5}))
@example(request=("execute", {"code": "1", "yield_time_ms": "x"}))
@example(request=("read_execution", {"handle": ["x"]}))
@example(request=("run_cells", {"cells": [1, None]}))
@example(request=("read_artifact", {"uri": None}))
@example(request=("inspect", {"name": 3}))
@example(request=("run_stale", {"execute": "maybe"}))
def test_rpc_requests_get_a_result_or_a_typed_error(daemon, request) -> None:
    _, client = daemon
    method, params = request
    response = _raw_call(client, encode_request(method, params, client.descriptor.token, 7))
    assert response.get("id") == 7
    if "error" in response:
        data = response["error"].get("data") or {}
        assert data.get("code") not in (None, "internal"), response


@FUZZ
@given(line=st.binary(max_size=200))
def test_garbage_lines_are_parse_errors_or_refusals(daemon, line: bytes) -> None:
    _, client = daemon
    ep = client.descriptor.endpoint
    with socket.create_connection((ep.host, ep.port), timeout=10) as sock:
        sock.settimeout(30)
        sock.sendall(line.replace(b"\n", b" ") + b"\n")
        data = sock.recv(1 << 16)
    if data:
        response = json.loads(data)
        assert response["error"]["code"] in (-32700, -32001)


@pytest.fixture(scope="module")
def mcp(daemon) -> Iterator[McpSession]:
    root, _ = daemon
    session = McpSession(stdio_params(root)).start()
    yield session
    session.close()


def _tool_args(tool: Any) -> st.SearchStrategy[dict[str, Any]]:
    fields = list(tool.args.model_fields)
    values = json_values | texts
    drawn = st.dictionaries(
        st.sampled_from(fields) if fields else st.nothing(), values, max_size=len(fields)
    )
    extra = st.dictionaries(st.text(max_size=6), values, max_size=1)
    return st.tuples(drawn, extra, st.booleans()).map(lambda t: {**t[0], **(t[1] if t[2] else {})})


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
def test_every_mcp_tool_answers_any_arguments_with_a_result_or_a_typed_error(
    mcp: McpSession, tool: Any
) -> None:
    @settings(
        max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    @given(args=_tool_args(tool))
    def check(args: dict[str, Any]) -> None:
        if tool.name in SPAWNING or tool.name == "close_kernel":
            args["kernel_id"] = "fuzz-" + str(args.get("kernel_id", ""))[:10]
            args["notebook"] = "missing.ipynb"
        if tool.name == "ipython" and isinstance(args.get("code"), str):
            args["code"] = "pass  # " + args["code"].replace("\n", " ")
        if tool.name in ("ipython", "read_cell"):
            args["yield_time_ms"] = (
                0 if not isinstance(args.get("yield_time_ms"), int) else args["yield_time_ms"]
            )
        result = mcp.tool(tool.name, args, timeout=60)
        if result.is_error:
            env = result.structured_content
            assert isinstance(env, dict) and env.get("code") not in (None, "internal"), (args, env)

    check()


#: Strings the OS or the wire cannot take as they are: too long for a path or a name, a lone
#: surrogate (valid JSON, not valid UTF-8).
HOSTILE_TEXT = {
    "5,000 chars": "a" * 5000,
    "100 KB": "b" * 100_000,
    "long path": "/tmp/" + "x/" * 2500,
    "lone surrogate": "nb\ud800.ipynb",
}


def _text_fields(model: Any) -> list[str]:
    return [name for name, info in model.model_fields.items() if "str" in repr(info.annotation)]


def test_hostile_strings_in_any_rpc_argument_are_typed_errors(daemon) -> None:
    _, client = daemon
    failures = []
    for name in METHODS:
        if name in SPAWNING:
            continue
        for field in _text_fields(api.BY_NAME[name].params):
            for what, text in HOSTILE_TEXT.items():
                params: dict[str, Any] = {field: text}
                if name == "execute" and field != "code":
                    params["code"] = "1"
                token = client.descriptor.token
                response = _raw_call(client, encode_request(name, params, token, 3))
                data = (response.get("error") or {}).get("data") or {}
                if "error" in response and data.get("code") in (None, "internal"):
                    failures.append((name, field, what, response["error"]["message"][:120]))
    assert not failures, failures


def test_hostile_strings_in_mcp_arguments_are_typed_errors(mcp: McpSession) -> None:
    # (The official client cannot send a lone surrogate at all: it refuses to encode one.)
    failures = []
    for tool in TOOLS:
        if tool.name in SPAWNING or tool.name == "restart_kernel":
            continue
        for field in _text_fields(tool.args):
            for what in ("100 KB", "long path"):
                args: dict[str, Any] = {field: HOSTILE_TEXT[what]}
                if tool.name in ("ipython", "read_cell"):
                    args["yield_time_ms"] = 0
                result = mcp.tool(tool.name, args, timeout=60)
                env = result.structured_content if result.is_error else {}
                if result.is_error and (
                    not isinstance(env, dict) or env.get("code") in (None, "internal")
                ):
                    failures.append((tool.name, field, what, env))
    assert not failures, failures


def test_a_lone_surrogate_printed_by_a_cell_is_kept_as_a_replacement_character(daemon) -> None:
    _, client = daemon
    rec = client.call("execute", code="print('before \\ud800 after'); print('next line')")
    text = rec["output"]["text"]
    assert rec["state"] == "ok"
    assert "before \ufffd after" in text and "next line" in text, text
    assert "Traceback" not in text and "UnicodeEncodeError" not in text, text
