"""Whether a piece of code can only read state: the case where no namespace probe is needed.

A quick look such as ``df.shape`` or ``1+1`` binds no name, calls nothing and imports nothing,
so the namespace probe that rides on each scratch execution could only report "nothing
changed". Skipping it saves the kernel its probe (a few milliseconds) on the calls an agent
makes most. The test is an allow-list of expression syntax, so anything not listed (a call, an
assignment, a lambda, a comprehension, IPython syntax, ``await``) is treated as able to change
state and keeps its probe. Dunder methods an operator or a subscript runs are assumed not to
mutate their operands, as every evidence source assumes of a plain read.
"""

from __future__ import annotations

import ast
from functools import lru_cache

#: Expression syntax that evaluates without calling a function by name, binding or importing.
_READ_ONLY_NODES: tuple[type[ast.AST], ...] = (
    ast.Module,
    ast.Expr,
    ast.Pass,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.Starred,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)

#: Longer code is never a quick look; parsing it here would cost more than it could save.
MAX_CHARS = 2000


@lru_cache(maxsize=256)
def is_read_only(code: str) -> bool:
    """True when ``code`` is plain Python made only of expressions that read names."""
    if len(code) > MAX_CHARS:
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):  # IPython syntax, or not code at all: keep the probe
        return False
    return all(isinstance(node, _READ_ONLY_NODES) for node in ast.walk(tree))
