"""Load: 10 concurrent official MCP clients (stdio) on one kernel and on five.

Every call must come back with exactly its own output, and every execute reply must be read:
the shell reader once missed the wake-up of replies under load, and each execution was then
finished from iopub after a grace (the fixed ~1.5 s calls the load benchmark showed). Each
client makes 50 calls (about 25 s per case on 2 cores); ``IPYKEEP_LOAD_CALLS`` changes that.
Latency is measured by ``python -m benchmarks.load``, not asserted here.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from benchmarks.load import run_load
from tests.conftest import stop_daemon

CALLS = int(os.environ.get("IPYKEEP_LOAD_CALLS", "50"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("kernels", "dataflow"), [(1, "ipyflow"), (5, "static")])
def test_every_concurrent_call_returns_its_own_output(
    tmp_path: Path, kernels: int, dataflow: str
) -> None:
    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    try:
        outcomes = asyncio.run(
            run_load(root, clients=10, calls=CALLS, kernels=kernels, dataflow=dataflow)
        )
    finally:
        stop_daemon(root)
    assert len(outcomes) == 10 * CALLS
    wrong = [(o.tag, o.state, o.error, o.text[:200]) for o in outcomes if not o.correct]
    assert not wrong, wrong[:5]
    assert len({o.kernel_id for o in outcomes}) == kernels
    log = (root / ".ipykeep" / "run" / "daemon.log").read_text()
    assert "no execute_reply" not in log, [
        line for line in log.splitlines() if "no execute_reply" in line
    ][:3]
