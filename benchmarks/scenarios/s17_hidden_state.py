"""The cost of observing process-wide settings and cache fills, per cell, against not doing it.

In a separate interpreter, a real IPython shell runs compute cells of a numpy / pandas /
matplotlib notebook with the namespace probe installed as the engine installs it, and calls
``statemon.collect()`` after each cell, as the engine does. Two sides alternate round by round
on the same cells: the probe as shipped (settings fingerprinted, their readers found, the
code's uses recorded for cache fills), and the same probe with those parts switched off (the
settings module out of ``sys.modules``, the code's names found by a plain ``ast.walk`` that
records nothing else, as the probe did before it observed settings). Reported: the probe's time
per cell on each side, and cell plus probe on each side (the per-cell overhead the user sees).
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

from benchmarks.context import RunContext
from benchmarks.timing import Metric, Stats, Target

NAME = "hidden_state"
TITLE = "17. Fingerprinting process-wide settings"

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from IPython.core.interactiveshell import InteractiveShell
    from ipykeep.kernel.inkernel import STATEMON, install_expression
    eval(install_expression(STATEMON), {})
    statemon = sys.modules[STATEMON.name]
    reach = sys.modules["_ipykeep_reach"]
    settings = sys.modules["_ipykeep_settings"]
    scan = reach._scan

    def names_only(tree):
        import ast
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add(node.name.split(".")[0])
                if node.asname:
                    names.add(node.asname)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                names.update(node.names)
        return names

    ip = InteractiveShell.instance()
    ip.run_cell("import numpy as np, pandas as pd, matplotlib", store_history=False)
    ip.run_cell("matplotlib.use('Agg')\\nimport matplotlib.pyplot as plt", store_history=False)
    statemon.install()
    statemon.collect()
    rows, rounds = int(sys.argv[1]), int(sys.argv[2])
    cells = [
        f"a = np.arange({rows}, dtype=float)",
        "b = a * 2.5 + 1",
        "s = float(b.sum())",
        f"df = pd.DataFrame({{'g': np.arange({rows}) % 7, 'x': a}})",
        "agg = df.groupby('g')['x'].mean()",
        "total = 0\\nfor i in range(20000):\\n    total += i",
        "report = f'mean {agg.iloc[0]:.3f} of {s}'",
        "fig, ax = plt.subplots()\\nline, = ax.plot(a[:100])\\nplt.close(fig)",
    ]
    sides = {"observed": {"cell": [], "probe": []}, "off": {"cell": [], "probe": []}}
    for r in range(rounds):
        order = ("observed", "off") if r % 2 == 0 else ("off", "observed")
        for side in order:
            if side == "off":
                sys.modules.pop("_ipykeep_settings", None)
                reach._scan = names_only
            else:
                sys.modules["_ipykeep_settings"] = settings
                reach._scan = scan
            for code in cells:
                t0 = time.perf_counter()
                assert ip.run_cell(code, store_history=True).success, code
                t1 = time.perf_counter()
                statemon.collect()
                t2 = time.perf_counter()
                if r > 0:  # the first round warms both sides
                    sides[side]["cell"].append(t1 - t0)
                    sides[side]["probe"].append(t2 - t1)
    print(json.dumps(sides))
    """
)


async def _measure(rows: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SCRIPT,
        str(rows),
        str(rounds),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the hidden-state benchmark failed: {err.decode()[-2000:]}")
    result: dict[str, dict[str, list[float]]] = json.loads(out.decode().strip().splitlines()[-1])
    return result


CELLS = 8  # the notebook's cells, run once per round


def _ms_per_cell(samples: list[float]) -> Stats:
    """Milliseconds per cell, one sample per round (the round's cells taken together)."""
    rounds = [samples[i : i + CELLS] for i in range(0, len(samples), CELLS)]
    return Stats.of([sum(r) * 1000 / len(r) for r in rounds])


async def run(ctx: RunContext) -> list[Metric]:
    rows = ctx.size(200_000, 50_000, smoke=1_000)
    rounds = ctx.reps(21, 5) + 1
    sides = await _measure(rows, rounds)
    on, off = sides["observed"], sides["off"]
    per_cell_on = [c + p for c, p in zip(on["cell"], on["probe"], strict=True)]
    per_cell_off = [c + p for c, p in zip(off["cell"], off["probe"], strict=True)]
    return [
        Metric(
            NAME,
            "namespace probe per cell, settings and uses observed",
            "ms",
            _ms_per_cell(on["probe"]),
            baseline="probe without them",
            base=_ms_per_cell(off["probe"]),
            extra={"cells": len(on["probe"]), "rows": rows},
        ),
        Metric(
            NAME,
            "compute cell + probe, settings and uses observed",
            "ms",
            _ms_per_cell(per_cell_on),
            baseline="cell + probe without them",
            base=_ms_per_cell(per_cell_off),
            target=Target("ratio", "<=", 1.1),
        ),
    ]
