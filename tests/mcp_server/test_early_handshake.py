"""The handshake answered from the cache while the SDK loads, and the SDK kept in charge.

Pure checks of the bookkeeping, then real ``mcp-serve`` processes driven by the official
client: a cold start learns the SDK's answers, a warm start gives them early (shown by
planting a marker in the cache, which only the early path can send) and a wrong entry is
corrected by the SDK's own answer for the next start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_types import ListToolsResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ipykeep.mcp_server.early import EarlyAnswers, HandshakeCache
from tests.mcp_server.harness import McpSession, make_project, server_env, stdio_params

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "host", "version": "1"},
}


def _line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg) + "\n").encode()


def _reply(id_: Any, result: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n"


def test_cold_cache_learns_and_warm_cache_answers(tmp_path: Path) -> None:
    cache = HandshakeCache(tmp_path / "h.json")
    cold = EarlyAnswers(cache)
    assert (
        cold.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        is None
    )
    sdk_init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "ipykeep", "version": "x"},
    }
    assert (
        cold.on_response(_reply(1, sdk_init)) is True
    )  # not answered early: the SDK's answer goes out
    assert (
        cold.on_request(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        is None
    )
    assert cold.on_response(_reply(2, {"tools": [{"name": "ipython"}]})) is True
    assert cold.on_response(_reply(3, {})) is True  # unrelated traffic passes

    warm = EarlyAnswers(HandshakeCache(tmp_path / "h.json"))  # a new process reads the file
    other_host = {**INIT, "clientInfo": {"name": "another host", "version": "9"}}
    early = warm.on_request(
        _line({"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": other_host})
    )
    assert early is not None and json.loads(early) == {
        "jsonrpc": "2.0",
        "id": "a",
        "result": sdk_init,
    }
    listed = warm.on_request(_line({"jsonrpc": "2.0", "id": "b", "method": "tools/list"}))
    assert listed is None  # params absent is another request than params {}: the SDK answers
    listed = warm.on_request(
        _line({"jsonrpc": "2.0", "id": "c", "method": "tools/list", "params": {}})
    )
    assert listed is not None and json.loads(listed)["result"] == {"tools": [{"name": "ipython"}]}
    # The SDK answers everything again; what was answered early is dropped, the rest is sent.
    assert warm.on_response(_reply("a", sdk_init)) is False
    assert warm.on_response(_reply("b", {"tools": []})) is True
    assert warm.on_response(_reply("c", {"tools": [{"name": "ipython"}]})) is False
    assert warm.answered == ["initialize", "tools/list"]


def test_a_different_protocol_version_is_not_answered_from_another(tmp_path: Path) -> None:
    cache = HandshakeCache(tmp_path / "h.json")
    answers = EarlyAnswers(cache)
    answers.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    answers.on_response(_reply(1, {"protocolVersion": "2025-06-18"}))
    older = {**INIT, "protocolVersion": "2024-11-05"}
    assert (
        EarlyAnswers(cache).on_request(
            _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": older})
        )
        is None
    )


def test_an_answer_serves_every_host_of_that_version_and_no_malformed_request(
    tmp_path: Path,
) -> None:
    cache = HandshakeCache(tmp_path / "h.json")
    learnt = EarlyAnswers(cache)
    learnt.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    learnt.on_response(_reply(1, {"protocolVersion": "2025-06-18"}))
    host = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}, "elicitation": {}},
        "clientInfo": {"name": "claude-code", "version": "2.1.0"},
    }
    early = EarlyAnswers(cache).on_request(
        _line({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": host})
    )
    assert early is not None and json.loads(early)["result"] == {"protocolVersion": "2025-06-18"}
    for bad in (
        {k: v for k, v in host.items() if k != "clientInfo"},
        {**host, "capabilities": []},
        {**host, "clientInfo": {"name": "x"}},
    ):
        line = _line({"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": bad})
        assert EarlyAnswers(cache).on_request(line) is None, bad  # the SDK's own error


@pytest.mark.posix
def test_a_wrong_entry_is_corrected_by_the_sdk(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    cache = HandshakeCache(path)
    answers = EarlyAnswers(cache)
    answers.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    answers.on_response(_reply(1, {"protocolVersion": "2025-06-18", "instructions": "old"}))
    again = EarlyAnswers(HandshakeCache(path))
    assert (
        again.on_request(_line({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": INIT}))
        is not None
    )
    assert (
        again.on_response(_reply(5, {"protocolVersion": "2025-06-18", "instructions": "new"}))
        is False
    )
    (entry,) = json.loads(path.read_text()).values()
    assert entry["instructions"] == "new"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_once_the_sdk_has_stdin_nothing_is_answered_early(tmp_path: Path) -> None:
    cache = HandshakeCache(tmp_path / "h.json")
    first = EarlyAnswers(cache)
    first.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    first.on_response(_reply(1, {"protocolVersion": "2025-06-18"}))
    late = EarlyAnswers(cache)
    late.answering = False
    assert (
        late.on_request(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        is None
    )
    assert late.on_response(_reply(1, {"protocolVersion": "2025-06-18"})) is True


def _handshake(root: Path, cache_home: Path, **env: str) -> tuple[dict[str, Any], ListToolsResult]:
    params = stdio_params(root)
    params.env = {**(params.env or {}), "XDG_CACHE_HOME": str(cache_home), **env}
    session = McpSession(params).start()
    try:
        init = session.run(lambda c: _initialize_result(c))
        tools = session.run(lambda c: c.list_tools())
        # A request only the SDK answers: by its reply the SDK has also answered (and the
        # server checked) the handshake, as in any session that goes on to use a tool.
        session.run(lambda c: c.send_ping())
        return init, tools
    finally:
        session.close()


async def _initialize_result(client: Any) -> dict[str, Any]:
    """What the client took from the server's answer to ``initialize``."""
    return {
        "protocol_version": client.protocol_version,
        "server_info": client.server_info.model_dump() if client.server_info else None,
        "capabilities": client.server_capabilities.model_dump(),
        "instructions": client.instructions,
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


@pytest.mark.posix
@pytest.mark.kernel  # real mcp-serve processes: left out of the fast tier
def test_real_server_answers_early_from_a_warm_cache_and_heals(
    project: Path, tmp_path: Path
) -> None:
    cache_home = tmp_path / "cache"
    reference = _handshake(project, cache_home, IPYKEEP_MCP_EARLY_HANDSHAKE="0")
    assert not (cache_home / "ipykeep").exists()  # the early path was off: nothing learnt

    cold = _handshake(project, cache_home)
    (cache_file,) = (cache_home / "ipykeep").glob("mcp-handshake-*.json")
    assert oct(cache_file.stat().st_mode & 0o777) == "0o600"
    entries = json.loads(cache_file.read_text())
    assert {k.split(" ")[0] for k in entries} == {"initialize", "tools/list"}
    warm = _handshake(project, cache_home)
    for got in (cold, warm):
        assert got[0] == reference[0]
        assert [t.model_dump() for t in got[1].tools] == [
            t.model_dump() for t in reference[1].tools
        ]

    # Plant a marker only the early path can send: the client sees it once, then the SDK's
    # answer (which the server compares with what it sent) puts the right one back.
    init_key = next(k for k in entries if k.startswith("initialize "))
    entries[init_key]["instructions"] = "PLANTED"
    cache_file.write_text(json.dumps(entries))
    planted = _handshake(project, cache_home)
    assert planted[0]["instructions"] == "PLANTED"
    assert (
        json.loads(cache_file.read_text())[init_key]["instructions"] == reference[0]["instructions"]
    )
    healed = _handshake(project, cache_home)
    assert healed[0]["instructions"] == reference[0]["instructions"]
    assert os.listdir(cache_home / "ipykeep") == [cache_file.name]  # no temp files left


@pytest.mark.posix
@pytest.mark.kernel  # a real mcp-serve process
def test_init_prepares_the_handshake_so_a_hosts_first_start_is_answered_early(
    project: Path, tmp_path: Path
) -> None:
    cache_home = tmp_path / "cache"
    env = {**server_env(project), "XDG_CACHE_HOME": str(cache_home)}
    res = subprocess.run(
        [sys.executable, "-m", "ipykeep", "init", "--provider", "claude_code"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "prepared the MCP handshake for hosts" in res.stdout
    (cache_file,) = (cache_home / "ipykeep").glob("mcp-handshake-*.json")
    entries = json.loads(cache_file.read_text())
    versions = {
        json.loads(k.split(" ", 1)[1])["protocolVersion"]
        for k in entries
        if k.startswith("initialize ")
    }
    assert versions == set(HANDSHAKE_PROTOCOL_VERSIONS)
    listed = [json.loads(k.split(" ", 1)[1]) for k in entries if k.startswith("tools/list ")]
    assert sorted((e["version"], e["params"] is None) for e in listed) == sorted(
        (v, none) for v in HANDSHAKE_PROTOCOL_VERSIONS for none in (False, True)
    )
    # Planted in what init learnt: only the early path can send it, to a host that init never
    # saw (its own name, build and capabilities), on that host's very first start.
    for key in entries:
        if key.startswith("initialize "):
            entries[key]["instructions"] = "PLANTED"
    cache_file.write_text(json.dumps(entries))
    first = _handshake(project, cache_home)
    assert first[0]["instructions"] == "PLANTED"
