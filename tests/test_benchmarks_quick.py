"""The benchmark harness end to end, at smoke-test sizes: every scenario yields numbers."""

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
@pytest.mark.timeout(420)
def test_quick_run_reports_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
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
    assert "| Scenario |" in proc.stdout
