"""The hidden process-wide state the in-kernel evidence observes, by pseudo-name, in words.

Cells share state they never name: random generators and settings such as numpy's print options
or the working directory. The kernel's probe (``_inkernel/statemon.py`` with
``_inkernel/settings.py``) reports each as a pseudo-name — a cell that changed it wrote it, a
cell whose code used what it governs read it — and plans name it in words
(``numpy print options changed by re-running cell 2``). The in-kernel modules cannot import
this one; ``tests/staleness/test_process_state.py`` checks that both spell the same names.
"""

from __future__ import annotations

from typing import Final

#: generators cells draw from: drawing changes them, seeding sets them whatever they held
GENERATORS: Final = frozenset({"<numpy.random>", "<random>", "<torch.random>"})

#: pseudo-name -> what it is, in words
LABELS: Final[dict[str, str]] = {
    "<numpy.random>": "numpy's global random generator",
    "<random>": "the random module's generator",
    "<torch.random>": "torch's global random generator",
    "<numpy.printoptions>": "numpy print options",
    "<numpy.errstate>": "numpy floating-point error handling (np.seterr)",
    "<pandas.display>": "pandas display options",
    "<pandas.options>": "pandas options",
    "<matplotlib.rcParams>": "matplotlib rcParams (style)",
    "<warnings.filters>": "warning filters",
    "<os.cwd>": "the working directory",
    "<os.environ>": "environment variables",
    "<sys.path>": "sys.path",
    "<locale>": "the locale",
}


def is_pseudo_name(name: str) -> bool:
    """Whether ``name`` stands for hidden state (``<numpy.printoptions>``), not a variable."""
    return name.startswith("<") and name.endswith(">")


def symbol_label(name: str) -> str:
    """``name`` as a reason says it: a variable as it is, hidden state in words."""
    return LABELS.get(name, name) if is_pseudo_name(name) else name
