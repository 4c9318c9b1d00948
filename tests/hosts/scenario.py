"""The notebook a new user brings and the plan of ipykeep calls the stand-in model makes on it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat

from tests.hosts.standin import MARKER, Plan, Received, Step, kernel_id

NOTEBOOK = "analysis.ipynb"
#: What the plan's value call must come back with (``total * 3 + 1``, total = 1 + … + 100).
VALUE = "15151"
#: The last line of the raising cell's traceback (5050 % 97 == 6).
TRACEBACK_LINE = "ValueError: bad row 6"
LONG_HEAD = "row 0000 of the long print"
LONG_TAIL = "row 2999 of the long print"
#: The prompt every host is started with: the stand-in recognises its conversation by MARKER.
PROMPT = f"{MARKER}: open {NOTEBOOK} in ipykeep and run the analysis."


#: The plan's edit: the first cell builds a smaller frame, so the cells reading it go stale.
EDITED_LOAD = 'import pandas as pd\nframe = pd.DataFrame({"n": range(1, 11)})'


def write_notebook(root: Path) -> Path:
    """A small analysis: a pandas frame, a value, a 3,000-line print, a plot, a cell that raises."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(
            'import pandas as pd\nframe = pd.DataFrame({"n": range(1, 101)})', id="load"
        ),
        nbformat.v4.new_code_cell('total = int(frame["n"].sum())\ntotal', id="total"),
        nbformat.v4.new_code_cell(
            'for i in range(3000):\n    print(f"row {i:04d} of the long print")', id="long"
        ),
        nbformat.v4.new_code_cell(
            'import matplotlib.pyplot as plt\nplt.plot(frame["n"], frame["n"] ** 2)\nplt.show()',
            id="plot",
        ),
        nbformat.v4.new_code_cell('raise ValueError(f"bad row {total % 97}")', id="fails"),
    ]
    path = root / NOTEBOOK
    nbformat.write(nb, path)
    return path


def _kid(seen: list[Received]) -> dict[str, Any]:
    return {"kernel_id": kernel_id(seen)}


#: Index of each step's result in ``Plan.received``.
CREATE, RUN_FIRST, VALUE_CALL, RAISES, LONG, PLOT, EDIT_PROBE, EDIT, PLAN, SLOW, INTERRUPT = range(
    11
)


def _version(refusal: Received) -> str:
    """The version a refused edit names (its hint says ``retry with version=…``)."""
    found = re.search(r"version=([0-9a-f]+)", refusal.text)
    return found.group(1) if found else "unknown"


def _handle(seen: list[Received]) -> dict[str, Any]:
    found = re.search(r"\bc\d+\b", seen[SLOW].text)
    return {**_kid(seen), "handle": found.group(0) if found else "c0"}


def make_plan() -> Plan:
    return Plan(
        [
            Step("create_kernel", lambda seen: {"notebook": NOTEBOOK}),
            Step("run_cells", lambda seen: {**_kid(seen), "cells": ["load", "total"]}),
            Step("ipython", lambda seen: {**_kid(seen), "code": "total * 3 + 1"}),
            Step("run_cells", lambda seen: {**_kid(seen), "cells": ["fails"]}),
            Step("run_cells", lambda seen: {**_kid(seen), "cells": ["long"]}),
            Step("run_cells", lambda seen: {**_kid(seen), "cells": ["plot"]}),
            Step(
                "edit_cell",
                lambda seen: {**_kid(seen), "cell": "load", "source": EDITED_LOAD},
            ),
            Step(
                "edit_cell",
                lambda seen: {
                    **_kid(seen),
                    "cell": "load",
                    "source": EDITED_LOAD,
                    "version": _version(seen[EDIT_PROBE]),
                },
            ),
            Step("run_stale", lambda seen: _kid(seen)),
            Step(
                "ipython",
                lambda seen: {
                    **_kid(seen),
                    "code": "import time\ntime.sleep(70)",
                    "yield_time_ms": 500,
                },
            ),
            Step("interrupt", _handle),
        ]
    )
