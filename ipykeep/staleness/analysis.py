"""Static def/ref analysis of one notebook cell.

Scoping follows Python (and marimo's ``_ast/visitor.py``): names bound inside functions,
lambdas, comprehensions and class bodies are local to them; ``global`` makes a function write
a module name. At module level statements are read in order, so ``x = 1; print(x)`` does not
read an outside ``x`` while ``x = x + 1`` does.

What a cell may do to a name it did not create itself counts as *mutation*: attribute or item
assignment (``df["a"] = 0``, ``obj.x = 1``), augmented assignment, ``del x[...]``, and calling a
method that changes its receiver (a known mutator such as ``append``/``fit``/``set_*`` or any
method given ``inplace=True``). A plain method call such as ``df.head()`` is a read, not a
mutation: treating every call as a write would re-run whole pipelines for a display cell.
Runtime tracing (ipyflow) adds the mutations made through other calls.

Function bodies are not run when a cell defines them, so their reads of module names are kept
per function (``FunctionInfo``); the dataflow graph charges them to the cells that call the
function.

A cell that does not parse gets ``parseable=False`` and defines and uses nothing: a fresh run
would stop at its SyntaxError, so it produces nothing for later cells, and it is in the plan
anyway once edited (its hash changes).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import cast

from ipykeep.staleness.analysis_model import CellAnalysis, FunctionInfo, _notebook_names
from ipykeep.staleness.analysis_scan import (
    _Acc,
    _call_name,
    _class_parts,
    _function_info,
    _is_shell_call,
    _lambda_info,
    _scan_expr,
    _scan_header,
    _scan_match_case,
    _scan_stmt,
)
from ipykeep.staleness.syntax import parse_cell

#: The results' types live in ``analysis_model``; they are this module's interface as well.
__all__ = ["UNPARSEABLE", "CellAnalysis", "FunctionInfo", "analyze_source"]


class _Module:
    """Sequential walk of module-level statements (the order of reads and binds matters)."""

    def __init__(self) -> None:
        self.defined: set[str] = set()
        self.uses: set[str] = set()
        self.mutates: set[str] = set()
        self.loaded: set[str] = set()
        self.functions: dict[str, FunctionInfo] = {}
        self.paths: list[str] = []
        self.written: list[str] = []
        self.call_args: dict[str, set[str]] = {}
        self.method_calls: dict[str, set[str]] = {}
        self.star = False
        self.assigned: set[str] = set()
        self.imports: dict[str, str] = {}
        self.unbinds: set[str] = set()

    def apply(self, acc: _Acc) -> None:
        self.uses |= acc.loads - self.defined
        self.loaded |= acc.loads
        self.mutates |= acc.mutated - self.defined
        self.assigned |= acc.assigned - self.defined
        for fname, names in acc.call_args.items():
            # only names whose outside value is passed (not ones this cell bound before)
            self.call_args.setdefault(fname, set()).update(names - self.defined)
        for meth, names in acc.method_calls.items():
            self.method_calls.setdefault(meth, set()).update(names - self.defined)
        self.defined |= acc.stores
        for name in acc.stores:
            self.functions.pop(name, None)  # rebinding drops what we knew about a function
            self.imports.pop(name, None)
        self.paths.extend(acc.paths)
        self.written.extend(acc.written)
        self.star = self.star or acc.star

    def expr(self, node: ast.AST | None) -> None:
        acc = _Acc()
        _scan_expr(node, acc)
        self.apply(acc)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            acc = _Acc()
            _scan_header(stmt, acc)
            acc.stores.add(stmt.name)
            self.apply(acc)
            self.functions[stmt.name] = _function_info(stmt)
        elif isinstance(stmt, ast.ClassDef):
            acc = _Acc()
            _scan_header(stmt, acc)
            immediate, methods = _class_parts(stmt)
            acc.loads |= immediate.loads
            acc.mutated |= immediate.mutated
            acc.paths.extend(immediate.paths)
            acc.written.extend(immediate.written)
            acc.stores.add(stmt.name)
            self.apply(acc)
            self.functions[stmt.name] = methods
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expr(stmt.iter)
            self.expr(stmt.target)
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.While, ast.If)):
            self.expr(stmt.test)
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expr(item.context_expr)
                self.expr(item.optional_vars)
            self.block(stmt.body)
        elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            stmt = cast(ast.Try, stmt)  # TryStar (3.11+) has the same fields
            self.block(stmt.body)
            for handler in stmt.handlers:
                acc = _Acc()
                _scan_expr(handler.type, acc)
                had = handler.name in self.defined if handler.name else True
                if handler.name:
                    acc.stores.add(handler.name)
                self.apply(acc)
                self.block(handler.body)
                if not had:
                    # Python deletes ``except ... as e`` names when the handler ends: not a
                    # global the cell defines, but one it may unbind
                    self.defined.discard(handler.name)
                    self.unbinds.add(handler.name)  # type: ignore[arg-type]
            self.block(stmt.orelse)
            self.block(stmt.finalbody)
        elif isinstance(stmt, ast.Match):
            self.expr(stmt.subject)
            for case in stmt.cases:
                acc = _Acc()
                _scan_match_case(ast.match_case(case.pattern, case.guard, []), acc)
                self.apply(acc)
                self.block(case.body)
        elif isinstance(stmt, ast.Assign):
            acc = _Acc()
            _scan_expr(stmt.value, acc)
            for target in stmt.targets:
                _scan_expr(target, acc)
            self.apply(acc)
            if (
                isinstance(stmt.value, ast.Lambda)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                self.functions[stmt.targets[0].id] = _lambda_info(stmt.value)
        else:
            acc = _Acc()
            _scan_stmt(stmt, acc)
            self.apply(acc)
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.imports[bound] = alias.name if alias.asname else bound
            elif isinstance(stmt, ast.ImportFrom):
                mod = "." * stmt.level + (stmt.module or "")
                for alias in stmt.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = f"{mod}:{alias.name}"


def _analyze_tree(tree: ast.Module) -> CellAnalysis:
    mod = _Module()
    mod.block(tree.body)
    # a method call on a name the cell did not define mutates it; one it defined is its own
    paths = tuple(dict.fromkeys(mod.paths))
    return CellAnalysis(
        defs=_notebook_names(mod.defined),
        uses=_notebook_names(mod.uses),
        mutates=_notebook_names(mod.mutates),
        loaded=_notebook_names(mod.loaded),
        functions=dict(mod.functions),
        call_args={k: frozenset(v) for k, v in mod.call_args.items() if v},
        method_calls={k: frozenset(v) for k, v in mod.method_calls.items() if v},
        paths=paths,
        written_paths=tuple(dict.fromkeys(mod.written)),
        parseable=True,
        star_import=mod.star,
        imports={k: v for k, v in mod.imports.items() if k in mod.defined},
        assigned_into=_notebook_names(mod.assigned),
        unbinds=_notebook_names(mod.unbinds - mod.defined),
        seeds=any(isinstance(n, ast.Call) and _call_name(n.func) == "seed" for n in ast.walk(tree)),
        shell=any(_is_shell_call(n) for n in ast.walk(tree)),
    )


UNPARSEABLE = CellAnalysis(parseable=False)


def _analyze(source: str) -> CellAnalysis:
    tree = parse_cell(source)
    if tree is None:
        return UNPARSEABLE
    return _analyze_tree(tree)


@lru_cache(maxsize=4096)
def analyze_source(source: str) -> CellAnalysis:
    """Analyze one cell's source (cached by source text; results are immutable)."""
    return _analyze(source)


@lru_cache(maxsize=256)
def analyze_scratch(source: str) -> CellAnalysis:
    """``analyze_source`` for code outside the notebook (an agent's scratch code, a browser's):
    a small cache of its own, so a long session's one-off snippets neither push the notebook's
    cells out of theirs nor keep growing the daemon's memory up to its size."""
    return _analyze(source)
