"""``python -m benchmarks.field``: the third-party field test of staleness, three figures.

For each notebook of ``benchmarks/thirdparty`` (tutorials we did not write, with their
licenses) it draws seeded random edits of every kind in ``edits.KINDS``, and per edit and
dataflow mode: a kernel bound to the original notebook is warmed (every cell run), the edit is
written to the ``.ipynb`` on disk, ``run_stale(execute=True)`` runs, then

- **wrong values**: every global the kernel holds is compared (by digest) with a fresh
  top-to-bottom run of the edited notebook in a separate interpreter;
- **not settled**: the next plan must be empty or list only blocked cells;
- **cells run ÷ cells that had to run**: the edited cells plus every cell whose output or bound
  values, taken right after it in a fresh run, differ between the original and the edited
  notebook (hindsight from two fresh runs).

Per trial it also keeps the executed plan's ``cost``, the seconds the execute took and the
seconds a fresh run of the notebook takes in that mode (the kernel's last start and warm-up:
restart, then every cell, measured the same way), and reports how often the execute took longer
than a fresh run while the plan did not say ``fresh_is_cheaper`` (goal 0) and the estimate ÷
measured ratios.

Values a fresh run cannot reproduce (drawn from an unseeded generator: they differ between
two fresh runs of the original) are left out of both comparisons. An edit after which the
fresh run fails (a cell not tagged ``raises-exception`` raises) is discarded and counted.
Writes ``field.json`` and ``field.md`` under ``--out`` and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from benchmarks.field.digest import DIGEST
from benchmarks.field.edits import KINDS, Cell, Edit, draw_edit
from benchmarks.field.fresh import FreshRunner
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.staleness.analysis import analyze_source
from ipykeep.staleness.service import StalenessService

THIRDPARTY = Path(__file__).resolve().parents[1] / "thirdparty"
#: the field test's notebooks (``statsmodels_examples.ipynb`` is the warm-up benchmark's)
NOTEBOOKS = (
    "statsmodels_ols.ipynb",
    "statsmodels_glm.ipynb",
    "statsmodels_glm_weights.ipynb",
    "statsmodels_wls.ipynb",
    "statsmodels_quantile_regression.ipynb",
    "pdsh_fancy_indexing.ipynb",
    "pdsh_data_indexing.ipynb",
    "pdsh_line_plots.ipynb",
    "wwtp_data_structures.ipynb",
    "wwtp_data_science_tools.ipynb",
)
MODES = ("static", "ipyflow")


@dataclass
class Trial:
    notebook: str
    mode: str
    kind: str
    what: str
    ran: list[str]
    needed: list[str]
    wrong: dict[str, list[str | None]]
    extra: list[str]
    settled: bool
    after_plan: list[str]
    warm_settled: bool
    execute_ok: bool
    seconds: float
    errors: list[str] = field(default_factory=list)
    #: the edit undone on the same kernel: cells run, settled, globals unlike the original's,
    #: cells the next plan says only a fresh run makes right
    undo: dict[str, Any] = field(default_factory=dict)
    #: cells the next plan reports as needing a fresh run (``needs_fresh``): values that differ
    #: from a fresh run with these are reported, not silent
    needs_fresh: list[str] = field(default_factory=list)
    #: the executed plan's ``cost`` (its estimate against a fresh run, ``fresh_is_cheaper``)
    cost: dict[str, Any] = field(default_factory=dict)
    #: seconds ``run_stale(execute=True)`` took (the plan's execute alone)
    execute_s: float | None = None
    #: seconds a fresh run of the notebook took in this mode: the kernel's start and warm-up
    #: (restart, then every cell run) as last measured for this notebook
    fresh_s: float | None = None

    @property
    def silent_wrong(self) -> bool:
        return bool(self.wrong) and not self.needs_fresh

    @property
    def undo_unclean(self) -> bool:
        """The undo left values unlike the original's without saying so, or did not settle."""
        u = self.undo
        return bool(u) and ((bool(u["wrong"]) and not u.get("needs_fresh")) or not u["settled"])


def read_cells(path: Path) -> list[Cell]:
    book = nbformat.read(path, as_version=4)
    return [
        Cell(c["id"], c["source"], tuple(c.get("metadata", {}).get("tags", ())))
        for c in book.cells
        if c["cell_type"] == "code"
    ]


def write_cells(path: Path, cells: Iterable[Cell], keep_from: Path | None = None) -> None:
    """Write ``cells`` as the notebook; outputs of cells whose source is unchanged are kept
    from ``keep_from`` (as an editor saving the notebook keeps them)."""
    old: dict[str, Any] = {}
    if keep_from is not None and keep_from.exists():
        for c in nbformat.read(keep_from, as_version=4).cells:
            old[c["id"]] = c
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    for c in cells:
        kept = old.get(c.cell_id)
        if kept is not None and kept["source"] == c.source:
            cell = kept
        else:
            cell = nbformat.v4.new_code_cell(c.source)
            cell["id"] = c.cell_id
            if c.tags:
                cell["metadata"]["tags"] = list(c.tags)
        nb.cells.append(cell)
    tmp = path.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)


def writes_of(cells: Iterable[Cell]) -> dict[str, list[str]]:
    out = {}
    for c in cells:
        a = analyze_source(c.source)
        out[c.cell_id] = sorted(a.defs | a.mutates)
    return out


def as_job(cells: Iterable[Cell]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_id, c.source, c.tags) for c in cells]


@dataclass
class Baseline:
    """Two fresh runs of the original notebook: per cell what it did, and what differs
    between the two runs (not reproducible)."""

    run: dict[str, Any]
    cells: dict[str, dict[str, Any]]
    unrepro_final: set[str]
    unrepro_values: dict[str, set[str]]
    unrepro_shown: set[str]


def baseline(one: dict[str, Any], two: dict[str, Any]) -> Baseline:
    a = {c["id"]: c for c in one["cells"]}
    b = {c["id"]: c for c in two["cells"]}
    unrepro_final = {n for n in one["final"] if one["final"][n] != two["final"].get(n)}
    values = {
        cid: {n for n in a[cid]["values"] if a[cid]["values"][n] != b[cid]["values"].get(n)}
        for cid in a
    }
    shown = {cid for cid in a if a[cid]["shown"] != b[cid]["shown"]}
    return Baseline(one, a, unrepro_final, values, shown)


def unreproducible(base: Baseline, edit: Edit) -> set[str]:
    """The names a fresh run of the edited notebook cannot reproduce: the original's, and a
    renamed one's new name (``selection_renamed = X[indices]`` after an unseeded draw)."""
    out = set(base.unrepro_final)
    if edit.renamed is not None and edit.renamed[0] in out:
        out.add(edit.renamed[1])
    return out


def needed_cells(base: Baseline, edited: dict[str, Any], edit: Edit) -> list[str]:
    """The edited cells plus every cell whose output or bound values, right after it in a
    fresh run, differ between the original and the edited notebook."""
    out = []
    for c in edited["cells"]:
        cid = c["id"]
        b = base.cells.get(cid)
        if cid in edit.edited or b is None or b["ok"] != c["ok"]:
            out.append(cid)
            continue
        if c["shown"] != b["shown"] and cid not in base.unrepro_shown:
            out.append(cid)
            continue
        names = set(c["changed"]) | set(b["changed"])
        names -= base.unrepro_values.get(cid, set()) | base.unrepro_final
        for n in names:
            x, y = c["values"].get(n, "<absent>"), b["values"].get(n, "<absent>")
            if x != y and not (x is None and y is None):
                out.append(cid)
                break
    return out


class Field:
    def __init__(self, root: Path, fresh: FreshRunner, engine: Engine) -> None:
        self.root = root
        self.fresh = fresh
        self.engine = engine
        self.count = 0
        #: (notebook, mode) -> (kernel id, notebook path)
        self.kernels: dict[tuple[str, str], tuple[str, Path]] = {}
        #: (notebook, mode) -> seconds its last kernel start and warm-up took
        self.fresh_s: dict[tuple[str, str], float] = {}

    @property
    def layer(self) -> StalenessService:
        return next(o for o in self.engine.observers if isinstance(o, StalenessService))

    async def kernel_digest(self, kernel_id: str) -> dict[str, str | None]:
        """Every global's digest in the kernel, written to a file (a reply is capped)."""
        dest = self.root / f"digest-{kernel_id}.json"
        code = DIGEST + (
            "\nimport json as _j\n"
            f"with open({str(dest)!r}, 'w') as _f:\n"
            "    _j.dump({n: v[0] for n, v in _field_globals().items()}, _f)\n"
            "del _j, _f, _field_globals"
        )
        rec = await self.engine.execute(code, kernel_id=kernel_id)
        if rec.state != "ok" or not dest.exists():
            raise RuntimeError(f"digest failed in the kernel: {rec.state} {rec.output.text[-500:]}")
        out = dict(json.loads(dest.read_text()))
        dest.unlink()
        return out

    async def _kernel(self, name: str, mode: str, original: list[Cell]) -> tuple[str, Path, bool]:
        """The kernel of ``name`` in ``mode``, bound to the original notebook and warm;
        started (warm-up: every cell run) when there is none."""
        held = self.kernels.get((name, mode))
        if held is not None:
            return held[0], held[1], True
        self.count += 1
        directory = self.root / f"{Path(name).stem}-{mode}-{self.count}"
        directory.mkdir()
        path = directory / "nb.ipynb"
        write_cells(path, original)
        t0 = time.perf_counter()
        rec = await self.engine.create_kernel(notebook=str(path), dataflow=mode)
        warm = await self.layer.run_stale(kernel_id=rec.kernel_id)
        self.fresh_s[(name, mode)] = time.perf_counter() - t0
        self.kernels[(name, mode)] = (rec.kernel_id, path)
        return rec.kernel_id, path, not warm.stale and not warm.conditional

    async def drop_kernel(self, name: str, mode: str) -> None:
        held = self.kernels.pop((name, mode), None)
        if held is not None:
            await self.engine.close_kernel(kernel_id=held[0])
            shutil.rmtree(held[1].parent, ignore_errors=True)

    async def _apply(
        self,
        kernel_id: str,
        path: Path,
        cells: Iterable[Cell],
        final: dict[str, Any],
        unrepro: set[str],
    ) -> tuple[Any, float, bool, list[str], dict[str, list[Any]], list[str], list[str]]:
        """Write ``cells`` as the notebook, execute the plan; the result, the seconds the execute
        took, whether the next plan is settled (and what it lists), the globals that differ
        from ``final``, the extra ones, the cells the next plan says need a fresh run."""
        write_cells(path, cells, keep_from=path)
        t0 = time.perf_counter()
        res = await self.layer.run_stale(kernel_id=kernel_id, execute=True)
        execute_s = time.perf_counter() - t0
        after = await self.layer.run_stale(kernel_id=kernel_id)
        settled = not after.stale and not after.conditional
        after_plan = [
            f"{e['cell_id']}: " + "; ".join(r["message"] for r in e["reasons"])
            for e in list(after.stale) + list(after.conditional)
        ]
        kernel = await self.kernel_digest(kernel_id)
        wrong = {
            n: [kernel.get(n, "<missing>"), d]
            for n, d in final.items()
            if d is not None and n not in unrepro and kernel.get(n, "<missing>") != d
        }
        needs_fresh = [
            e["cell_id"] for e in after.blocked if any(r.get("needs_fresh") for r in e["reasons"])
        ]
        extra = sorted(set(kernel) - set(final))
        return res, execute_s, settled, after_plan, wrong, extra, needs_fresh

    async def trial(
        self,
        name: str,
        mode: str,
        original: list[Cell],
        edit: Edit,
        edited: dict[str, Any],
        base: Baseline,
        needed: list[str],
    ) -> Trial:
        """One edit in one mode on the notebook's kernel, then the edit undone (the original
        written back and its plan executed): a kernel whose undo does not give the original's
        values and an empty plan is replaced by a new one for the next trial."""
        kernel_id, path, warm_settled = await self._kernel(name, mode, original)
        t0 = time.perf_counter()
        res, execute_s, settled, after_plan, wrong, extra, needs_fresh = await self._apply(
            kernel_id, path, edit.cells, edited["final"], unreproducible(base, edit)
        )
        seconds = time.perf_counter() - t0
        results = res.batch.results if res.batch else []
        trial = Trial(
            name,
            mode,
            edit.kind,
            edit.what,
            [r.cell_id for r in results],
            needed,
            wrong,
            extra,
            settled,
            after_plan,
            warm_settled,
            res.ok,
            round(seconds, 2),
            [f"{r.cell_id}: {r.error}"[:200] for r in results if r.error],
            needs_fresh=needs_fresh,
            cost=dict(res.cost or {}),
            execute_s=round(execute_s, 3),
            fresh_s=round(self.fresh_s[(name, mode)], 3),
        )
        undo, _, undo_settled, undo_plan, undo_wrong, _, undo_fresh = await self._apply(
            kernel_id, path, original, base.run["final"], base.unrepro_final
        )
        trial.undo = {
            "ran": len(undo.batch.results) if undo.batch else 0,
            "settled": undo_settled,
            "wrong": sorted(undo_wrong),
            "plan": undo_plan,
            "needs_fresh": undo_fresh,
        }
        if undo_wrong or undo_fresh or not undo_settled or not undo.ok or wrong or not settled:
            await self.drop_kernel(name, mode)
        return trial


def leftovers(trials: list[Trial]) -> dict[int, list[str]]:
    """Per trial (by position), the names the kernel holds and a fresh run does not that the
    trial added: those left over by an earlier trial on the same kernel (a renamed name, and
    the new name once the rename is undone) are not counted again."""
    known: dict[tuple[str, str], set[str]] = {}
    out = {}
    for k, t in enumerate(trials):
        seen = known.setdefault((t.notebook, t.mode), set())
        new = sorted(set(t.extra) - seen)
        if new:
            out[k] = new
        seen.update(t.extra)
        if t.kind == "rename":  # undone: the new name stays behind
            seen.add(t.what.split(" -> ")[1].split(" ")[0])
    return out


def _spread(values: list[float]) -> dict[str, float] | None:
    """Median and the 10th/90th percentiles (nearest rank), min and max."""
    if not values:
        return None
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * len(v)))], 2)

    return {"median": at(0.5), "p10": at(0.1), "p90": at(0.9), "min": v[0], "max": v[-1]}


def estimates(ts: list[Trial]) -> dict[str, Any]:
    """The plan's cost estimate against what was measured, over the trials whose plan ran
    cells: how often the execute took longer than a fresh run while the plan did not say a
    fresh run is cheaper (goal 0), how often it said so, and the estimate ÷ measured ratios."""
    timed = [t for t in ts if t.ran and t.cost and t.execute_s and t.fresh_s]
    slower = [t for t in timed if t.execute_s > t.fresh_s]  # type: ignore[operator]
    said = [t for t in timed if t.cost.get("fresh_is_cheaper")]
    return {
        "timed": len(timed),
        "execute_slower_than_fresh": len(slower),
        "slower_not_said": sum(1 for t in slower if not t.cost.get("fresh_is_cheaper")),
        "said_fresh_is_cheaper": len(said),
        "said_but_execute_faster": sum(1 for t in said if t not in slower),
        "plan_estimate_over_execute": _spread(
            [round(t.cost["plan_s"] / t.execute_s, 3) for t in timed if t.execute_s]
        ),
        "fresh_estimate_over_fresh": _spread(
            [round(t.cost["fresh_s"] / t.fresh_s, 3) for t in timed if "fresh_s" in t.cost]
        ),
    }


def summarize(trials: list[Trial]) -> dict[str, Any]:
    left = leftovers(trials)
    index = {id(t): k for k, t in enumerate(trials)}

    def fig(ts: list[Trial]) -> dict[str, Any]:
        ran = sum(len(t.ran) for t in ts)
        need = sum(len(t.needed) for t in ts)
        return {
            "trials": len(ts),
            "wrong_values": sum(1 for t in ts if t.silent_wrong),
            "reported_needs_fresh": sum(
                1 for t in ts if t.needs_fresh or (t.undo and t.undo.get("needs_fresh"))
            ),
            "not_settled": sum(1 for t in ts if not t.settled),
            "cells_run": ran,
            "cells_needed": need,
            "ratio": round(ran / need, 2) if need else None,
            "undo_unclean": sum(1 for t in ts if t.undo_unclean),
            "warm_unsettled": sum(1 for t in ts if not t.warm_settled),
            "leftover_names": sum(1 for t in ts if index[id(t)] in left),
        }

    out: dict[str, Any] = {"total": {}, "per_notebook": {}, "per_kind": {}, "estimate": {}}
    for mode in sorted({t.mode for t in trials}):
        ts = [t for t in trials if t.mode == mode]
        out["total"][mode] = fig(ts)
        out["estimate"][mode] = estimates(ts)
        for nb in sorted({t.notebook for t in ts}):
            out["per_notebook"].setdefault(nb, {})[mode] = fig([t for t in ts if t.notebook == nb])
        for kind in KINDS:
            sel = [t for t in ts if t.kind == kind]
            if sel:
                out["per_kind"].setdefault(kind, {})[mode] = fig(sel)
    return out


def table(summary: dict[str, Any]) -> str:
    modes = sorted(summary["total"])
    head = "| notebook / edit kind | " + " | ".join(
        f"{m}: trials · wrong · not settled · run/needed" for m in modes
    )
    lines = [head + " |", "|---" * (len(modes) + 1) + "|"]

    def row(label: str, figs: dict[str, Any]) -> str:
        cells = []
        for m in modes:
            f = figs.get(m)
            cells.append(
                "–"
                if f is None
                else f"{f['trials']} · {f['wrong_values']} · {f['not_settled']} · "
                f"{f['cells_run']}/{f['cells_needed']} = {f['ratio']}×"
            )
        return f"| {label} | " + " | ".join(cells) + " |"

    for nb, figs in summary["per_notebook"].items():
        lines.append(row(nb, figs))
    for kind, figs in summary["per_kind"].items():
        lines.append(row(f"*{kind}*", figs))
    lines.append(row("**total**", summary["total"]))
    lines += ["", "| cost estimate | " + " | ".join(modes) + " |", "|---" * (len(modes) + 1) + "|"]
    est = summary.get("estimate", {})
    for key, label in (
        ("timed", "trials whose plan ran cells"),
        ("execute_slower_than_fresh", "execute took longer than a fresh run"),
        ("slower_not_said", "… and the plan did not say fresh_is_cheaper (goal 0)"),
        ("said_fresh_is_cheaper", "plan said fresh_is_cheaper"),
        ("said_but_execute_faster", "… but the execute was faster"),
        ("plan_estimate_over_execute", "plan estimate ÷ measured execute"),
        ("fresh_estimate_over_fresh", "fresh estimate ÷ measured fresh run"),
    ):
        vals = [est.get(m, {}).get(key) for m in modes]
        shown = [
            "–"
            if v is None
            else f"{v['median']} ({v['p10']}–{v['p90']}, max {v['max']})"
            if isinstance(v, dict)
            else str(v)
            for v in vals
        ]
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ipykeep-field-"))
    (root / ".git").mkdir()
    engine = compose(
        ProjectPaths(root), Config(idle_timeout=0, checkpoints=False, prestart_kernels=0)
    ).engine
    fresh = FreshRunner()
    await fresh.start()
    runner = Field(root, fresh, engine)
    trials: list[Trial] = []
    discarded: list[dict[str, str]] = []
    failures: list[dict[str, str]] = []
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    try:
        books = {}
        for name in args.notebooks:
            original = read_cells(THIRDPARTY / name)
            work = root / f"fresh-{Path(name).stem}"
            work.mkdir()
            writes = writes_of(original)
            one = await fresh.run(work, as_job(original), writes)
            two = await fresh.run(work, as_job(original), writes)
            if one["failed"]:
                raise RuntimeError(f"{name}: a fresh run of the original fails: {one['failed']}")
            bound = {c["id"]: {n: tuple(v) for n, v in c["bound"].items()} for c in one["cells"]}
            rng = random.Random(f"{args.seed}:{name}")
            kinds = list(KINDS)
            rng.shuffle(kinds)
            books[name] = (original, work, baseline(one, two), bound, rng, kinds)
        # one edit per notebook per round, so a time limit leaves every notebook as covered
        for round_no in range(args.trials):
            for name, (original, work, base, bound, rng, kinds) in books.items():
                if deadline is not None and time.monotonic() > deadline:
                    break
                for attempt in range(4):  # a kind the notebook does not offer: the next one
                    kind = kinds[(round_no + attempt) % len(kinds)]
                    edit = draw_edit(rng, original, bound, kind)
                    if edit is None:
                        continue
                    edited = await fresh.run(work, as_job(edit.cells), writes_of(edit.cells))
                    if not edited["failed"]:
                        break
                    discarded.append(
                        {"notebook": name, "kind": kind, "what": edit.what, **edited["failed"]}
                    )
                else:
                    continue
                needed = needed_cells(base, edited, edit)
                for mode in args.modes:
                    try:
                        t = await runner.trial(name, mode, original, edit, edited, base, needed)
                    except Exception as exc:  # a dead kernel: recorded, and the next one is new
                        failures.append(
                            {"notebook": name, "mode": mode, "what": edit.what, "error": repr(exc)}
                        )
                        print(f"{name} [{mode}] harness error: {exc!r}", file=sys.stderr)
                        await runner.drop_kernel(name, mode)
                        continue
                    trials.append(t)
                    flag = ("WRONG " if t.wrong else "") + ("UNSETTLED " if not t.settled else "")
                    print(
                        f"{name} [{mode}] {edit.kind}: {edit.what[:80]} — ran {len(t.ran)}, "
                        f"needed {len(needed)} {flag}({t.seconds} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                save(out, args, trials, discarded, failures)
    finally:
        for name, mode in list(runner.kernels):
            await runner.drop_kernel(name, mode)
        await fresh.close()
        await engine.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    summary = save(out, args, trials, discarded, failures)
    print(table(summary))
    return 0


def save(
    out: Path,
    args: argparse.Namespace,
    trials: list[Trial],
    discarded: list[dict[str, str]],
    failures: list[dict[str, str]],
) -> dict[str, Any]:
    summary = summarize(trials)
    command = "python -m benchmarks.field " + " ".join(
        [f"--trials {args.trials}", f"--seed {args.seed}", "--modes " + " ".join(args.modes)]
        + ([f"--minutes {args.minutes:g}"] if args.minutes else [])
        + (
            ["--notebooks " + " ".join(args.notebooks)]
            if tuple(args.notebooks) != NOTEBOOKS
            else []
        )
    )
    data = {
        "command": command,
        "summary": summary,
        "discarded": discarded,
        "harness_errors": failures,
        "trials": [asdict(t) for t in trials],
    }
    (out / "field.json").write_text(json.dumps(data, indent=1))
    render(out, command, trials, discarded, failures)
    return summary


def render(
    out: Path,
    command: str,
    trials: list[Trial],
    discarded: list[dict[str, str]],
    failures: list[dict[str, str]],
) -> str:
    """``field.md``: the command, the table, then every trial with a wrong value, a plan not
    settled, an undo not clean or names left over."""
    summary = summarize(trials)
    left = leftovers(trials)
    flagged = [
        t
        for t in trials
        if t.wrong or not t.settled or t.needs_fresh or t.undo_unclean or t.undo.get("needs_fresh")
    ]
    md = [
        f"`{command}`",
        "",
        table(summary),
        "",
        f"{len(discarded)} edits discarded (the fresh run of the edited notebook failed); "
        f"{len(failures)} trials lost to a harness error.",
        "",
    ]
    for t in flagged:
        md.append(
            f"- {t.notebook} [{t.mode}] {t.kind}: {t.what} — wrong {t.wrong}; "
            f"next plan {t.after_plan}; undo {t.undo}"
        )
    for k, names in left.items():
        t = trials[k]
        md.append(f"- left over: {t.notebook} [{t.mode}] {t.kind}: {t.what} — {names}")
    text = "\n".join(md) + "\n"
    (out / "field.md").write_text(text)
    return text


def report(path: Path) -> str:
    """Render ``field.md`` again from a saved ``field.json`` (its directory)."""
    data = json.loads(path.read_text())
    trials = [Trial(**t) for t in data["trials"]]
    return render(
        path.parent, data["command"], trials, data["discarded"], data.get("harness_errors", [])
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.field", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--trials", type=int, default=16, help="edits per notebook (each run in every mode)"
    )
    p.add_argument("--seed", type=int, default=40, help="the seed edits are drawn with")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--notebooks", nargs="+", choices=NOTEBOOKS, default=list(NOTEBOOKS))
    p.add_argument(
        "--minutes", type=float, default=0, help="stop drawing edits after this long (0: no limit)"
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/field"))
    p.add_argument(
        "--report",
        type=Path,
        metavar="FIELD_JSON",
        help="run nothing: print the report of a saved field.json (and rewrite its field.md)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print(report(args.report))
        return 0
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
