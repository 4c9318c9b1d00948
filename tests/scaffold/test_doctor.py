"""`ipykeep doctor` on temp projects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipykeep.scaffold.doctor import Status, check_daemon, check_hosts, check_package, run_doctor


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python without ipykernel or ipyflow (a venv without pip: the check only imports)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv / "bin" / "python"


def _by_name(payload: dict) -> dict[str, dict]:
    return {c["name"]: c for c in payload["checks"]}


@pytest.mark.kernel  # slow: left out of the fast tier
def test_doctor_passes_after_init(app, runner, project: Path) -> None:
    assert runner.invoke(app, ["init", "analysis.ipynb"]).exit_code == 0
    result = runner.invoke(app, ["doctor", "--json"])
    payload = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert payload["ok"] is True
    checks = _by_name(payload)
    for name in (
        "python",
        "mcp",
        "ipyflow-core",
        "ipykernel",
        "jupyter_client",
        "config",
        "kernel python",
    ):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["daemon"]["status"] in ("ok", "warn")
    for host in ("Claude Code (project)", "Codex (project)", "Cursor (project)"):
        assert checks[f"host {host}"]["status"] == "ok"
        assert checks[f"host {host}"]["detail"].startswith("ipykeep mcp-serve")
    table = runner.invoke(app, ["doctor"])
    assert table.exit_code == 0
    assert "ok    kernel python" in table.output and "0 failed" in table.output


def test_doctor_fails_without_ipyflow_in_kernel_python(
    app, runner, project: Path, bare_python: Path
) -> None:
    (project / "ipykeep.toml").write_text(f"python = {json.dumps(str(bare_python))}\n")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1, result.output
    line = next(line for line in result.output.splitlines() if "kernel python" in line)
    assert line.startswith("fail") and "cannot import" in line and "ipyflow" in line
    assert (
        "fix: run: " in result.output and "-m pip install ipykernel ipyflow-core" in result.output
    )


def test_kernel_python_from_env_and_relative_path(
    project: Path, bare_python: Path, monkeypatch
) -> None:
    monkeypatch.setenv("IPYKEEP_PYTHON", str(bare_python))
    checks = {c.name: c for c in run_doctor(project).checks}
    assert (
        checks["kernel python"].status is Status.fail
        and "ipyflow" in checks["kernel python"].detail
    )
    monkeypatch.delenv("IPYKEEP_PYTHON")
    (project / "ipykeep.toml").write_text('python = "no/such/python"\n')
    report = run_doctor(project)
    check = {c.name: c for c in report.checks}["kernel python"]
    assert (
        check.status is Status.fail and "no/such/python" in check.detail and report.exit_code == 1
    )


def test_invalid_config_fails(app, runner, project: Path) -> None:
    (project / "ipykeep.toml").write_text("idle_timout = 5\n")
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 1
    checks = _by_name(json.loads(result.output))
    assert checks["config"]["status"] == "fail" and "idle_timout" in checks["config"]["detail"]
    assert "idle_timeout" in checks["config"]["fix"]


def test_host_entry_with_missing_command_fails(project: Path, home: Path) -> None:
    (project / ".mcp.json").write_text(
        '{"mcpServers": {"ipykeep": {"command": "no-such-ipykeep-cmd", "args": []}}}'
    )
    (home / ".cursor").mkdir()
    (home / ".cursor/mcp.json").write_text(
        '{"mcpServers": {"ipykeep": {"command": ".venv/bin/ipykeep", "args": ["mcp-serve", '
        '"--project", "${workspaceFolder}"]}}}'
    )
    checks = {c.name: c for c in check_hosts(project)}
    claude = checks["host Claude Code (project)"]
    assert claude.status is Status.fail and "no-such-ipykeep-cmd" in claude.detail and claude.fix
    assert checks["host Cursor (user)"].status is Status.fail
    venv_bin = project / ".venv/bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "ipykeep").symlink_to(Path(sys.executable).parent / "ipykeep")
    checks = {c.name: c for c in check_hosts(project)}
    assert checks["host Cursor (user)"].status is Status.ok


def test_malformed_host_config_fails_with_line(project: Path) -> None:
    (project / ".codex").mkdir()
    (project / ".codex/config.toml").write_text("a = 1\nb = [\n")
    checks = {c.name: c for c in check_hosts(project)}
    codex = checks["host Codex (project)"]
    assert codex.status is Status.fail and "config.toml" in codex.detail and "line" in codex.detail


def test_no_host_configured_is_a_warning(project: Path) -> None:
    checks = check_hosts(project)
    assert [(c.name, c.status) for c in checks] == [("hosts", Status.warn)]


def test_daemon_not_running_is_not_a_failure(project: Path) -> None:
    check = check_daemon(project)
    assert check.status is Status.warn
    assert "not running" in check.detail or "not checked" in check.detail


def test_package_versions() -> None:
    assert check_package("mcp", 2).status is Status.ok
    wrong = check_package("mcp", 1)
    assert wrong.status is Status.fail and "needs 1.x" in wrong.detail
    assert check_package("no-such-distribution-xyz", None).status is Status.fail


def test_daemon_registered_but_not_answering_fails(project: Path) -> None:
    import os
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = project / ".ipykeep" / "run"
    run.mkdir(parents=True)
    descriptor = {
        "pid": os.getpid(),
        "host": "127.0.0.1",
        "port": port,
        "token": "t",
        "version": "0",
    }
    (run / "daemon.json").write_text(json.dumps(descriptor))
    check = check_daemon(project)
    assert check.status is Status.fail and "did not answer" in check.detail and check.fix


def test_running_daemon_is_ok(project: Path) -> None:
    import os
    import signal

    from ipykeep.client.connection import ensure_daemon

    client = ensure_daemon(project)
    try:
        check = check_daemon(project)
    finally:
        os.kill(client.descriptor.pid, signal.SIGTERM)
    assert check.status is Status.ok and str(client.descriptor.pid) in check.detail


def test_doctor_reports_the_hosts_own_gates(app, runner, project: Path, home: Path) -> None:
    """Claude Code approval and Codex trust, each with the exact fix."""
    assert (
        runner.invoke(app, ["init", "--provider", "claude_code", "--provider", "codex"]).exit_code
        == 0
    )
    checks = {c.name: c for c in check_hosts(project, home)}
    approval, trust = checks["host Claude Code approval"], checks["host Codex trust"]
    assert (
        approval.status is Status.ok and "settings.local.json" in approval.detail
    )  # init approved it
    assert trust.status is Status.warn and "ignores .codex/config.toml" in trust.detail
    assert f'[projects."{project}"]' in trust.fix and 'trust_level = "trusted"' in trust.fix

    # the user trusts the project in Codex's own config
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex/config.toml").write_text(
        f'model = "o3"\n\n[projects."{project}"]\ntrust_level = "trusted"\n'
    )
    assert {c.name: c for c in check_hosts(project, home)}["host Codex trust"].status is Status.ok

    # approval missing, then refused by the user
    (project / ".claude/settings.local.json").write_text("{}\n")
    pending = {c.name: c for c in check_hosts(project, home)}["host Claude Code approval"]
    assert pending.status is Status.warn and "enabledMcpjsonServers" in pending.fix
    (project / ".claude/settings.json").write_text('{"disabledMcpjsonServers": ["ipykeep"]}\n')
    disabled = {c.name: c for c in check_hosts(project, home)}["host Claude Code approval"]
    assert disabled.status is Status.fail and "disabledMcpjsonServers" in disabled.fix
    # init respects the refusal: it neither approves nor allows nor creates the local settings
    result = runner.invoke(app, ["init", "--provider", "claude_code"])
    assert (
        result.exit_code == 0
        and json.loads((project / ".claude/settings.local.json").read_text()) == {}
    )
    (project / ".claude/settings.local.json").unlink()
    result = runner.invoke(app, ["init", "--provider", "claude_code"])
    assert result.exit_code == 0 and "ipykeep is disabled in" in result.output
    assert not (project / ".claude/settings.local.json").exists()


def test_cursor_entry_without_project_warns(project: Path, home: Path) -> None:
    (project / ".cursor").mkdir()
    (project / ".cursor/mcp.json").write_text(
        '{"mcpServers": {"ipykeep": {"command": "ipykeep", "args": ["mcp-serve"]}}}'
    )
    check = {c.name: c for c in check_hosts(project, home)}["host Cursor (project)"]
    assert check.status is Status.warn and "--project ${workspaceFolder}" in check.fix
