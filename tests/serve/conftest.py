"""One daemon with a served kernel per test module, driven through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ARTIFACTS = REPO / "test-artifacts"


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["IPYKEEP_IDLE_TIMEOUT"] = "0"
    # Serving does not depend on the dataflow mode; plain kernels start faster.
    env["IPYKEEP_DATAFLOW"] = "static"
    env.update(extra)
    return env


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ipykeep", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
    )


def make_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# served"),
        nbformat.v4.new_code_cell("base = 1\nprint('base is', base)"),
        nbformat.v4.new_code_cell("print('agent_var is', agent_var)"),
    ]
    nbformat.write(nb, str(path))


@dataclass
class Served:
    root: Path
    notebook: Path
    url: str
    port: int
    token: str
    daemon_pid: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rpc(self, method: str, **params: Any) -> Any:
        from ipykeep.client.connection import DaemonClient, find_daemon

        desc = find_daemon(self.root)
        assert desc is not None, "the daemon is gone"
        return DaemonClient(desc).call(method, **params)


def start_daemon(root: Path) -> int:
    """The project's daemon, started the way every client starts it."""
    from ipykeep.client.connection import ensure_daemon

    env = cli_env()
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return ensure_daemon(root).descriptor.pid
    finally:
        os.environ.clear()
        os.environ.update(old)


def stop_daemon(root: Path, pid: int) -> None:
    from ipykeep.client.connection import DaemonClient, find_daemon, pid_alive

    desc = find_daemon(root)
    if desc is not None:
        try:
            DaemonClient(desc).call("shutdown")
        except Exception:
            pass
    deadline = time.monotonic() + 30
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, 9)


@contextlib.contextmanager
def serving(
    tmp_path_factory: pytest.TempPathFactory, write_notebook: Callable[[Path], None]
) -> Iterator[Served]:
    """A project with the notebook ``write_notebook`` writes, its kernel served, for a module."""
    root = tmp_path_factory.mktemp("serve") / "proj"
    (root / ".git").mkdir(parents=True)
    nb = root / "analysis.ipynb"
    write_notebook(nb)
    pid = start_daemon(root)
    try:
        res = run_cli("start", str(nb), "--serve", "--json", cwd=root)
        assert res.returncode == 0, res.stderr
        rec = json.loads(res.stdout)
        url = urlsplit(rec["served_url"])
        token = parse_qs(url.query)["token"][0]
        yield Served(root, nb, rec["served_url"], int(url.port or 0), token, pid)
    finally:
        stop_daemon(root, pid)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory, make_notebook) as served:
        yield served
