"""Tracker-level cases mirroring ``tests/staleness/test_staleness_acceptance.py`` without kernels:
files written by one cell and read by another, one file named two ways, mutation through
notebook functions and methods, and failed producers. Each table row is one notebook shape."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ipykeep.staleness.models import Plan, Reason
from tests.staleness.sim import Sim

ROOT = "/proj"


def only_reason(plan: Plan, cell_id: str, kind: str) -> Reason:
    entry = plan.entry(cell_id)
    assert entry is not None, f"{cell_id} is not planned: {plan.cell_ids}"
    found = [r for r in entry.reasons if r.kind == kind]
    assert len(found) == 1, f"{cell_id}: expected one {kind} reason, got {entry.reasons}"
    return found[0]


def at_rest(sim: Sim) -> bool:
    plan = sim.plan()
    return plan.is_empty and not plan.blocked


# ----------------------------------------------------------------------------- 1. written file


@dataclass(frozen=True)
class FileEdge:
    writer: str
    writer_edited: str
    reader: str
    #: the file-tracking probe reports the write (else only the writer's path literal shows it)
    report_writes: bool
    #: the file as the run-time read hook names it, when the reader opens it
    read_at_run_time: bool = True


FILE_EDGES = {
    "literal write, literal read": FileEdge(
        'feats.to_csv("out.csv")',
        'feats.to_csv("out.csv", index=False)',
        'back = pd.read_csv("out.csv")',
        report_writes=False,
    ),
    "literal write, literal read, no run-time read": FileEdge(
        'feats.to_csv("out.csv")',
        'feats.to_csv("out.csv", index=False)',
        'back = pd.read_csv("out.csv")',
        report_writes=False,
        read_at_run_time=False,
    ),
    "literal write with ./, bare literal read": FileEdge(
        'feats.to_csv("./out.csv")',
        'feats.to_csv("./out.csv", index=False)',
        'back = open("out.csv").read()',
        report_writes=False,
    ),
    "write reported by the probe, path in a variable": FileEdge(
        "feats.to_csv(OUT)",
        "feats.to_csv(OUT, index=False)",
        "back = pd.read_csv(OUT)",
        report_writes=True,
    ),
    "literal write also reported by the probe": FileEdge(
        'feats.to_csv("out.csv")',
        'feats.to_csv("out.csv", index=False)',
        'back = pd.read_csv("out.csv")',
        report_writes=True,
    ),
}


def _file_edge_sim(edge: FileEdge) -> Sim:
    sim = Sim(
        [
            ("cfg", 'import pandas as pd\nOUT = "out.csv"'),
            ("load", 'df = pd.read_csv("data.csv")'),
            ("feats", "feats = df.assign(z=df.a * 2)"),
            ("save", edge.writer),
            ("other", "k = 7"),
            ("back", edge.reader),
            ("use", "top = back.head()"),
        ],
        files={f"{ROOT}/data.csv": 1},
        root=ROOT,
        report_writes=edge.report_writes,
    )
    sim.reads["load"] = ["data.csv"]
    sim.writes["save"] = ["out.csv"]
    if edge.read_at_run_time:
        sim.reads["back"] = [f"{ROOT}/out.csv"]  # the hook names files absolute
    return sim


@pytest.mark.parametrize("name", list(FILE_EDGES))
def test_edited_writer_replans_the_file_reader(name: str) -> None:
    edge = FILE_EDGES[name]
    sim = _file_edge_sim(edge)
    sim.run_all()
    assert at_rest(sim)

    sim.edit("save", edge.writer_edited)
    plan = sim.plan()
    assert sim.kinds() == {"save": {"source_changed"}, "back": {"upstream"}, "use": {"upstream"}}
    via_file = only_reason(plan, "back", "upstream")
    assert via_file.cells == ("save",)
    assert via_file.path == f"{ROOT}/out.csv"
    assert via_file.symbols == ()
    assert plan.cell_ids == ("save", "back", "use")
    sim.run_plan()
    assert at_rest(sim)


@pytest.mark.parametrize("name", list(FILE_EDGES))
def test_writer_rerun_for_its_input_replans_the_file_reader(name: str) -> None:
    sim = _file_edge_sim(FILE_EDGES[name])
    sim.run_all()
    sim.touch("data.csv")
    plan = sim.plan()
    assert sim.kinds() == {
        "load": {"file_changed"},
        "feats": {"upstream"},
        "save": {"upstream"},
        "back": {"upstream"},
        "use": {"upstream"},
    }
    via_file = only_reason(plan, "back", "upstream")
    assert (via_file.cells, via_file.path) == (("save",), f"{ROOT}/out.csv")
    assert "(stale)" in via_file.message
    sim.run_plan()
    assert at_rest(sim)


@pytest.mark.parametrize("name", list(FILE_EDGES))
def test_writer_run_alone_leaves_the_reader_with_a_changed_file(name: str) -> None:
    sim = _file_edge_sim(FILE_EDGES[name])
    sim.run_all()
    sim.edit("save", FILE_EDGES[name].writer_edited)
    sim.run("save")  # the writer is fresh now; the file it rewrote is the reader's news
    assert sim.kinds() == {"back": {"file_changed"}, "use": {"upstream"}}
    assert only_reason(sim.plan(), "back", "file_changed").path == f"{ROOT}/out.csv"


@pytest.mark.parametrize("literal", ["out.csv", "./out.csv", f"{ROOT}/out.csv"])
def test_new_writer_cell_not_yet_run_orders_the_reader(literal: str) -> None:
    sim = _file_edge_sim(FILE_EDGES["literal write, literal read"])
    sim.run_all()
    # only its source tells that it writes the file: the literal, however it is spelled
    sim.insert(4, "save2", f'feats.head(1).to_csv("{literal}")')
    plan = sim.plan()
    assert sim.kinds() == {"save2": {"never_run"}, "back": {"upstream"}, "use": {"upstream"}}
    via_file = only_reason(plan, "back", "upstream")
    assert (via_file.cells, via_file.path) == (("save2",), f"{ROOT}/out.csv")


def test_reader_above_the_writer_does_not_wait_for_it() -> None:
    edge = FILE_EDGES["literal write, literal read"]
    sim = _file_edge_sim(edge)
    sim.run_all()
    sim.move("back", 1)
    sim.move("use", 2)
    sim.run_all()  # the writer, now below, rewrites the file after the reader read it
    assert sim.kinds() == {"back": {"file_changed"}, "use": {"upstream"}}
    sim.run_plan()
    assert at_rest(sim)
    sim.edit("save", edge.writer_edited)
    # only a writer above a reader orders it: the edit below is not the reader's input
    assert sim.kinds() == {"save": {"source_changed"}}


# ----------------------------------------------------------------------------- 2. one path


PATH_SPELLINGS = {
    "bare literal": 'df = pd.read_csv("data.csv")',
    "./ literal": 'df = pd.read_csv("./data.csv")',
    "literal with ..": 'df = pd.read_csv("sub/../data.csv")',
    "absolute literal": f'df = pd.read_csv("{ROOT}/data.csv")',
    "open() literal": 'df = open("data.csv").read()',
}


def _one_file_sim(source: str) -> Sim:
    sim = Sim(
        [("load", "import pandas as pd\n" + source), ("use", "n = len(df)")],
        files={f"{ROOT}/data.csv": 1},
        root=ROOT,
    )
    sim.reads["load"] = [f"{ROOT}/data.csv"]
    return sim


@pytest.mark.parametrize("name", list(PATH_SPELLINGS))
def test_literal_and_runtime_read_give_one_file_reason(name: str) -> None:
    sim = _one_file_sim(PATH_SPELLINGS[name])
    sim.run_all()
    assert at_rest(sim)
    sim.touch("data.csv")
    plan = sim.plan()
    assert sim.kinds() == {"load": {"file_changed"}, "use": {"upstream"}}
    changed = only_reason(plan, "load", "file_changed")
    assert changed.path == f"{ROOT}/data.csv"
    assert "changed" in changed.message


@pytest.mark.parametrize("name", list(PATH_SPELLINGS))
def test_deleted_file_named_two_ways_gives_one_reason(name: str) -> None:
    sim = _one_file_sim(PATH_SPELLINGS[name])
    sim.run_all()
    del sim.files[f"{ROOT}/data.csv"]
    changed = only_reason(sim.plan(), "load", "file_changed")
    assert changed.path == f"{ROOT}/data.csv"
    assert "was deleted" in changed.message


# ----------------------------------------------------------------------------- 3-4. mutation


@dataclass(frozen=True)
class Mutation:
    #: a cell defining the function or class
    definition: str
    #: the producer of the value, the call changing it (before and after the edit)
    producer: str
    call: str
    call_edited: str
    name: str


MUTATIONS = {
    "function appends to its argument": Mutation(
        "def bump(xs):\n    xs.append(0)",
        "feats = [5]",
        "bump(feats)",
        "bump(feats)\nbump(feats)",
        "feats",
    ),
    "function argument passed by keyword": Mutation(
        "def bump(xs):\n    xs.append(0)",
        "feats = [5]",
        "bump(xs=feats)",
        "bump(xs=feats)\nbump(xs=feats)",
        "feats",
    ),
    "function sets an item of its argument": Mutation(
        "def bump(xs):\n    xs[0] = 1",
        "feats = [5]",
        "bump(feats)",
        "bump(feats)\nfeats.sort()",
        "feats",
    ),
    "method sets an attribute of self": Mutation(
        "class M:\n    k = 1\n    def tune(self, k):\n        self.k = k",
        "model = M()",
        "model.tune(2)",
        "model.tune(3)",
        "model",
    ),
    "method appends to an attribute of self": Mutation(
        "class M:\n    def __init__(self):\n        self.hist = []\n    def log(self, v):\n"
        "        self.hist.append(v)\n    @property\n    def k(self):\n"
        "        return len(self.hist)",
        "model = M()",
        "model.log(2)",
        "model.log(2)\nmodel.log(3)",
        "model",
    ),
}


def _mutation_sim(m: Mutation) -> Sim:
    return Sim(
        [
            ("define", m.definition),
            ("make", m.producer),
            ("peek", f"first = repr({m.name})"),  # reads the value before the change
            ("change", m.call),
            ("read1", f"r1 = str({m.name})"),
            ("other", "unrelated = 3"),
            ("read2", f"r2 = repr({m.name})"),
        ]
    )


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_edited_mutating_call_rebuilds_the_producer_first(name: str) -> None:
    m = MUTATIONS[name]
    sim = _mutation_sim(m)
    sim.run_all()
    assert at_rest(sim)

    sim.edit("change", m.call_edited)
    plan = sim.plan()
    assert sim.kinds() == {
        "make": {"restores"},
        "change": {"source_changed"},
        "read1": {"upstream"},
        "read2": {"upstream"},
    }
    assert plan.cell_ids[0] == "make"
    restores = only_reason(plan, "make", "restores")
    assert (restores.cells, restores.symbols) == (("change",), (m.name,))
    for reader in ("read1", "read2"):
        up = only_reason(plan, reader, "upstream")
        assert (up.cells, up.symbols) == (("change",), (m.name,))
    sim.run_plan()
    assert at_rest(sim)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_rerun_of_mutating_call_alone_is_repaired_from_its_producer(name: str) -> None:
    m = MUTATIONS[name]
    sim = _mutation_sim(m)
    sim.run_all()
    sim.run("change")  # changed the value a second time
    kinds = sim.kinds()
    assert kinds["make"] == {"restores"}
    assert "state_changed" in kinds["change"]
    sim.run_plan()
    assert at_rest(sim)


NON_MUTATING = {
    "function only reads its argument": (
        "def total(xs):\n    return sum(xs)",
        "feats = [5]",
        "t = total(feats)",
        "t = total(feats) + 1",
    ),
    "method only reads self": (
        "class M:\n    k = 1\n    def get(self):\n        return self.k",
        "feats = M()",
        "t = feats.get()",
        "t = feats.get() + 1",
    ),
}


@pytest.mark.parametrize("name", list(NON_MUTATING))
def test_reading_call_does_not_rebuild_the_producer(name: str) -> None:
    definition, producer, call, edited = NON_MUTATING[name]
    sim = Sim(
        [
            ("define", definition),  # above its use: a fresh run must not fail
            ("make", producer),
            ("change", call),
            ("read", "r = repr(feats)"),
            ("use", "u = t * 2"),
        ]
    )
    sim.run_all()
    sim.edit("change", edited)
    assert sim.kinds() == {"change": {"source_changed"}, "use": {"upstream"}}


# ----------------------------------------------------------------------------- 5. failed


def _fails_after_run_all(sim: Sim) -> None:
    sim.run_all()
    sim.edit("b", "y = x / 0")
    sim.failing.add("b")
    sim.run("b")


def _fails_unedited(sim: Sim) -> None:
    sim.run_all()
    sim.failing.add("b")
    sim.run("b")  # e.g. an input it fetches went away


def _fails_then_reader_reruns_unchanged(sim: Sim) -> None:
    sim.run_all()
    sim.failing.add("b")
    sim.run("b", "c")  # the reader ran on the older y (the failed run rebound nothing)


FAILED_PRODUCERS = {
    "edited to fail, run alone": _fails_after_run_all,
    "re-run unedited and failed": _fails_unedited,
    "reader re-ran after the failure": _fails_then_reader_reruns_unchanged,
}


@pytest.mark.parametrize("name", list(FAILED_PRODUCERS))
def test_a_failed_producer_that_would_fail_again_blocks_its_readers(name: str) -> None:
    setup = FAILED_PRODUCERS[name]
    sim = Sim([("a", "x = 4"), ("b", "y = x / 2"), ("c", "z = y + 1"), ("d", "k = 7")])
    setup(sim)
    plan = sim.plan()
    # b raises again on the same source and inputs: reported, not re-run; c cannot run after it
    assert sim.kinds() == {}
    assert sim.blocked() == {"b": {"failed"}, "c": {"missing_producer"}}
    up = only_reason(plan, "c", "missing_producer")
    assert (up.cells, up.symbols) == (("b",), ("y",))

    sim.failing.clear()
    sim.edit("b", "y = x / 4")
    sim.run_plan()
    assert at_rest(sim)
