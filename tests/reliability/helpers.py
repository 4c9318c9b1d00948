"""Shared pieces of the reliability suite: a project with a running daemon, RPC calls, processes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat

from ipykeep.api.errors import IpykeepError
from ipykeep.client.connection import (
    DaemonClient,
    find_daemon,
    pid_alive,  # noqa: F401 (re-exported for the tests)
)
from tests.conftest import cli_env, make_project, run_cli

STATIC = cli_env(IPYKEEP_DATAFLOW="static")


def write_notebook(path: Path, sources: list[str], ids: list[str] | None = None) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src, id=ids[i] if ids else f"c{i}")
        for i, src in enumerate(sources)
    ]
    nbformat.write(nb, path)


def start_project(
    root: Path, sources: list[str], *, name: str = "nb.ipynb", env: dict[str, str] | None = None
) -> DaemonClient:
    make_project(root, example=False)
    write_notebook(root / name, sources)
    res = run_cli("start", name, "--json", cwd=root, env=env or STATIC)
    assert res.returncode == 0, res.stderr
    desc = find_daemon(root)
    assert desc is not None
    return DaemonClient(desc)


def call(client: DaemonClient, method: str, **params: Any) -> Any:
    return client.call(method, **params)


def error_of(client: DaemonClient, method: str, **params: Any) -> IpykeepError:
    try:
        client.call(method, **params)
    except IpykeepError as exc:
        return exc
    raise AssertionError(f"{method} did not fail")


def kernel_pid(client: DaemonClient) -> int:
    (kernel,) = client.call("list_kernels")
    return int(kernel["pid"])


def wait_until(predicate: Any, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def notebook_outputs(path: Path) -> dict[str, list[dict[str, Any]]]:
    data = json.loads(path.read_text())
    return {c["id"]: c.get("outputs", []) for c in data["cells"] if c["cell_type"] == "code"}
