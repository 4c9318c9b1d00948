"""Normalized source hashes: an edit that only touches comments or whitespace keeps the hash.

Parseable cells hash their AST (comments, blank lines, spacing, redundant parentheses and quote
style all vanish). Cells that do not parse fall back to a line-based form: trailing whitespace,
blank lines and whole-line comments are dropped, so such cells still hash stably.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache

from ipykeep.staleness.syntax import parse_cell

_PREFIX = "v1:"  # bump when the normalization changes so old hashes never match new ones


def normalize_source(source: str) -> str:
    """The form of ``source`` that the hash is taken of."""
    tree = parse_cell(source)
    if tree is not None:
        return "ast:" + ast.dump(tree, annotate_fields=False, include_attributes=False)
    lines = []
    for line in source.splitlines():
        stripped = line.rstrip()
        if not stripped or stripped.lstrip().startswith("#"):
            continue
        lines.append(stripped)
    return "lines:" + "\n".join(lines)


@lru_cache(maxsize=4096)
def source_hash(source: str) -> str:
    """A short stable hash of the normalized source (cached by source text: every plan hashes
    every cell, and parsing and dumping the AST of 60 cells took most of a plan's time)."""
    digest = hashlib.sha256(normalize_source(source).encode("utf-8", "surrogatepass"))
    return _PREFIX + digest.hexdigest()[:32]


#: builtins that show values without changing them (none consumes an iterator): a statement
#: that only calls these is display, not computation
_DISPLAY_CALLS = frozenset(
    {"print", "display", "pprint", "repr", "str", "len", "format", "round", "type", "abs"}
)


def _shows_only(node: ast.AST) -> bool:
    """Whether evaluating ``node`` calls only the display builtins (f-strings included)."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Await, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return False
        if isinstance(n, ast.Call) and not (
            isinstance(n.func, ast.Name) and n.func.id in _DISPLAY_CALLS
        ):
            return False
    return True


def _displays_only(stmt: ast.stmt) -> bool:
    """Whether a top-level statement only shows values: an expression statement calling only
    ``print``/``display``/``len``/… (``print(f'the total is {total}')``, a bare ``df``)."""
    return isinstance(stmt, ast.Expr) and _shows_only(stmt.value)


@lru_cache(maxsize=4096)
def effect_hash(source: str) -> str | None:
    """A hash of what the cell computes: its source without the statements that only show
    values (``print('total', total)`` → ``print(f'the total is {total}')`` keeps it). Equal
    hashes with equal inputs give equal values; None when the cell does not parse."""
    tree = parse_cell(source)
    if tree is None:
        return None
    kept = [s for s in tree.body if not _displays_only(s)]
    dump = "|".join(ast.dump(s, annotate_fields=False, include_attributes=False) for s in kept)
    return _PREFIX + hashlib.sha256(dump.encode("utf-8", "surrogatepass")).hexdigest()[:32]
