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
