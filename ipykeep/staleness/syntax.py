"""Turning a notebook cell's IPython source into a Python AST.

Cells may hold magics (``%time``, ``%%capture``), shell escapes (``!ls``) and help syntax
(``x?``). IPython's own input transformer rewrites them into ``get_ipython()`` calls, which is
exactly what the kernel executes, so parsing its output sees what really runs. Magics whose body
is Python code (``%%time``, ``%timeit``, ``%%capture`` …) are unwrapped so the body's names
count.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from IPython.core.inputtransformer2 import TransformerManager

#: Magics that run their argument / body as Python code in the user namespace.
PYTHON_BODY_MAGICS = frozenset({"time", "timeit", "capture", "prun", "memit", "debug"})


@lru_cache(maxsize=1)
def _transformer() -> TransformerManager:
    # Imported lazily: IPython is heavy and only needed once a cell holds IPython syntax.
    from IPython.core.inputtransformer2 import TransformerManager

    # IPython annotates transform_cell but not the constructor: say what it makes.
    manager: Callable[[], TransformerManager] = TransformerManager
    return manager()


def _looks_like_ipython(source: str) -> bool:
    for line in source.splitlines():
        s = line.lstrip()
        if s.startswith(("%", "!")) or s.endswith("?"):
            return True
        if "= !" in s or "=!" in s or "= %" in s or "=%" in s:
            return True
    return False


def to_python(source: str) -> str:
    """The Python code the kernel runs for ``source`` (IPython syntax rewritten)."""
    if not _looks_like_ipython(source):
        return source
    try:
        return _transformer().transform_cell(source)
    except Exception:  # a malformed magic line: leave it to the parser to reject
        return source


def parse_cell(source: str) -> ast.Module | None:
    """Parse a cell as the kernel would, or None when it is not valid (IPython) Python."""
    try:
        tree = ast.parse(to_python(source))
    except (SyntaxError, ValueError):
        return None
    return ast.Module(body=_unwrap_magics(tree.body), type_ignores=[])


def _magic_call(stmt: ast.stmt) -> tuple[str, str, str] | None:
    """``(kind, name, code)`` for ``get_ipython().run_{line,cell}_magic('name', …)``."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "get_ipython"
    ):
        return None
    args = call.args
    if not args or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
        return None
    name = args[0].value  # type: ignore[attr-defined]
    code = args[-1].value if len(args) >= 2 else ""  # type: ignore[attr-defined]
    return func.attr, name, code


def _unwrap_magics(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in body:
        magic = _magic_call(stmt)
        if magic is not None and magic[1] in PYTHON_BODY_MAGICS and magic[2].strip():
            inner = parse_cell(magic[2])
            if inner is not None:
                out.extend(_capture_target(stmt, magic[1]))
                out.extend(inner.body)
                continue
        out.append(stmt)
    return out


def _capture_target(stmt: ast.stmt, name: str) -> list[ast.stmt]:
    """``%%capture out`` binds ``out``: model it as an assignment so the name is defined."""
    if name != "capture":
        return []
    call = stmt.value  # type: ignore[attr-defined]
    line = call.args[1].value if len(call.args) == 3 else ""
    words = [w for w in line.split() if not w.startswith("-")]
    if words and words[0].isidentifier():
        return ast.parse(f"{words[0]} = None").body
    return []
