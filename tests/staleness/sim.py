"""A small simulated notebook + file system driving a StalenessTracker without a kernel."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from ipykeep.staleness.analysis import analyze_source
from ipykeep.staleness.models import FileStamp, NotebookCell, Observed, Plan
from ipykeep.staleness.tracker import StalenessTracker


@dataclass
class Sim:
    sources: list[tuple[str, str]]  # (cell_id, source); "md:" prefix makes a markdown cell
    files: dict[str, int] = field(default_factory=dict)  # path -> version (mtime and size)
    tracker: StalenessTracker = field(default_factory=StalenessTracker)
    #: cell id -> files the cell reads at run time (what the audit hook would report)
    reads: dict[str, list[str]] = field(default_factory=dict)
    writes: dict[str, list[str]] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    #: the kernel's working directory: when set, ``stat`` names files as the engine's does
    #: (joined to it and normalised) and ``files`` is keyed by those names
    root: str | None = None
    #: whether the file-tracking probe reports ``writes`` (else only path literals show them)
    report_writes: bool = False
    #: cell id -> the namespace evidence its runs report (what the in-kernel probe would see)
    observed: dict[str, Observed] = field(default_factory=dict)

    def canon(self, path: str) -> str:
        return path if self.root is None else posixpath.normpath(posixpath.join(self.root, path))

    def stat(self, path: str) -> FileStamp | None:
        full = self.canon(path)
        v = self.files.get(full)
        return None if v is None else FileStamp(full, 1_000 + v, 10 + v)

    def cells(self) -> list[NotebookCell]:
        out = []
        for i, (cid, src) in enumerate(self.sources):
            kind = "markdown" if src.startswith("md:") else "code"
            out.append(NotebookCell(cid, i, kind, src[3:] if kind == "markdown" else src))
        return out

    def index(self, cid: str) -> int:
        return [c for c, _ in self.sources].index(cid)

    def source(self, cid: str) -> str:
        return dict(self.sources)[cid]

    def run(self, *cids: str) -> None:
        for cid in cids:
            written = [self.canon(p) for p in self.writes.get(cid, [])]
            for path in written:
                self.files[path] = self.files.get(path, 0) + 1
            stamps = [
                self.stat(p) or FileStamp.missing(self.canon(p)) for p in self.reads.get(cid, [])
            ]
            outcome = "failed" if cid in self.failing else "ok"
            self.tracker.record_cell_run(
                cid,
                self.index(cid),
                self.source(cid),
                outcome,
                stamps,
                stat=self.stat,
                files_written=written if self.report_writes else (),
                observed=self.observed.get(cid),
            )

    def run_all(self) -> None:
        self.run(*[c.cell_id for c in self.cells() if c.cell_type == "code"])

    def run_plan(self) -> Plan:
        plan = self.plan()
        self.run(*plan.cell_ids)
        return plan

    def scratch(self, source: str, observed: Observed | None = None) -> None:
        self.tracker.record_scratch(source, observed=observed)

    def edit(self, cid: str, source: str) -> None:
        self.sources = [(c, source if c == cid else s) for c, s in self.sources]

    def insert(self, at: int, cid: str, source: str) -> None:
        self.sources.insert(at, (cid, source))

    def delete(self, cid: str) -> None:
        self.sources = [(c, s) for c, s in self.sources if c != cid]

    def move(self, cid: str, to: int) -> None:
        item = self.sources.pop(self.index(cid))
        self.sources.insert(to, item)

    def touch(self, path: str) -> None:
        full = self.canon(path)
        self.files[full] = self.files.get(full, 0) + 1

    def plan(self) -> Plan:
        return self.tracker.plan(self.cells(), self.stat)

    def kinds(self) -> dict[str, set[str]]:
        """cell id -> reason kinds, for the planned cells."""
        return {e.cell_id: set(e.kinds) for e in self.plan().stale}

    def blocked(self) -> dict[str, set[str]]:
        return {e.cell_id: set(e.kinds) for e in self.plan().blocked}


PIPELINE = [
    ("load", 'import pandas as pd\ndf = pd.read_csv("data.csv")'),
    ("clean", "clean = df.dropna()"),
    ("features", "feats = clean.assign(z=clean.a * 2)"),
    ("report", "summary = feats.describe()\nprint(summary)"),
]


def pipeline(**kw: object) -> Sim:
    sim = Sim(list(PIPELINE), files={"data.csv": 1}, **kw)  # type: ignore[arg-type]
    sim.reads.setdefault("load", ["data.csv"])
    return sim


__all__ = ["Sim", "pipeline", "analyze_source"]
