"""Result building without kernels: each channel stands alone and stays within its budget."""

from __future__ import annotations

import asyncio
import json

from ipykeep.mcp_server.images import ImageLimits
from ipykeep.mcp_server.results import ResultBuilder

BUILDER = ResultBuilder(ImageLimits(1024, 200_000), max_chars=2500)


def _plan(n: int) -> dict:
    reason = {"kind": "upstream", "message": "uses x{i} from cell {j} (edited)"}
    return {
        "kernel_id": "k1",
        "executed": False,
        "stale": [
            {
                "cell_id": f"cell{i:03d}",
                "index": i,
                "produces": [f"x{i}"],
                "reasons": [{**reason, "message": reason["message"].format(i=i, j=i - 1)}],
            }
            for i in range(n)
        ],
        "blocked": [],
        "fresh": [],
    }


def test_small_plan_carries_every_reason() -> None:
    res = asyncio.run(BUILDER.build("stale", _plan(5)))
    stale = res.structured_content["stale"]
    assert [e["cell_id"] for e in stale] == [f"cell{i:03d}" for i in range(5)]
    assert stale[3]["reasons"] == [{"kind": "upstream", "message": "uses x3 from cell 2 (edited)"}]
    assert "reasons_cut" not in res.structured_content


def test_large_plan_stays_within_budget_and_names_every_cell() -> None:
    res = asyncio.run(BUILDER.build("stale", _plan(200)))
    structured = res.structured_content
    assert len(json.dumps(structured)) < BUILDER.listing_chars + 8_000  # ids of the cut entries
    assert [e["cell_id"] for e in structured["stale"]] == [f"cell{i:03d}" for i in range(200)]
    assert structured["reasons_cut"] > 0
    assert "reasons" in structured["stale"][0] and "reasons" not in structured["stale"][-1]
    text = res.content[0].text
    assert len(text) <= BUILDER.listing_chars + 200 and "cell000" in text


def test_interrupt_and_kernel_results_are_self_sufficient() -> None:
    res = asyncio.run(
        BUILDER.build(
            "interrupt",
            {"kernel_id": "k1", "action": "nothing_running", "message": "nothing is running"},
        )
    )
    assert res.structured_content["message"] == "nothing is running"
