"""The CLI's hot path: what it imports, that it prints what the typer app prints, and plan cost.

The typer app still runs when ``IPYKEEP_CLI_FULL=1``; comparing the two paths' output on the
same daemon is how "behaviour unchanged" is checked.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from tests.conftest import cli_env, make_project, run_cli, stop_daemon

pytestmark = pytest.mark.kernel

#: modules the hot path must not load: each costs tens of milliseconds at start-up
HEAVY = {
    "typer",
    "click",
    "rich",
    "pydantic",
    "nbformat",
    "jsonschema",
    "asyncio",
    "ipykeep.cli.app",
    "ipykeep.api.records",
}

HOT = [
    ("exec", "1+1"),
    ("exec", "--json", "1+1"),
    ("exec", "1/0"),
    ("status",),
    ("status", "--json"),
    ("--json", "status"),
    ("status", "-n", "nb.ipynb"),
    ("run-stale",),
    ("run-stale", "--json"),
    ("--json", "run-stale", "--notebook", "nb.ipynb"),
    ("run", "setup", "-n", "nb.ipynb"),
    ("run", "--json", "0"),
    ("interrupt",),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("thin") / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import time\nbase = 1", id="setup"),
        nbformat.v4.new_code_cell("time.sleep(0.3)\nslow = base + 1", id="slow"),
        nbformat.v4.new_code_cell("print(slow * 2)", id="show"),
    ]
    nbformat.write(nb, root / "nb.ipynb")
    res = run_cli("start", "nb.ipynb", "--dataflow", "static", cwd=root)
    assert res.returncode == 0, res.stderr
    yield root
    stop_daemon(root)


def imported_modules(stderr: str) -> set[str]:
    """Module names from ``python -X importtime`` output."""
    return {
        m.group(1).strip()
        for m in re.finditer(r"^import time:\s*\d+ \|\s*\d+ \|\s*(.+)$", stderr, re.M)
    }


def _normalise(text: str) -> str:
    # handles, execution counts and timings differ between two runs of the same command
    text = re.sub(r"\bc\d+\b", "cN", text)
    text = re.sub(r"[ \t]+", " ", text)  # a longer handle shifts the columns after it
    text = re.sub(
        r'"(execution_count|cursor|duration_s|last_duration_s|plan_s|fresh_s|restart_s|plan|fresh)"'
        r":[0-9.]+",
        r'"\1":N',
        text,
    )
    text = re.sub(r"\[\s*\d+\]", "[N]", text)
    text = re.sub(r"In\[\d+\]", "In[N]", text)
    return re.sub(r"\d+\.\d+ ?s\b", "N s", text)  # "0.01s" in a batch line, "0.30 s" in a plan


@pytest.mark.parametrize("args", HOT, ids=lambda a: " ".join(a))
def test_hot_commands_skip_heavy_imports_and_print_what_typer_prints(project, args):
    import subprocess
    import sys

    fast = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ipykeep", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )
    loaded = imported_modules(fast.stderr)
    assert "ipykeep.cli.fast" in loaded, fast.stderr[-2000:]
    assert not loaded & HEAVY, f"{' '.join(args)} loaded {sorted(loaded & HEAVY)}"
    full = run_cli(*args, cwd=project, env=cli_env(IPYKEEP_CLI_FULL="1"))
    fast_err = "\n".join(
        line for line in fast.stderr.splitlines() if not line.startswith("import time:")
    )
    assert fast.returncode == full.returncode
    assert _normalise(fast.stdout) == _normalise(full.stdout)
    assert _normalise(fast_err) == _normalise(full.stderr.rstrip("\n"))


def test_help_and_bad_arguments_still_come_from_typer(project):
    res = run_cli("exec", "--help", cwd=project)
    assert res.returncode == 0 and "Usage" in res.stdout and "--notebook" in res.stdout
    res = run_cli("exec", cwd=project)
    assert res.returncode == 2 and "Missing argument" in res.stderr
    res = run_cli("status", "--bogus", cwd=project)
    assert res.returncode == 2 and "No such option" in res.stderr
    res = run_cli("run-stale", "--fresh", cwd=project)
    assert res.returncode == 2 and "--execute" in res.stderr
    res = run_cli("status", "nb.ipynb", "--notebook", "other.ipynb", cwd=project)
    assert res.returncode == 2 and "two notebooks given" in res.stderr


def test_json_before_the_command_on_a_typer_only_command(project):
    (project / "data.csv").write_text("a\n1\n")
    before = run_cli("--json", "watch", "data.csv", cwd=project)
    after = run_cli("watch", "data.csv", "--json", cwd=project)
    assert before.returncode == after.returncode == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert json.loads(before.stdout)["path"].endswith("data.csv")


def test_plan_carries_durations_and_fresh_run_restarts_and_runs_everything(project):
    path = project / "nb.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "import time\nbase = 2"
    nbformat.write(nb, path)
    plan = json.loads(run_cli("run-stale", "--json", cwd=project).stdout)
    assert [e["cell_id"] for e in plan["stale"]] == ["setup", "slow", "show"]
    durations = {e["cell_id"]: e["last_duration_s"] for e in plan["stale"]}
    assert durations["slow"] >= 0.3 and all(d >= 0 for d in durations.values())
    cost = plan["cost"]
    # the cells' last runs, plus the daemon's measured work per cell (warm-up's, here)
    per_cell = cost["per_cell_overhead_s"]
    assert per_cell["plan"] == per_cell["fresh"] >= 0
    expected = sum(durations.values()) + 3 * per_cell["plan"]
    assert cost["plan_s"] == pytest.approx(expected, abs=0.01)
    # a fresh run pays the kernel start on top of the same three cells
    assert cost["fresh_s"] > cost["restart_s"] > 0 and cost["fresh_is_cheaper"] is False
    table = run_cli("run-stale", cwd=project).stdout
    assert "last run)" in table and "to restart and run every cell" in table

    res = run_cli("run-stale", "--execute", "--fresh", cwd=project)
    assert res.returncode == 0, res.stderr
    assert (
        "restarted the kernel and ran every code cell" in res.stdout
        and "3 of 3 planned cell(s) ran (0 failed)" in res.stdout
    )
    assert "running plan on" in res.stderr  # progress while the 0.3 s cell ran
    assert run_cli("exec", "print(slow)", cwd=project).stdout.strip() == "3"
    after = json.loads(run_cli("run-stale", "--json", cwd=project).stdout)
    assert after["stale"] == [] and after["cost"]["plan_s"] == 0


def test_untraced_warm_up_resumes_tracing_and_plans_from_static_analysis(tmp_path):
    """``warm_tracing = false`` (ipyflow mode): warm-up runs untraced, later runs are traced."""
    root = make_project(tmp_path / "untraced", example=False)
    (root / "ipykeep.toml").write_text('dataflow = "ipyflow"\nwarm_tracing = false\n')
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("items = [1, 2]", id="make"),
        nbformat.v4.new_code_cell("items.append(3)", id="grow"),
        nbformat.v4.new_code_cell("total = sum(items)", id="total"),
        nbformat.v4.new_code_cell("other = 5", id="other"),
    ]
    nbformat.write(nb, root / "nb.ipynb")
    try:
        res = run_cli("start", "nb.ipynb", "--json", cwd=root)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["dataflow"] == "ipyflow"
        flag = "import ipyflow.singletons as s; print(s.flow().mut_settings.dataflow_enabled)"
        assert run_cli("exec", flag, cwd=root).stdout.strip() == "True"
        nb = nbformat.read(root / "nb.ipynb", as_version=4)
        nb.cells[0].source = "items = [10, 20]"
        nbformat.write(nb, root / "nb.ipynb")
        plan = json.loads(run_cli("run-stale", "--json", cwd=root).stdout)
        assert [e["cell_id"] for e in plan["stale"]] == ["make", "grow", "total"]
        assert run_cli("run-stale", "--execute", cwd=root).returncode == 0
        assert run_cli("exec", "print(total)", cwd=root).stdout.strip() == "33"
    finally:
        stop_daemon(root)
