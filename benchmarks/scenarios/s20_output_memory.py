"""Output memory: the peak RSS a notebook cell printing 100 lines of 1 MB costs the daemon and
its kernel, as ``ipykeep run`` runs it (``run_cells`` over the daemon's RPC, outputs written).

Each side is a fresh daemon with one notebook kernel; the peaks of both processes are started
afresh (``/proc/<pid>/clear_refs``) just before the cell runs, so the growth is the cell's
alone. The baseline is the size printed: a process holding the output once grows by about 1×.
With ``IPYKEEP_BENCH_BEFORE=<checkout>`` that build's daemon (its sources first on
``PYTHONPATH``, its kernel set up by it) runs the same cell, alternating with this one.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.context import RunContext, before_checkout, variant_env
from benchmarks.notebooks import write_notebook
from benchmarks.sessions import daemon, make_project
from benchmarks.timing import Metric, Stats, Target, single

NAME = "output_memory"
TITLE = "20. Output memory"

MB = 2**20


def code(lines: int, line_bytes: int) -> str:
    return f"for i in range({lines}):\n    print('y' * {line_bytes})"


def _status(pid: int, field: str) -> int:
    """A size from ``/proc/<pid>/status`` (``VmHWM`` the peak resident size), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for process {pid}")


def _reset_peak(pid: int) -> int:
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _status(pid, "VmRSS")


def _peak_growth(ctx: RunContext, variant: str, src: str) -> tuple[float, float]:
    """(daemon, kernel) peak RSS growth in MB while the cell ran, in a fresh daemon."""
    root = make_project(ctx.workdir(f"{NAME}-{variant or 'this'}"))
    nb = write_notebook(root / "flood.ipynb", [("setup", "a = 1"), ("flood", src)])
    saved = {k: os.environ.get(k) for k in variant_env(variant)}
    os.environ.update(variant_env(variant))
    try:
        with daemon(root) as client:
            _restore(saved)  # only the daemon's start needs the variant
            rec = client.call("create_kernel", notebook=str(nb), warm=False, dataflow="static")
            kernel = int(rec["pid"])
            client.call("run_cells", cells=["setup"], kernel_id=rec["kernel_id"])
            before = {pid: _reset_peak(pid) for pid in (client.descriptor.pid, kernel)}
            batch = client.call("run_cells", cells=["flood"], kernel_id=rec["kernel_id"])
            if not batch["ok"]:
                raise RuntimeError(f"the printing cell failed ({variant or 'this'}): {batch}")
            grown = [(_status(pid, "VmHWM") - rss) / MB for pid, rss in before.items()]
            return grown[0], grown[1]
    finally:
        _restore(saved)


def _restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


async def run(ctx: RunContext) -> list[Metric]:
    if not Path("/proc/self/clear_refs").exists():
        raise RuntimeError("this scenario reads and resets peaks through /proc (Linux)")
    lines, line_bytes = ctx.size(100, 100, smoke=5), 1_000_000
    src = code(lines, line_bytes)
    printed = lines * (line_bytes + 1) / MB
    variants = [""] + (["before"] if before_checkout() is not None and not ctx.smoke else [])
    grown: dict[str, tuple[list[float], list[float]]] = {v: ([], []) for v in variants}
    for _ in range(ctx.reps(3, 1)):
        for variant in variants:
            d, k = _peak_growth(ctx, variant, src)
            grown[variant][0].append(d)
            grown[variant][1].append(k)
    label = f"peak RSS growth, a notebook cell printing {lines} lines of 1 MB"
    extra = {"printed_mb": round(printed, 1), "lines": lines}
    target = None if ctx.smoke else Target("ratio", "<=", 1.5)
    metrics = [
        Metric(
            NAME,
            f"{label}: daemon",
            "MB",
            Stats.of(grown[""][0]),
            "ipykeep daemon",
            "output printed",
            single(printed),
            target,
            extra,
        ),
        Metric(
            NAME,
            f"{label}: kernel",
            "MB",
            Stats.of(grown[""][1]),
            "its kernel",
            "output printed",
            single(printed),
            target,
            extra,
        ),
    ]
    if "before" in grown:
        for i, process in enumerate(("daemon", "kernel")):
            metrics.append(
                Metric(
                    NAME,
                    f"{label}: {process}, this build vs IPYKEEP_BENCH_BEFORE",
                    "MB",
                    Stats.of(grown[""][i]),
                    "this build",
                    "before",
                    Stats.of(grown["before"][i]),
                    None,
                    extra,
                )
            )
    return metrics
