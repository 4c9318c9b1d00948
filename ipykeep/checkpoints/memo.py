"""Memoized cell runs: a checkpointed run keyed by what determined it (pure logic).

A run's key is a digest of the cell's normalized source (``staleness.hashing``), the *version*
of every value it read, the stamps (mtime, size) of the project files it read, and the
versions of the packages it imports. A value's version is where it came from: the version of
a name a run wrote is a digest of that run's key and the name (so equal keys give equal
versions, and the cells after it are keyed on it), and a generator state's is the digest of
the state itself (equal in every process for an equal state, whoever seeded it). Names never
written in the kernel have the version ``initial`` — except the global random generators,
whose initial state is unseeded. A name last written by scratch code, by a run that could not
be keyed, or by a restore that did not say where its value came from has no version: a run
reading it gets no key, and is neither stored nor loaded as a memo entry.

A run gets no key either when it read what the key cannot see: the network, other processes,
files outside the project (``_inkernel/memoguard.py``), or when its source calls the clock,
an entropy source, an unseeded generator constructor, ``eval``/``exec``/``globals()``, or a shell
escape (``uncovered_in_source``). A run that wrote files gets no memo entry (loading it would
not write them).

A plan's stale cell whose key equals a stored run's — checked in order, so after one cell loads
the next one's key may match — is loaded instead of re-run when the load is estimated cheaper
than the run (``worth_loading``). A cheap cell (not checkpointed, see ``cost``) has an entry
without values: it re-runs, and its entry says what versions the re-run will leave, so the
cells after it can still be seen to match.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ipykeep.checkpoints.planning import CellCheckpoint
from ipykeep.staleness import FileStamp
from ipykeep.staleness.hashing import source_hash
from ipykeep.staleness.syntax import parse_cell
from ipykeep.staleness.tracker_state import NameWrite, StatFn, same_stamp

#: the version of a name no run of this kernel wrote (a builtin, a setting at its default)
INITIAL = "initial"
#: the global generators: their state at kernel start is unseeded
RANDOM_STATES = frozenset({"<numpy.random>", "<random>"})
#: seconds a memo load costs besides reading its bytes (round trips, the tracker's replay)
LOAD_OVERHEAD_S = 0.03
#: bytes per second a load authenticates and unpickles (memory-mapped; ~1 CPU-s per 2 GB)
LOAD_BYTES_PER_S = 400e6
#: outputs larger than this (JSON) are not kept with a memo entry: the run is not memoized
MAX_OUTPUTS_BYTES = 2 << 20

#: calls whose result is not a function of the code's inputs
_CLOCK = frozenset(
    {"time", "time_ns", "now", "utcnow", "today", "perf_counter", "perf_counter_ns"}
    | {"monotonic", "monotonic_ns", "process_time", "process_time_ns", "localtime", "ctime"}
)
_ENTROPY = frozenset(
    {"urandom", "token_bytes", "token_hex", "token_urlsafe", "uuid1", "uuid4", "SystemRandom"}
    | {"randbits", "getrandom"}
)
#: generator constructors: unseeded when called without arguments
_GENERATORS = frozenset(
    {"default_rng", "SeedSequence", "RandomState", "Random", "PCG64", "PCG64DXSM", "MT19937"}
    | {"Philox", "SFC64", "Generator"}
)
_DYNAMIC = frozenset({"eval", "exec", "globals", "locals", "vars", "__import__", "compile"})
#: magics that run other programs or read IPython's own store
_SHELL_MAGICS = frozenset({"system", "sx", "sh", "bash", "script", "store", "run", "load"})


def run_key(
    source: str,
    inputs: Mapping[str, str],
    files: Iterable[FileStamp],
    libs: Mapping[str, str | None],
) -> str:
    """The digest a run is memoized under."""
    payload = {
        "source": source_hash(source),
        "inputs": sorted(inputs.items()),
        "files": sorted((f.path, f.mtime_ns, f.size) for f in files),
        "libs": sorted((k, v or "") for k, v in libs.items()),
    }
    return hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()[:40]


def out_version(key: str, name: str, state_digest: str | None = None) -> str:
    """The version of ``name`` as the run keyed ``key`` left it."""
    if state_digest:
        return f"state:{state_digest}"
    return hashlib.sha256(f"{key}\0{name}".encode()).hexdigest()[:32]


def version_of(
    name: str, write: NameWrite | None, versions: Mapping[tuple[str, int], str]
) -> str | None:
    """The version of the value ``write`` left in ``name`` (None: it has none)."""
    if write is None:
        return None if name in RANDOM_STATES else INITIAL
    if write.cell_id is None:  # scratch code, a browser
        return None
    return versions.get((name, write.seq))


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


@functools.lru_cache(maxsize=4096)
def uncovered_in_source(source: str) -> str | None:
    """Why a run of ``source`` could give another value on the same inputs, as far as its text
    shows (None: nothing seen). Kept per source text: asked after every run of a cell."""
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("!") or (
            stripped.startswith("%") and stripped.lstrip("%").split(" ")[0] in _SHELL_MAGICS
        ):
            return "it runs a shell command"
    tree = parse_cell(source)
    if tree is None:
        return "its source does not parse"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if name in _CLOCK:
            return f"it reads the clock ({name})"
        if name in _ENTROPY:
            return f"it reads an entropy source ({name})"
        if (
            name in _GENERATORS
            and not node.args
            and not any(k.arg in ("seed", "x") for k in node.keywords)
        ):
            return f"it makes an unseeded random generator ({name}())"
        if name in _DYNAMIC and isinstance(node.func, ast.Name):
            return f"it calls {name}(), which reads names the key cannot see"
        if name in ("system", "getoutput"):
            return "it runs a shell command"
        if name in ("run_line_magic", "run_cell_magic") and node.args:
            magic = node.args[0]
            if not isinstance(magic, ast.Constant) or magic.value in _SHELL_MAGICS:
                return "it runs a shell command"
    return None


def seeds_only(source: str, writes: Iterable[str], imports: Iterable[str]) -> bool:
    """Whether the run only (re)seeds the global generators: it calls ``seed(…)`` and writes
    nothing else but imported modules. Such a run's result does not depend on the state it
    replaced, so the unseeded state before it is not one of its inputs."""
    if set(writes) - RANDOM_STATES - set(imports):
        return False  # it wrote something else (known without walking the source)
    tree = parse_cell(source)
    if tree is None:
        return False
    return any(
        isinstance(n, ast.Call) and _called(n) == "seed" and (n.args or n.keywords)
        for n in ast.walk(tree)
    )


def imported_packages(source: str) -> list[str]:
    """The top-level packages ``source`` imports (absolute imports)."""
    tree = parse_cell(source)
    out: set[str] = set()
    if tree is None:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return sorted(out)


@dataclass(frozen=True)
class MemoEntry:
    """One stored run: its key, the versions it read and left, its values and outputs."""

    key: str
    source_hash: str
    reads: Mapping[str, str]
    out: Mapping[str, str]
    checkpoint: CellCheckpoint
    outputs: tuple[dict[str, Any], ...]
    created: float
    kernel_id: str
    dataflow: str
    #: the manifest as stored (its MAC aside)
    raw: Mapping[str, Any]

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> MemoEntry | None:
        memo = data.get("memo")
        if not isinstance(memo, dict) or not data.get("restorable"):
            return None
        try:
            return cls(
                key=str(memo["key"]),
                source_hash=str(memo["source_hash"]),
                reads={str(k): str(v) for k, v in memo["reads"].items()},
                out={str(k): str(v) for k, v in memo["out"].items()},
                checkpoint=CellCheckpoint.from_manifest(data),
                outputs=tuple(o for o in memo.get("outputs", ()) if isinstance(o, dict)),
                created=float(data.get("created") or 0.0),
                kernel_id=str(data.get("kernel_id") or ""),
                dataflow=str(data.get("dataflow") or ""),
                raw={k: v for k, v in data.items() if k != "mac"},
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @property
    def loadable(self) -> bool:
        """Every value the run left was saved (a cheap cell's entry only keys its readers)."""
        saved = set(self.checkpoint.values)
        return all(n in saved for n in self.out if n.isidentifier() or n in RANDOM_STATES)

    @property
    def duration(self) -> float:
        return self.checkpoint.duration

    @property
    def load_s(self) -> float:
        return load_estimate_s(self.checkpoint.bytes)

    def describe(self, index: int) -> str:
        at = time.strftime("%H:%M", time.localtime(self.created)) if self.created else "?"
        origin = f" ({self.kernel_id})" if self.kernel_id else ""
        return (
            f"cell {index} matches its run at {at}{origin}: load {self.load_s:.2f} s "
            f"instead of re-running {self.duration:.1f} s"
        )


def load_estimate_s(nbytes: int) -> float:
    return round(LOAD_OVERHEAD_S + nbytes / LOAD_BYTES_PER_S, 3)


def worth_loading(entry: MemoEntry) -> bool:
    """Loading must cost less than re-running (half of it: the estimate is rough)."""
    return entry.load_s < 0.5 * entry.duration


def matches(entry: MemoEntry, version: Callable[[str], str | None], stat: StatFn) -> bool:
    """Whether a run of the cell now would be keyed as ``entry``'s run was."""
    for name, wanted in entry.reads.items():
        if version(name) != wanted:
            return False
    for stamp in entry.checkpoint.files:
        if not same_stamp(stat(stamp.path), stamp):
            return False
    saved = set(entry.checkpoint.values)
    # a value saved as one object with a name the run did not write comes back as a copy
    return all(others <= saved for others in entry.checkpoint.shared.values())


def choose(
    entries: Sequence[MemoEntry],
    version: Callable[[str], str | None],
    stat: StatFn,
    dataflow: str,
    *,
    to_load: bool = True,
) -> MemoEntry | None:
    """The newest stored run that matches and (``to_load``) is worth loading. Any matching run
    tells what a re-run will leave: the same key, so the same versions."""
    for entry in sorted(entries, key=lambda e: -e.created):
        if entry.dataflow != dataflow or (
            to_load and not (entry.loadable and worth_loading(entry))
        ):
            continue
        if matches(entry, version, stat):
            return entry
    return None


def resolve(
    planned: Sequence[tuple[str, str]],
    lookup: Callable[[str], Sequence[MemoEntry]],
    version_now: Callable[[str], str | None],
    may_write: Callable[[str, str], Iterable[str]],
    stat: StatFn,
    dataflow: str,
) -> dict[str, MemoEntry]:
    """Which of the ``planned`` cells (id, source, in run order) would load from the memo.

    In order: a loaded cell's names take the versions its stored run left (so the next cell
    may match too); a re-run cell's names have unknown versions until it runs.
    """
    overlay: dict[str, str | None] = {}

    def version(name: str) -> str | None:
        return overlay[name] if name in overlay else version_now(name)

    found: dict[str, MemoEntry] = {}
    for cell_id, source in planned:
        entries = lookup(source_hash(source))
        entry = choose(entries, version, stat, dataflow)
        if entry is not None:
            found[cell_id] = entry
        else:  # re-run: it leaves what a matching run left, if one does
            entry = choose(entries, version, stat, dataflow, to_load=False)
        if entry is not None:
            overlay.update(entry.out)
            overlay.update(dict.fromkeys(entry.checkpoint.deleted))
        else:
            overlay.update(dict.fromkeys(may_write(cell_id, source)))
    return found
