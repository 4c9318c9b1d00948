"""The field test's oracle (benchmarks/field/fresh.py) starts its shells as a kernel starts.

A kernel shows a figure at the end of the cell that made it without ``%matplotlib inline``
(ipykernel's default backend); a notebook that drops the magic must look the same in the
oracle, or every later plot counts as changed by the edit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.field.fresh import FreshRunner

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])"


def test_a_figure_shows_the_same_with_or_without_matplotlib_inline(tmp_path: Path) -> None:
    async def shown() -> tuple[dict[str, Any], dict[str, Any]]:
        oracle = FreshRunner()
        await oracle.start()
        try:
            magic = await oracle.run(
                tmp_path, [("m", "%matplotlib inline", ()), ("p", PLOT, ())], {}
            )
            plain = await oracle.run(tmp_path, [("p", PLOT, ())], {})
        finally:
            await oracle.close()
        return magic, plain

    magic, plain = asyncio.run(shown())
    assert magic["failed"] is None and plain["failed"] is None
    with_magic, without = magic["cells"][-1], plain["cells"][-1]
    assert with_magic["shown"] == without["shown"]
