"""How a restore's time is put against re-running its cells (pure units)."""

from __future__ import annotations

from ipykeep.api.checkpoints import RestoreReport, than_rerunning
from ipykeep.cli.checkpoints import render_listing


def test_a_restore_slower_than_re_running_says_so_with_the_figure() -> None:
    assert than_rerunning(2.25) == "2.25 s quicker than re-running"
    assert than_rerunning(-1.5) == "1.50 s slower than re-running"
    report = RestoreReport(
        kernel_id="k1",
        restored=[{"index": 0, "run_s": 0.5}],
        restore_s=2.0,
        saved_s=-1.5,
    )
    text = report.summary()
    assert "1.50 s slower than re-running" in text and "quicker" not in text, text
    listing = render_listing(
        {
            "kernel_id": "k1",
            "enabled": True,
            "cells": [],
            "named": [],
            "last_restore": {"restored": [{}], "restore_s": 2.0, "rerun": [], "saved_s": -1.5},
        }
    )
    assert "1.50 s slower than re-running them" in listing and "0.00 s" not in listing


def test_the_listing_names_a_checkpointed_cells_values() -> None:
    cell = {"cell_id": "c1", "index": 1, "restorable": True, "cheap": False, "bytes": 28}
    listing = render_listing(
        {"kernel_id": "k1", "enabled": True, "cells": [{**cell, "values": ["small"]}], "named": []}
    )
    assert "cell 1 (c1): checkpointed, 28 B: small" in listing, listing
