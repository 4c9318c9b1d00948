"""The scanners behind ``analysis``: expressions, calls, comprehensions and the statements of
function and class bodies, accumulating names read, bound and mutated per scope."""

from __future__ import annotations

import ast

from ipykeep.staleness.analysis_model import FunctionInfo

#: Method names that change their receiver in place.
MUTATING_METHODS = frozenset(
    {
        # list / dict / set / bytearray
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "popitem",
        "clear",
        "sort",
        "reverse",
        "update",
        "setdefault",
        "add",
        "discard",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        # numpy / pandas / sklearn / torch style
        "fill",
        "resize",
        "fit",
        "partial_fit",
        "fit_transform",
        "itemset",
        "put",
        "setflags",
        "load_state_dict",
        "register_buffer",
        "register_parameter",
        "train",
        "zero_grad",
        "requires_grad_",
        # files / streams
        "write",
        "writelines",
        "close",
        "seek",
        "truncate",
        "flush",
    }
)
MUTATING_PREFIXES = ("set_", "add_", "append_", "update_", "register_", "remove_", "del_")
#: Methods named like mutators that return a new object unless given ``inplace=True`` (pandas)
RETURNS_NEW = frozenset(
    {
        "set_index",
        "set_axis",
        "set_flags",
        "set_names",
        "set_levels",
        "set_codes",
        "add_prefix",
        "add_suffix",
        "add_categories",
        "remove_categories",
        "remove_unused_categories",
        "set_categories",
    }
)

#: Calls whose string arguments are files written, not read.
WRITER_CALLS = frozenset(
    {
        "to_csv",
        "to_parquet",
        "to_json",
        "to_excel",
        "to_pickle",
        "to_feather",
        "to_hdf",
        "to_html",
        "to_sql",
        "to_latex",
        "to_markdown",
        "to_stata",
        "to_xml",
        "to_file",
        "savefig",
        "save",
        "savez",
        "savez_compressed",
        "savetxt",
        "dump",
        "write",
        "write_text",
        "write_bytes",
        "mkdir",
        "makedirs",
        "imwrite",
        "imsave",
        "touch",
        "unlink",
        "remove",
        "rmtree",
        "rename",
        "replace",
    }
)


# ----------------------------------------------------------------------------- helpers


def _base_name(node: ast.AST) -> str | None:
    """``df`` for ``df``, ``df.a.b``, ``df["x"][0]``, ``df.loc[0]``; None for ``f().x``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


_SHELL_MAGICS = frozenset({"bash", "sh", "script", "system", "sx"})
_SUBPROCESS = frozenset(
    {"run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput"}
)
#: characters a shell command line has and a data file's path (almost) never does
_SHELL_SYNTAX = frozenset("<>|;`")


def _is_shell_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    attr = node.func.attr
    owner = node.func.value
    owner_name = owner.id if isinstance(owner, ast.Name) else None
    # ``__import__('os').system(…)`` and ``get_ipython().system(…)`` (what ``!cmd`` becomes)
    if attr in ("system", "getoutput", "popen") and (
        isinstance(owner, ast.Call) or owner_name == "os"
    ):
        return True
    if attr in ("run_cell_magic", "run_line_magic") and node.args:
        first = node.args[0]
        return isinstance(first, ast.Constant) and first.value in _SHELL_MAGICS
    return owner_name == "subprocess" and attr in _SUBPROCESS


def _looks_like_path(value: str) -> bool:
    if not value or len(value) > 1024 or "\n" in value or "://" in value or value.isspace():
        return False
    if "$(" in value or not _SHELL_SYNTAX.isdisjoint(value):
        return False  # a command line (``echo c3 >> run.log``), not a file name
    name = value.rstrip("/").rsplit("/", 1)[-1]
    if "." in name:
        suffix = name.rsplit(".", 1)[1]
        return 1 <= len(suffix) <= 8 and suffix.isalnum() and name.rsplit(".", 1)[0] != ""
    return "/" in value and " " not in value


def _open_mode_writes(call: ast.Call) -> bool:
    mode: ast.AST | None = call.args[1] if len(call.args) > 1 else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(ch in mode.value for ch in "wax+")
    return False


class _Acc:
    """Names seen in a region of code whose evaluation order does not matter to us."""

    __slots__ = (
        "loads",
        "stores",
        "mutated",
        "paths",
        "written",
        "global_decls",
        "star",
        "call_args",
        "method_calls",
        "assigned",
    )

    def __init__(self) -> None:
        self.loads: set[str] = set()
        self.stores: set[str] = set()
        self.mutated: set[str] = set()
        self.paths: list[str] = []
        self.written: list[str] = []
        self.call_args: dict[str, set[str]] = {}
        self.method_calls: dict[str, set[str]] = {}
        self.global_decls: set[str] = set()
        self.star = False
        self.assigned: set[str] = set()


# ----------------------------------------------------------------------------- expressions


def _scan_expr(node: ast.AST | None, acc: _Acc) -> None:
    if node is None:
        return
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load):
            acc.loads.add(node.id)
        elif isinstance(node.ctx, ast.Store):
            acc.stores.add(node.id)
        else:  # del x: the name is read (must exist) and unbound
            acc.loads.add(node.id)
            acc.stores.add(node.id)
        return
    if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
        base = _base_name(node)
        if base is not None:
            acc.mutated.add(base)
            acc.assigned.add(base)
            acc.loads.add(base)
        _scan_expr(node.value, acc)
        if isinstance(node, ast.Subscript):
            _scan_expr(node.slice, acc)
        return
    if isinstance(node, ast.Lambda):
        _scan_arguments_defaults(node.args, acc)
        info = _lambda_info(node)
        # a lambda handed to map/apply/sort runs right away: charge its reads to the cell
        acc.loads |= info.free_globals
        acc.mutated |= info.mutated_globals
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        _scan_comprehension(node, acc)
        return
    if isinstance(node, ast.NamedExpr):
        _scan_expr(node.value, acc)
        _scan_expr(node.target, acc)
        return
    if isinstance(node, ast.Call):
        _scan_call(node, acc)
    for child in ast.iter_child_nodes(node):
        _scan_expr(child, acc)


def _scan_call(call: ast.Call, acc: _Acc) -> None:
    name = _call_name(call.func)
    if isinstance(call.func, ast.Name):
        passed = {_base_name(a) for a in list(call.args) + [kw.value for kw in call.keywords]}
        passed.discard(None)
        if passed:
            acc.call_args.setdefault(call.func.id, set()).update(passed)  # type: ignore[arg-type]
    elif isinstance(call.func, ast.Attribute):
        receiver = _base_name(call.func.value)
        if receiver is not None:
            acc.method_calls.setdefault(call.func.attr, set()).add(receiver)
    if isinstance(call.func, ast.Attribute):
        inplace = any(
            kw.arg == "inplace" and isinstance(kw.value, ast.Constant) and kw.value.value is True
            for kw in call.keywords
        )
        guessed = name in MUTATING_METHODS or (
            (name or "").startswith(MUTATING_PREFIXES) and name not in RETURNS_NEW
        )
        if inplace or guessed:
            base = _base_name(call.func.value)
            if base is not None:
                acc.mutated.add(base)
    if _is_shell_call(call):
        # a shell command's text is opaque (the cell is marked ``shell``): never a path it read
        return
    writes = name in WRITER_CALLS or (name == "open" and _open_mode_writes(call))
    for arg in list(call.args) + [kw.value for kw in call.keywords]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if _looks_like_path(arg.value):
                (acc.written if writes else acc.paths).append(arg.value)


def _scan_comprehension(node: ast.AST, acc: _Acc) -> None:
    inner = _Acc()
    bound: set[str] = set()
    gens = node.generators  # type: ignore[attr-defined]
    for i, gen in enumerate(gens):
        # the first iterable is evaluated in the enclosing scope
        _scan_expr(gen.iter, acc if i == 0 else inner)
        tgt = _Acc()
        _scan_expr(gen.target, tgt)
        bound |= tgt.stores
        for cond in gen.ifs:
            _scan_expr(cond, inner)
    if isinstance(node, ast.DictComp):
        _scan_expr(node.key, inner)
        _scan_expr(node.value, inner)
    else:
        _scan_expr(node.elt, inner)  # type: ignore[attr-defined]
    acc.loads |= inner.loads - bound
    acc.stores |= inner.stores - bound  # walrus targets bind in the enclosing scope
    acc.mutated |= inner.mutated - bound
    acc.assigned |= inner.assigned - bound
    acc.paths.extend(inner.paths)
    acc.written.extend(inner.written)
    for fname, names in inner.call_args.items():
        acc.call_args.setdefault(fname, set()).update(names - bound)
    for meth, names in inner.method_calls.items():
        acc.method_calls.setdefault(meth, set()).update(names - bound)


def _scan_arguments_defaults(args: ast.arguments, acc: _Acc) -> None:
    for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
        _scan_expr(d, acc)
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None and a.annotation is not None:
            _scan_expr(a.annotation, acc)


def _param_names(args: ast.arguments) -> set[str]:
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    return names


# ----------------------------------------------------------------------------- scopes


def _finish_scope(acc: _Acc, params: set[str]) -> FunctionInfo:
    local = (acc.stores | params) - acc.global_decls
    free = (acc.loads - local) | (acc.loads & acc.global_decls)
    mutated = (acc.stores & acc.global_decls) | (acc.mutated - local)
    return FunctionInfo(frozenset(free), frozenset(mutated), bool(acc.mutated & params))


def _lambda_info(node: ast.Lambda) -> FunctionInfo:
    acc = _Acc()
    _scan_expr(node.body, acc)
    return _finish_scope(acc, _param_names(node.args))


def _function_info(node: ast.FunctionDef | ast.AsyncFunctionDef) -> FunctionInfo:
    acc = _Acc()
    for stmt in node.body:
        _scan_stmt(stmt, acc)
    return _finish_scope(acc, _param_names(node.args))


def _class_parts(node: ast.ClassDef) -> tuple[_Acc, FunctionInfo]:
    """Reads of the class body (run at definition) and what its methods read when called."""
    body = _Acc()
    methods = FunctionInfo()
    changing: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in stmt.decorator_list:
                _scan_expr(dec, body)
            _scan_arguments_defaults(stmt.args, body)
            info = _function_info(stmt)
            methods = methods.merge(info)
            if info.mutates_args and stmt.name != "__init__":
                changing.add(stmt.name)
            body.stores.add(stmt.name)
        else:
            _scan_stmt(stmt, body)
    # names bound in the class body are class attributes, not module names
    immediate = _Acc()
    immediate.loads = body.loads - body.stores
    immediate.mutated = body.mutated - body.stores
    immediate.paths = body.paths
    immediate.written = body.written
    # methods change ``self``, not what the constructor is given
    return immediate, FunctionInfo(
        methods.free_globals, methods.mutated_globals, mutating_methods=frozenset(changing)
    )


def _scan_header(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, acc: _Acc) -> None:
    for dec in node.decorator_list:
        _scan_expr(dec, acc)
    if isinstance(node, ast.ClassDef):
        for b in node.bases:
            _scan_expr(b, acc)
        for kw in node.keywords:
            _scan_expr(kw.value, acc)
    else:
        _scan_arguments_defaults(node.args, acc)
        if node.returns is not None:
            _scan_expr(node.returns, acc)


def _scan_stmt(stmt: ast.stmt, acc: _Acc) -> None:
    """Order-insensitive scan of a statement inside a function or class body."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        _scan_header(stmt, acc)
        info = _function_info(stmt)
        acc.loads |= info.free_globals
        acc.mutated |= info.mutated_globals
        acc.stores.add(stmt.name)
        return
    if isinstance(stmt, ast.ClassDef):
        _scan_header(stmt, acc)
        immediate, methods = _class_parts(stmt)
        acc.loads |= immediate.loads | methods.free_globals
        acc.mutated |= immediate.mutated | methods.mutated_globals
        acc.stores.add(stmt.name)
        return
    if isinstance(stmt, (ast.Global, ast.Nonlocal)):
        # nonlocal names resolve in an enclosing function: neither local nor a module read here
        if isinstance(stmt, ast.Global):
            acc.global_decls.update(stmt.names)
        else:
            acc.stores.update(stmt.names)
        return
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            if alias.name == "*":
                acc.star = True
                continue
            acc.stores.add(alias.asname or alias.name.split(".")[0])
        return
    if isinstance(stmt, ast.AugAssign):
        base = _base_name(stmt.target)
        if base is not None:
            acc.loads.add(base)
            acc.mutated.add(base)
            acc.assigned.add(base)
            if isinstance(stmt.target, ast.Name):
                acc.stores.add(base)
        if isinstance(stmt.target, (ast.Attribute, ast.Subscript)):
            _scan_expr(stmt.target.value, acc)
            if isinstance(stmt.target, ast.Subscript):
                _scan_expr(stmt.target.slice, acc)
        _scan_expr(stmt.value, acc)
        return
    if isinstance(stmt, ast.ExceptHandler):
        _scan_expr(stmt.type, acc)
        if stmt.name:
            acc.stores.add(stmt.name)
        for s in stmt.body:
            _scan_stmt(s, acc)
        return
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, (ast.stmt, ast.ExceptHandler)):
            _scan_stmt(child, acc)  # type: ignore[arg-type]
        elif isinstance(child, ast.match_case):
            _scan_match_case(child, acc)
        else:
            _scan_expr(child, acc)


def _scan_match_case(case: ast.match_case, acc: _Acc) -> None:
    for node in ast.walk(case.pattern):
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            acc.stores.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            acc.stores.add(node.rest)
        elif isinstance(node, ast.MatchValue):
            _scan_expr(node.value, acc)
        elif isinstance(node, ast.MatchClass):
            _scan_expr(node.cls, acc)
    _scan_expr(case.guard, acc)
    for s in case.body:
        _scan_stmt(s, acc)


# ----------------------------------------------------------------------------- module level
