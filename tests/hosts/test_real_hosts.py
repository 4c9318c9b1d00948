"""Real agent hosts drive ipykeep after `ipykeep init` alone, and their models get every result.

Claude Code, Codex, Gemini CLI and opencode, installed from npm at pinned versions, each run
headless in a fresh project set up the way the README tells a new user: ipykeep installed in a
virtual environment that is not activated (not on PATH), ``ipykeep init`` in the project, then
only the trust step the host itself demands. Each host talks to a stand-in model on loopback
that plays a fixed plan of ipykeep calls and records what the host sent back; the checks are
on what the model received. Each host runs on an idle machine and with two busy loops on the
CPU (the hosts' start-up and the protocol opening are the parts that race). The hosts run one
after another, in this one file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipykeep.mcp_server.catalog import TOOLS
from tests.hosts import scenario
from tests.hosts.hosts import HOSTS, REPO, Host, install_hosts
from tests.hosts.standin import Standin, ipykeep_tool
from tests.mcp_server.harness import shutdown_daemon

pytestmark = [pytest.mark.kernel, pytest.mark.hosts, pytest.mark.timeout(900)]

#: The ipykeep of this checkout, as the README installs it: in a venv, not on PATH.
IPYKEEP = Path(sys.executable).parent / "ipykeep"
#: A host's request log and what its model received, kept for a failing run's diagnosis.
ARTIFACTS = REPO / "test-artifacts" / "hosts"


@pytest.fixture(scope="module")
def installed() -> None:
    reason = install_hosts()
    if reason is not None:
        pytest.skip(f"the agent hosts cannot be installed: {reason}")


@pytest.fixture
def busy_cpu(request: pytest.FixtureRequest) -> Iterator[None]:
    """Two busy loops on the CPU for the loaded variant (none when idle)."""
    loops: list[subprocess.Popen[bytes]] = []
    if request.param == "busy":
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def _node_path() -> str:
    import shutil

    node = shutil.which("node")
    assert node is not None
    return os.pathsep.join(dict.fromkeys([str(Path(node).parent), "/usr/bin", "/bin"]))


def _new_project(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    scenario.write_notebook(root)
    return root


def _clean_env(home: Path, project: Path) -> dict[str, str]:
    """A user's shell: its own HOME, PATH without the venv, nothing of ipykeep's or the suite's."""
    keep = ("LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), PATH=_node_path(), PWD=str(project), NO_COLOR="1", CI="1")
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    return env


def _run_init(project: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(IPYKEEP), "init", "--allow-all"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _catalog(requests: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The bytes of ipykeep's tool definitions the host sent its model, per request."""
    sizes: list[tuple[int, int]] = []
    for _, body in requests:
        tools = _offered(body)
        mine = {name: size for name, size in tools.items() if ipykeep_tool(name)}
        sizes.append((len(mine), sum(mine.values())))
    nonzero = [s for s in sizes if s[0]]
    first = min(nonzero, key=lambda s: s[1]) if nonzero else (0, 0)
    return {"tools_before_search": first[0], "bytes_before_search": first[1], "per_request": sizes}


def _offered(body: dict[str, Any]) -> dict[str, int]:
    """Tool definitions in a request's own tool list (not those a search returned), by name."""

    def size(obj: Any) -> int:
        return len(json.dumps(obj, separators=(",", ":")).encode())

    found: dict[str, int] = {}
    for tool in body.get("tools", []):
        if "function" in tool:  # chat completions
            found[tool["function"]["name"]] = size(tool)
        for decl in tool.get("functionDeclarations", []):  # gemini
            found[decl["name"]] = size(decl)
        for inner in tool.get("tools", []) if tool.get("type") == "namespace" else []:
            found[f"{tool['name']}__{inner['name']}"] = size(inner)
        if "name" in tool and tool.get("type") != "namespace":
            found[tool["name"]] = size(tool)
    return found


CASES = [
    pytest.param(host, load, id=f"{host.name}-{load}")
    for host in HOSTS
    for load in ("idle", "busy")
]


@pytest.mark.parametrize(("host", "busy_cpu"), CASES, indirect=["busy_cpu"])
def test_host_runs_the_plan_after_init(
    installed: None, host: Host, busy_cpu: None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = _new_project(tmp_path / "project")
    env = _clean_env(home, project)
    init_output = _run_init(project, env)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"{request.node.callspec.id}.jsonl"
    log.unlink(missing_ok=True)
    try:
        with Standin(scenario.make_plan, log=log) as model:
            env.update(host.prepare(home, project, model.url))
            run = subprocess.run(
                host.command(scenario.PROMPT),
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=780,  # within the test's 900 s: a starved machine slows opencode most
                stdin=subprocess.DEVNULL,
            )
            received = model.plan.received
            catalog = _catalog(model.plan_requests())
    finally:
        shutdown_daemon(project)
    summary = {
        "host": host.spec,
        "returncode": run.returncode,
        "received": [r.__dict__ for r in received],
        "catalog": catalog,
        "init": init_output,
        "stdout": run.stdout[-4000:],
        "stderr": run.stderr[-4000:],
    }
    (ARTIFACTS / f"{request.node.callspec.id}.json").write_text(json.dumps(summary, indent=1))
    diagnosis = f"{host.name} exited {run.returncode}; see {ARTIFACTS}\n{run.stderr[-1500:]}"

    assert len(received) == len(scenario.make_plan().steps), diagnosis
    texts = [r.text for r in received]
    assert "k1" in texts[scenario.CREATE] or re.search(r"\bk\d+\b", texts[scenario.CREATE])
    assert "5050" in texts[scenario.RUN_FIRST], texts[scenario.RUN_FIRST]
    assert scenario.VALUE in texts[scenario.VALUE_CALL], texts[scenario.VALUE_CALL]
    assert scenario.TRACEBACK_LINE in texts[scenario.RAISES], texts[scenario.RAISES]

    long = texts[scenario.LONG]
    assert scenario.LONG_HEAD in long and scenario.LONG_TAIL in long, long
    assert len(long.encode()) <= 4096, len(long.encode())
    assert "ipykeep://artifacts/" in long  # the cut names where the rest is

    assert received[scenario.PLOT].images >= 1, received[scenario.PLOT]

    # The first edit gave no version: the refusal and its hint reached the model, then the
    # retry with the named version went through.
    assert "stale_version" in texts[scenario.EDIT_PROBE], texts[scenario.EDIT_PROBE]
    assert "stale_version" not in texts[scenario.EDIT], texts[scenario.EDIT]
    plan = texts[scenario.PLAN]
    for kind, message in (
        ("source_changed", "source edited since it last ran"),
        ("upstream", "uses frame from cell 0"),
    ):
        assert kind.split("_")[0] in plan and message in plan, plan

    slow = texts[scenario.SLOW]
    assert "running" in slow and re.search(r"\bc\d+\b", slow), slow
    assert "interrupted" in texts[scenario.INTERRUPT], texts[scenario.INTERRUPT]

    always_loaded = {t.name for t in TOOLS if t.always_load}
    if host.name == "claude_code":
        assert catalog["tools_before_search"] == len(always_loaded), catalog
    elif host.name == "codex":
        assert catalog["tools_before_search"] == 0, catalog
    else:
        assert catalog["tools_before_search"] == len(TOOLS), catalog
