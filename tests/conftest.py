"""Shared fixtures: temporary projects, the CLI run as a user runs it, daemon clean-up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["IPYKEEP_IDLE_TIMEOUT"] = "0"
    env.pop("IPYKEEP_DATAFLOW", None)
    # No spare kernels for the suite's daemons (two workers on small machines); the tests of
    # pre-started kernels turn them on.
    env["IPYKEEP_PRESTART_KERNELS"] = "0"
    env.update(extra)
    return env


def run_cli(
    *args: str,
    cwd: Path,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ipykeep", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        input=input,
    )


def make_project(root: Path, *, example: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)
    if example:
        for name in ("01_eda.ipynb", "sales.csv"):
            shutil.copy(EXAMPLES / name, root / name)
    return root


def stop_daemon(root: Path) -> None:
    from ipykeep.client.connection import DaemonClient, find_daemon, pid_alive

    desc = find_daemon(root)
    if desc is None:
        return
    try:
        DaemonClient(desc).call("shutdown")
    except Exception:
        pass
    import time

    deadline = time.monotonic() + 20
    while pid_alive(desc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def tmp_project(tmp_path: Path):
    root = make_project(tmp_path / "proj")
    yield root
    stop_daemon(root)


#: The longest test files (1–3 min each on 2 cores). They start first, so that neither xdist
#: worker is left running one of them alone at the end of the suite.
LONGEST_FIRST = (
    "test_real_hosts.py",
    "test_benchmarks_quick.py",
    "test_staleness_thirdparty.py",
    "test_load.py",
    "test_serve_browser.py",
    "test_checkpoints_cli.py",
    "test_checkpoints_thirdparty.py",
    "test_shared_document_browser.py",
    "test_staleness_tutorials.py",
    "test_protocol_eras.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(rank))
    )  # stable: the rest keep their order
