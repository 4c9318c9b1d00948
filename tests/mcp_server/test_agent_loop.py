"""The loop an agent runs on a notebook, over stdio: bind, look, edit on disk, re-run what is stale,
inspect, close. One notebook kernel for the module; the last test closes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from tests.mcp_server.harness import NOTEBOOK, McpSession, envelope, text_of

pytestmark = pytest.mark.kernel


def _ok(res):  # type: ignore[no-untyped-def]
    assert not res.is_error, text_of(res)
    return res


@pytest.fixture(scope="module")
def nb_kernel(mcp: McpSession, project: Path) -> Iterator[str]:
    res = _ok(mcp.tool("create_kernel", {"notebook": NOTEBOOK}))
    rec = res.structured_content
    assert rec["notebook"] == str(project / NOTEBOOK)
    assert rec["warm"]["finished"] and rec["warm"]["done"] == 3 and not rec["warm"].get("failed")
    yield rec["kernel_id"]


def test_create_kernel_returns_the_bound_kernel(
    mcp: McpSession, nb_kernel: str, project: Path
) -> None:
    again = _ok(mcp.tool("create_kernel", {"notebook": str(project / NOTEBOOK)}))
    assert again.structured_content["kernel_id"] == nb_kernel


def test_list_cells_after_warm_up(mcp: McpSession, nb_kernel: str) -> None:
    res = _ok(mcp.tool("list_cells", {"kernel_id": nb_kernel}))
    assert res.structured_content["counts"] == {"ok": 3, "markdown": 1}
    text = text_of(res)
    for cid in ("load", "total", "note", "double"):
        assert cid in text


def test_run_cells_by_id_and_index(mcp: McpSession, nb_kernel: str) -> None:
    res = _ok(mcp.tool("run_cells", {"kernel_id": nb_kernel, "cells": ["total", 3]}))
    summary = res.structured_content
    assert summary["ok"] is True
    assert [r["cell_id"] for r in summary["results"]] == ["total", "double"]
    assert "9" in text_of(res) and "18" in text_of(res)
    bad = envelope(mcp.tool("run_cells", {"kernel_id": nb_kernel, "cells": ["nope"]}))
    assert bad["code"] == "unknown_cell"


def test_run_cells_replies_before_the_notebook_write_which_follows(
    mcp: McpSession, nb_kernel: str, project: Path
) -> None:
    res = _ok(mcp.tool("run_cells", {"kernel_id": nb_kernel, "cells": ["double"]}))
    write = res.structured_content["write"]
    assert (
        write["pending"] is True
        and write["updated"] == ["double"]
        and write.get("written") is False
    )
    count = res.structured_content["results"][0]["execution_count"]

    def on_disk() -> int | None:
        nb = nbformat.read(project / NOTEBOOK, as_version=4)
        return next(c.execution_count for c in nb.cells if c.get("id") == "double")

    deadline = time.monotonic() + 10  # written within write_delay_ms (200 ms) of the reply
    while on_disk() != count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert on_disk() == count


def test_publish_gives_a_stable_token_protected_url(mcp: McpSession, nb_kernel: str) -> None:
    import urllib.error
    import urllib.request

    first = _ok(mcp.tool("publish", {"kernel_id": nb_kernel, "cells": {"total": "the total"}}))
    url = json.loads(text_of(first))["url"]
    again = json.loads(text_of(_ok(mcp.tool("publish", {"kernel_id": nb_kernel}))))["url"]
    assert again == url and "token=" in url and url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=30) as page:
        assert page.status == 200
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(
            url.split("?")[0].replace("/lab/tree/", "/api/contents/"), timeout=30
        )


def test_full_agent_loop(mcp: McpSession, nb_kernel: str, project: Path) -> None:
    # the agent edits the notebook with its own file tools
    path = project / NOTEBOOK
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = "total = int(df['x'].sum()) + 1\nprint(total)"
    nbformat.write(nb, path)

    cells = _ok(mcp.tool("list_cells", {"kernel_id": nb_kernel}))
    assert cells.structured_content["counts"].get("stale", 0) >= 1

    plan = _ok(mcp.tool("run_stale", {"kernel_id": nb_kernel}))
    planned = plan.structured_content["stale"]
    assert [e["cell_id"] for e in planned] == ["total", "double"], text_of(
        plan
    )  # `load` untouched: minimal
    kinds = [[r["kind"] for r in e["reasons"]] for e in planned]
    assert "source_changed" in kinds[0] and "upstream" in kinds[1]
    assert plan.structured_content["executed"] is False
    assert "source_changed" in text_of(plan)

    ran = _ok(mcp.tool("run_stale", {"kernel_id": nb_kernel, "execute": True}))
    assert ran.structured_content["executed"] is True and ran.structured_content["ok"] is True
    assert [r["cell_id"] for r in ran.structured_content["results"]] == ["total", "double"]
    assert "20" in text_of(ran)  # (9 + 1) * 2

    at_rest = _ok(mcp.tool("run_stale", {"kernel_id": nb_kernel}))
    assert at_rest.structured_content["stale"] == [], text_of(at_rest)

    summary = json.loads(text_of(_ok(mcp.tool("inspect", {"kernel_id": nb_kernel, "name": "df"}))))
    assert summary["kind"] == "dataframe" and summary["shape"] == [3, 2]
    assert [c["name"] for c in summary["columns"]] == ["x", "y"]

    listing = json.loads(text_of(_ok(mcp.tool("namespace", {"kernel_id": nb_kernel}))))
    names = {e["name"] for e in listing["entries"]}
    assert {"df", "total", "doubled"} <= names

    watched = _ok(mcp.tool("watch_file", {"kernel_id": nb_kernel, "path": "data.csv"}))
    assert "data.csv" in text_of(watched)

    closed = _ok(mcp.tool("close_kernel", {"kernel_id": nb_kernel}))
    assert closed.structured_content["state"] == "closed"
    assert _ok(mcp.tool("list_kernels")).structured_content["kernels"] == []
