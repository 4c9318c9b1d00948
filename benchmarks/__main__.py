"""``python -m benchmarks [--quick | --smoke] [--out DIR] [--only NAME ...]``: run every scenario.

Prints a Markdown table and writes ``results.json``, ``results.md`` and ``ratios.png`` under
``--out`` (default ``benchmarks/results/<timestamp>/``). A scenario that fails is reported as
failed and the others still run; the exit status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.context import Pool, RunContext
from benchmarks.report import ScenarioOutcome, markdown_table, write_chart, write_json
from benchmarks.scenarios import ALL

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = [s.NAME for s in ALL]
    p = argparse.ArgumentParser(
        prog="python -m benchmarks", description="ipykeep vs baselines, side by side."
    )
    p.add_argument("--quick", action="store_true", help="each scenario once, at small sizes")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="--quick with one repetition and only the sides each scenario needs: "
        "checks that every scenario runs (the test suite uses it)",
    )
    p.add_argument(
        "--out", type=Path, help="results directory (default: benchmarks/results/<timestamp>)"
    )
    p.add_argument(
        "--only",
        nargs="+",
        choices=names,
        metavar="NAME",
        help=f"run only these: {', '.join(names)}",
    )
    return p.parse_args(argv)


async def run_all(args: argparse.Namespace, out: Path) -> list[ScenarioOutcome]:
    tmp = Path(tempfile.mkdtemp(prefix="ipykeep-bench-"))
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pool = Pool(tmp=tmp, log_dir=logs)
    ctx = RunContext(quick=args.quick or args.smoke, out=out, tmp=tmp, pool=pool, smoke=args.smoke)
    outcomes: list[ScenarioOutcome] = []
    try:
        for scenario in ALL:
            if args.only and scenario.NAME not in args.only:
                continue
            print(f"running {scenario.TITLE} …", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            outcome = ScenarioOutcome(scenario.NAME, scenario.TITLE, 0.0)
            try:
                outcome.metrics = await scenario.run(ctx)
            except Exception as exc:  # one broken scenario must not hide the others
                outcome.error = f"{type(exc).__name__}: {exc}"
                (logs / f"{scenario.NAME}.error.txt").write_text(traceback.format_exc())
            outcome.seconds = time.perf_counter() - t0
            print(
                f"  done in {outcome.seconds:.1f} s"
                + (f" — FAILED: {outcome.error}" if outcome.error else ""),
                file=sys.stderr,
                flush=True,
            )
            outcomes.append(outcome)
    finally:
        await pool.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return outcomes


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = (args.out or RESULTS / time.strftime("%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # SIGTERM (a timeout, a CI cancel) unwinds like Ctrl-C, so every daemon and kernel is stopped.
    signal.signal(signal.SIGTERM, _interrupt)
    os.environ["IPYKEEP_IDLE_TIMEOUT"] = "0"  # daemons started here never expire kernels mid-run
    os.environ.pop("IPYKEEP_DATAFLOW", None)
    t0 = time.perf_counter()
    outcomes = asyncio.run(run_all(args, out))
    total = time.perf_counter() - t0
    table = markdown_table(outcomes)
    mode = "smoke test" if args.smoke else "quick (small sizes)" if args.quick else "full"
    header = f"ipykeep benchmarks, {mode}: {total:.0f} s on {os.cpu_count()} CPU(s)\n\n"
    (out / "results.md").write_text(header + table + "\n")
    write_json(out / "results.json", outcomes, quick=args.quick or args.smoke, total_s=total)
    write_chart(out / "ratios.png", outcomes)
    print(header + table)
    print(f"\nresults: {out}/results.json, results.md, ratios.png", file=sys.stderr)
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
