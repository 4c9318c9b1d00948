"""Result building without kernels: each channel stands alone and stays within its budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult, TextContent

from ipykeep.mcp_server.images import ImageLimits
from ipykeep.mcp_server.results import ResultBuilder


def _first_text(res: CallToolResult) -> str:
    block = res.content[0]
    assert isinstance(block, TextContent), block
    return block.text


BUILDER = ResultBuilder(ImageLimits(1024, 200_000), max_chars=2500)


def _plan(n: int) -> dict[str, Any]:
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
    text = _first_text(res)
    assert len(text) <= BUILDER.listing_chars + 200 and "cell000" in text


def test_interrupt_and_kernel_results_are_self_sufficient() -> None:
    res = asyncio.run(
        BUILDER.build(
            "interrupt",
            {"kernel_id": "k1", "action": "nothing_running", "message": "nothing is running"},
        )
    )
    assert res.structured_content["message"] == "nothing is running"


def _png(path: Path) -> str:
    image = pytest.importorskip("PIL.Image")
    image.new("RGB", (8, 8), "red").save(path)
    return str(path)


def _execution(tmp_path: Path, notices: list[str] | None = None) -> dict[str, Any]:
    return {
        "handle": "c1",
        "kernel_id": "k1",
        "kind": "scratch",
        "state": "ok",
        "cursor": 1,
        "output": {
            "text": "42\n",
            "images": [
                {
                    "mime": "image/png",
                    "path": _png(tmp_path / "plot.png"),
                    "uri": "ipykeep://artifacts/k1/plot.png",
                }
            ],
        },
        "notices": notices,
    }


def test_a_result_with_images_sends_text_and_images_only(tmp_path: Path) -> None:
    res = asyncio.run(BUILDER.build("execution", _execution(tmp_path)))
    assert res.structured_content is None  # Codex would forward it alone, without the image
    assert [b.type for b in res.content] == ["text", "image"]
    assert "42" in _first_text(res)
    assert "ipykeep://artifacts/k1/plot.png" in _first_text(res)


def test_a_notice_reaches_the_agent_once() -> None:
    from ipykeep.mcp_server.results import NoticeLedger

    ledger = NoticeLedger()
    kernel: dict[str, Any] = {"kernel_id": "k1", "notices": ["restored 3 cell(s)"]}
    assert ledger.fresh("kernel", kernel) == ["restored 3 cell(s)"]
    again: dict[str, Any] = {"kernel_id": "k1", "notices": ["restored 3 cell(s)"]}
    assert ledger.fresh("kernels", [again]) == [] and again["notices"] == []
    taken: dict[str, Any] = {
        "kernel_id": "k1",
        "notices": ["restored 3 cell(s)", "kernel restarted"],
    }
    assert ledger.fresh("execution", taken) == ["kernel restarted"]
    assert taken["notices"] == ["kernel restarted"]
    # the engine holds no notice after a taking record: the same text later is a new event
    later: dict[str, Any] = {"kernel_id": "k1", "notices": ["restored 3 cell(s)"]}
    assert ledger.fresh("execution", later) == ["restored 3 cell(s)"]
    other: dict[str, Any] = {"kernel_id": "k2", "notices": ["kernel restarted"]}
    assert ledger.fresh("kernel", other) == ["kernel restarted"]
