"""The notebook's current dataflow: who defines, reads and mutates which name, in notebook order.

Built from static analysis of the sources as they are now (so an edit that has not run yet
already counts), widened by what a runtime tracer saw in a cell's last run when that run
executed the same source. Redefinitions resolve by notebook order: a cell reads a name from
the last cell above it that writes the name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ipykeep.staleness.analysis import CellAnalysis, FunctionInfo, analyze_source
from ipykeep.staleness.models import DynamicCellInfo, NotebookCell, Observed
from ipykeep.staleness.process_state import GENERATORS


@dataclass(frozen=True)
class GraphCell:
    cell: NotebookCell
    analysis: CellAnalysis
    #: names whose outside value the cell reads (uses, mutated names, function bodies it calls)
    reads: frozenset[str]
    #: names the cell rebinds or mutates
    writes: frozenset[str]
    #: names it changes in place without rebinding (a stale one needs its producer first)
    mutates: frozenset[str]
    #: name -> the cell above that the value is read from (None: no cell above writes it)
    producers: Mapping[str, str | None]

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id


@dataclass(frozen=True)
class Graph:
    cells: tuple[GraphCell, ...]
    by_id: Mapping[str, GraphCell]
    #: name -> ids of the code cells writing it, in notebook order
    writers: Mapping[str, tuple[str, ...]]
    position: Mapping[str, int]

    def final_writer(self, name: str) -> str | None:
        ids = self.writers.get(name)
        return ids[-1] if ids else None

    def writers_below(self, name: str, cell_id: str) -> tuple[str, ...]:
        pos = self.position[cell_id]
        return tuple(w for w in self.writers.get(name, ()) if self.position[w] > pos)


def called_globals(
    start: frozenset[str],
    own_defs: frozenset[str],
    lookup: Mapping[str, FunctionInfo],
) -> tuple[set[str], set[str]]:
    """Module names read and mutated by calling the functions among ``start``, transitively
    (a function's body may call further notebook functions); reads exclude ``own_defs``."""
    reads: set[str] = set()
    mutated: set[str] = set()
    seen: set[str] = set()
    todo = [n for n in start if n in lookup]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        info = lookup[name]
        reads |= info.free_globals
        mutated |= info.mutated_globals
        todo.extend(n for n in info.free_globals if n in lookup and n not in seen)
    return reads - own_defs, mutated


def mutated_arguments(an: CellAnalysis, lookup: Mapping[str, FunctionInfo]) -> set[str]:
    """Module names the cell passes to functions that change their arguments in place, or
    calls a method on that some notebook class defines as changing its instance (matched by
    method name: the receiver's type is not known statically)."""
    out: set[str] = set()
    for fname, names in an.call_args.items():
        info = lookup.get(fname)
        if info is not None and info.mutates_args:
            out |= names
    if an.method_calls:
        changing = set().union(*(info.mutating_methods for info in lookup.values()))
        for meth, names in an.method_calls.items():
            if meth in changing:
                out |= names
    return out


def static_effects(
    an: CellAnalysis, lookup: Mapping[str, FunctionInfo]
) -> tuple[set[str], set[str]]:
    """Names a piece of code reads from outside, and names it changes in place: directly, in the
    bodies of the notebook functions it calls, or as arguments those functions change.
    ``lookup`` holds the functions visible to the code (its own definitions included)."""
    called_reads, called_mutated = called_globals(an.loaded, an.defs, lookup)
    called_mutated |= mutated_arguments(an, lookup)
    reads = set(an.uses) | set(an.mutates) | called_reads | called_mutated
    return reads, set(an.mutates) | called_mutated


def cell_effects(
    an: CellAnalysis,
    lookup: Mapping[str, FunctionInfo],
    dyn: DynamicCellInfo | None = None,
    obs: Observed | None = None,
    carried: Observed | None = None,
    modules: AbstractSet[str] = frozenset(),
    failed: bool = False,
) -> tuple[set[str], set[str], set[str]]:
    """(reads, writes, mutates) of one piece of code: static analysis, widened by what a tracer
    (ipyflow) saw, and corrected by what the kernel observed its last run do.

    Observation outranks guesses both ways: a name whose value changed in place is a mutation
    even if no rule predicted it (``heapq.heappush(h, 1)``, ``alias.append``, a random draw), and
    a guessed mutation (``df.set_index(...)``, a method named like a mutator, a tracer's
    mutation) that the fingerprints show did not happen is dropped, unless the syntax proves it
    (item/attribute assignment) or the value cannot be fingerprinted.

    ``carried``: what the last run of an edited cell was seen to do. The names it changed in
    place stay mutations and the names it bound stay its outputs until the edited cell has run
    once (a draw from ``rng`` edited is still a draw; ``globals()["g"] = …`` edited still binds
    ``g``): sound until the new text has evidence of its own.

    ``failed``: the run ``obs`` describes raised; what it wrote is what the kernel saw change.

    ``modules``: names that cells above bind by an import. A call through one
    (``sm.datasets.star98.load()``, ``np.concatenate(…)``) is no mutation of it: the module is
    one shared object that re-running its import gives back as it is, and the kernel's evidence
    never shows one changed (modules are compared by identity). Assigning into one
    (``mod.flag = 1``) still is. Without this rule an edited cell calling through ``sm`` planned
    the import cell and every reader of ``sm``.
    """
    reads, mutates = static_effects(an, lookup)
    mutates -= (modules & an.mutates) - an.assigned_into
    writes = set(an.defs) | mutates | an.unbinds
    floor_writes = frozenset(writes)
    if dyn is not None:
        # a name the cell bound itself is its own, even if the tracer saw it read
        own = an.defs | an.unbinds  # ``except … as e``: the handler's own e, not a global
        reads |= (dyn.used - own) | (dyn.mutated - own)
        for syms in dyn.parents.values():
            reads |= syms - own
        mutates |= dyn.mutated - own
        writes |= dyn.defined | dyn.mutated
    if obs is not None:
        unseen = mutates - obs.mutated - obs.opaque - an.assigned_into - obs.bound - obs.deleted
        mutates -= unseen
        writes -= unseen - an.defs
        writes -= an.unbinds - obs.deleted  # the handler did not run
        if dyn is not None:
            # the tracer's bindings that the namespace never showed (a comprehension's variable);
            # only the tracer's own additions go, never what static analysis found
            writes -= dyn.defined - floor_writes - obs.changed
        mutates |= obs.mutated - an.defs
        reads |= (obs.mutated - an.defs) | obs.read
        writes |= obs.changed
    if obs is not None and failed:
        # a run that raised did what it did before raising, which the kernel saw: a failed
        # ``t[1] = 4`` on a tuple, or an import that raised before ``z = …``, changed nothing;
        # values fingerprinted only in part keep the static guess
        done = obs.changed | (writes & obs.opaque)
        writes &= done
        writes |= obs.changed
        mutates &= done
    if carried is not None:
        # kept even when the new text does not name them: the change may go through an alias
        kept = carried.mutated - an.defs
        mutates |= kept
        reads |= kept | carried.read
        writes |= kept | carried.bound
    if an.seeds:
        # ``np.random.seed(…)``/``random.seed(…)`` sets the hidden generators' state: the state
        # before does not matter
        mutates -= GENERATORS
        reads -= GENERATORS
    return reads, writes, mutates


def _seen_in_fresh_run(
    an: CellAnalysis, effects: tuple[set[str], set[str], set[str]], last_writer: Mapping[str, str]
) -> tuple[set[str], set[str], set[str]]:
    """``effects`` without the changes seen in values that no cell above makes: such a change
    cannot happen in a fresh run (the object does not exist yet there); it came through an
    object graph reaching a later cell's value, so it is not this cell's input or output."""
    reads, writes, mutates = effects
    seen_only = mutates - an.loaded - an.defs - an.mutates - an.unbinds
    for name in seen_only:
        if name not in last_writer and not _pseudo(name):
            reads.discard(name)
            writes.discard(name)
            mutates.discard(name)
    return reads, writes, mutates


def _named_in(name: str, source: str) -> bool:
    """Whether ``source`` names ``name`` as a whole word (code, a string, a comment alike)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", source) is not None


def _pseudo(name: str) -> bool:
    """Names that stand for hidden state (``<numpy.random>``), not Python identifiers."""
    return not name.isidentifier()


def build_graph(
    cells: Sequence[NotebookCell],
    dynamic: Mapping[str, DynamicCellInfo] | None = None,
    observed: Mapping[str, Observed] | None = None,
    carried: Mapping[str, Observed] | None = None,
    failed: AbstractSet[str] = frozenset(),
) -> Graph:
    """Graph of the code cells of ``cells``; ``dynamic`` maps cell id to runtime-traced info
    and ``observed`` to the namespace evidence of its last run, both only for cells whose source
    did not change since that run (the caller filters); ``failed``: the cells whose last run
    (of the same source) raised, so its evidence is all they write."""
    dynamic = dynamic or {}
    observed = observed or {}
    carried = carried or {}
    code = [c for c in cells if c.cell_type == "code"]
    last_writer: dict[str, str] = {}
    imported: set[str] = set()  # names whose last writer above binds them by an import
    functions: dict[str, FunctionInfo] = {}  # function name -> info, as seen from above
    out: list[GraphCell] = []
    writers: dict[str, list[str]] = {}
    for cell in code:
        an = analyze_source(cell.source)
        lookup = dict(functions)
        lookup.update(an.functions)
        obs, kept = observed.get(cell.cell_id), carried.get(cell.cell_id)
        raised = cell.cell_id in failed
        # The floor: static analysis of the source as it is now plus the kernel's evidence of
        # its last run. The tracer's edges may only add to it (ipyflow mode is at least as
        # sound as static mode), so the tracer's view is merged into it, never put in its place.
        reads, writes, mutates = _seen_in_fresh_run(
            an, cell_effects(an, lookup, None, obs, kept, imported, raised), last_writer
        )
        dyn = dynamic.get(cell.cell_id)
        if dyn is not None:
            d_reads, d_writes, d_mutates = _seen_in_fresh_run(
                an, cell_effects(an, lookup, dyn, obs, kept, imported, raised), last_writer
            )
            # The tracer's reads count only where the cell reads the name: its text names it
            # (a load inside a function it defines and calls, ``globals()["n"]``) or it changed
            # the name's object (below). ipyflow also reports the ancestors of a value read
            # (``z0s`` for a ``y`` computed from it two cells up): no edge of this cell. A name
            # no cell above writes is an artefact of its bookkeeping too (a comprehension's
            # variable): it must not block the cell (``missing_producer``).
            extra_reads = {
                n for n in d_reads - reads if n in last_writer and _named_in(n, cell.source)
            }
            # A name only the tracer saw written must not hide the floor's producer of it from
            # the cells below: the cell passes the value on, so it reads it too.
            extra_writes = d_writes - writes
            extra_reads |= {n for n in extra_writes if n in last_writer}
            reads |= extra_reads
            writes |= extra_writes
            mutates |= d_mutates & reads
        producers = {name: last_writer.get(name) for name in reads}
        gc = GraphCell(
            cell=cell,
            analysis=an,
            reads=frozenset(reads),
            writes=frozenset(writes),
            mutates=frozenset(mutates),
            producers=producers,
        )
        out.append(gc)
        for name in writes:
            last_writer[name] = cell.cell_id
            writers.setdefault(name, []).append(cell.cell_id)
            if name in an.imports:
                imported.add(name)
            else:
                imported.discard(name)
        for name in an.defs:
            if name in an.functions:
                functions[name] = an.functions[name]
            else:
                functions.pop(name, None)
    return Graph(
        cells=tuple(out),
        by_id={g.cell_id: g for g in out},
        writers={k: tuple(v) for k, v in writers.items()},
        position={g.cell_id: i for i, g in enumerate(out)},
    )
