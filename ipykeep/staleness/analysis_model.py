"""What the static analysis of a cell yields (``CellAnalysis``, ``FunctionInfo``) and which
names belong to IPython rather than to the notebook."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

#: Names IPython itself binds in the user namespace: output history (``_``, ``__``, ``___``,
#: ``_N``), input history (``_i``, ``_ii``, ``_iii``, ``_iN``), ``In``/``Out`` and friends. A
#: fresh run never reads them from another cell, so they are never notebook names.
KERNEL_NAMES = frozenset(
    {
        "_",
        "__",
        "___",
        "_i",
        "_ii",
        "_iii",
        "_oh",
        "_ih",
        "_dh",
        "In",
        "Out",
        "exit",
        "quit",
        "get_ipython",
        "_exit_code",
    }
)
_HISTORY_NAME = re.compile(r"_i?\d+\Z")


def is_kernel_name(name: str) -> bool:
    """Whether ``name`` belongs to IPython (history, ``In``/``Out``…), not to the notebook."""
    return name in KERNEL_NAMES or bool(_HISTORY_NAME.match(name))


def _notebook_names(names: set[str] | frozenset[str]) -> frozenset[str]:
    return frozenset(n for n in names if not is_kernel_name(n))


@dataclass(frozen=True)
class FunctionInfo:
    """Module names a function (or class, through its methods) reads or rebinds when called."""

    free_globals: frozenset[str] = frozenset()
    mutated_globals: frozenset[str] = frozenset()
    #: it changes an argument in place (``def add(xs): xs.append(0)``): a caller passing a
    #: module name mutates that name
    mutates_args: bool = False
    #: for a class: its methods that change ``self`` (or another argument) in place
    mutating_methods: frozenset[str] = frozenset()

    def merge(self, other: FunctionInfo) -> FunctionInfo:
        return FunctionInfo(
            self.free_globals | other.free_globals,
            self.mutated_globals | other.mutated_globals,
            self.mutates_args or other.mutates_args,
            self.mutating_methods | other.mutating_methods,
        )


@dataclass(frozen=True)
class CellAnalysis:
    """What one cell source defines, reads and may mutate at module level."""

    defs: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()
    mutates: frozenset[str] = frozenset()
    #: every module-level name loaded, including those the cell defined first (to find calls)
    loaded: frozenset[str] = frozenset()
    functions: Mapping[str, FunctionInfo] = field(default_factory=dict)
    #: function name -> module names passed to it as arguments at module level (bare names
    #: or their attributes/items), for functions that turn out to mutate their arguments
    call_args: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: method name -> module names it is called on (``m.tune(3)``), for methods of notebook
    #: classes that change their instance
    method_calls: Mapping[str, frozenset[str]] = field(default_factory=dict)
    paths: tuple[str, ...] = ()
    #: path literals handed to calls that write files (``to_csv("out.csv")``, ``open(p, "w")``)
    written_paths: tuple[str, ...] = ()
    parseable: bool = True
    star_import: bool = False
    #: names bound only by ``import`` statements -> what they import (``np`` -> ``numpy``):
    #: re-running the same import gives the very same module object, so an edit elsewhere in
    #: the cell does not change these names
    imports: Mapping[str, str] = field(default_factory=dict)
    #: mutated names that the syntax proves are changed in place (item/attribute assignment,
    #: augmented assignment, ``del x[...]``); the rest of ``mutates`` are guesses from method
    #: names and calls, which runtime evidence may overrule
    assigned_into: frozenset[str] = frozenset()
    #: names the cell may unbind without defining them: ``except … as e`` deletes ``e`` when the
    #: handler ends (so a global ``e`` made elsewhere is gone), but gives readers no value
    unbinds: frozenset[str] = frozenset()
    #: the cell calls a ``seed`` method/function (``np.random.seed(0)``, ``random.seed(1)``)
    seeds: bool = False
    #: the cell runs shell commands (``!cmd``, ``%%bash``, ``os.system``, ``subprocess``): what
    #: they write is unknown
    shell: bool = False

    def __post_init__(self) -> None:
        # Analyses are cached per source (``analyze_source``, thousands of them, one per
        # distinct scratch call too): an empty set costs ~200 bytes, most of a short cell's
        # analysis, so the empty ones share one.
        for name in _SET_FIELDS:
            if not getattr(self, name):
                object.__setattr__(self, name, _NO_NAMES)


_NO_NAMES: frozenset[str] = frozenset()
_SET_FIELDS = tuple(f.name for f in fields(CellAnalysis) if str(f.type).startswith("frozenset"))
