"""The benchmark harness end to end, as a smoke test: every scenario runs and yields numbers.

``--smoke`` keeps each scenario to one repetition at small sizes and to the sides it cannot do
without, so a broken scenario fails here in seconds; ``--quick`` and full runs measure.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.scenarios import ALL

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.kernel
@pytest.mark.timeout(300)
def test_quick_run_reports_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=280)
    except subprocess.TimeoutExpired:
        # SIGTERM, not SIGKILL: the harness then stops every daemon and kernel it started.
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=60)
        pytest.fail(f"the smoke run took over 280 s:\n{stderr[-3000:]}")
    assert proc.returncode == 0, stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert data["quick"] is True
    assert set(data["scenarios"]) == {s.NAME for s in ALL}
    for name, scenario in data["scenarios"].items():
        assert scenario["error"] is None, f"{name}: {scenario['error']}"
        assert scenario["metrics"], f"{name} reported no metrics"
        for metric in scenario["metrics"]:
            stats = metric["value"]
            assert all(math.isfinite(stats[k]) for k in ("median", "min", "max")), metric
            assert stats["min"] <= stats["median"] <= stats["max"], metric
            if metric["base"] is not None:
                assert metric["ratio"] is not None and math.isfinite(metric["ratio"]), metric
    assert (out / "ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| Scenario |" in (out / "results.md").read_text()
    assert "| Scenario |" in stdout
