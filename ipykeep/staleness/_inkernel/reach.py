"""Which objects the code run since the last observation could have changed.

Sent into the kernel as source and installed once as a module (standard library only; numpy
and pandas are looked up in ``sys.modules`` only). ``statemon`` uses it to skip re-hashing big
values (numpy arrays, pandas frames, series and indexes) that nothing run since its last look
could have reached: hashing every frame of the namespace after every cell costs more than the
cells of a long notebook themselves.

``install()`` registers an AST transformer on the shell (it changes nothing: it reads every
execution's code, silent ones included, after IPython turned magics into calls) that records
the names the code mentions. ``reached(ns)`` then returns what those names reach, looked up
both before the code ran (a name deleted or rebound by the cell still reaches what it held) and
now, following containers, object attributes, notebook functions (the globals their code names,
closures, defaults), notebook classes, bound methods — and the memory under arrays: an array
or frame sharing a buffer with a reached array counts as reached.

It also keeps, per window, how the code used what it mentions (``mentions()``): whether it
formats text or imports, the attribute names it named, and the names it only *read* — as
``x.attr`` values (not called), as arguments of ``repr``/``str``/``print``/``len``…, inside an
f-string, or displayed as a bare expression. statemon tells cache fills from changes with it and
finds the readers of process-wide settings.

It answers ``None`` ("anything may have changed: look at everything") when it cannot bound what
ran: code that reaches globals by name (``globals()``, ``exec``, ``get_ipython`` — so every
magic and shell escape —, ``sys``, ``gc``, ``inspect``, ``__main__``…), a reached object graph
larger than ``BUDGET`` or the namespace itself (a generator's frame), a module or function
loaded from outside the installed libraries (a local module keeps state of its own), threads
started since install other than the kernel's own and ipykeep's (``ipykeep-*``: they only
read), open comms (widget callbacks run outside cells), code run on another thread
(subshells), user expressions that are not ipykeep's probes, or ipyflow's tracer; and when
statemon says the walks would cost more than they spare (``worth_walking``).

What it does not see: installed libraries' own module state. A big array or frame that a
library keeps a reference to and changes in a later call that names neither the value nor an
object holding it is noticed only when a cell names it (its change is then charged to that
cell). ``FULL_EVERY`` bounds how long that can go unseen: every so many observations, all
values are hashed again.
"""

import ast
import sys
import threading
import types
from typing import Any

PROTOCOL_VERSION = 1
BUDGET = 5000
FULL_EVERY = 50
_STATE_KEY = "_ipykeep_reach_state"
#: names through which code reaches globals (or any object) without naming them
ESCAPES = frozenset(
    {
        "globals",
        "locals",
        "vars",
        "dir",
        "eval",
        "exec",
        "compile",
        "execfile",
        "get_ipython",
        "__import__",
        "__builtins__",
        "builtins",
        "sys",
        "gc",
        "inspect",
        "ctypes",
        "importlib",
        "__main__",
        "runpy",
        "_ih",
        "_oh",
        "Out",
        "In",
        "__dict__",
        "__globals__",
        "f_globals",
        "f_locals",
        "gi_frame",
        "cr_frame",
        "f_back",
        "tb_frame",
        "__closure__",
        "cell_contents",
    }
)
_LEAF = (int, float, complex, bool, str, bytes, type(None), range, slice)


def _ours(expression):
    """ipykeep's own probe calls and helper installs (they name an ``_ipykeep…`` module in
    ``sys.modules``); ``run_untraced`` carries user code."""
    text = str(expression)
    return "modules" in text and "_ipykeep" in text and "run_untraced" not in text


_state = sys.__dict__.setdefault(
    _STATE_KEY,
    {
        "installed": False,
        "names": set(),
        "full": True,
        "pre": set(),
        "threads": set(),
        "ns": None,
        "count": 0,
    },
)
for _key, _empty in (("readonly", set), ("mixed", set), ("attrs", set)):
    _state.setdefault(_key, _empty())
_state.setdefault("formats", False)
_state.setdefault("imports", False)
_state.setdefault("escaped", False)

#: calls that only read their arguments (``repr(fig)``): an argument passed to one is read only
READERS = frozenset(
    {"repr", "str", "print", "format", "display", "len", "type", "id", "isinstance", "hash"}
)
#: calls and methods that turn values into text
FORMATTERS = frozenset(
    {"print", "str", "repr", "format", "display", "ascii", "to_string", "to_html", "to_markdown"}
)


class _Unbounded(Exception):
    pass


class _Recorder(ast.NodeTransformer):
    """Records the names an execution mentions; returns the tree unchanged. IPython drops a
    transformer that raises, so nothing escapes."""

    def visit(self, node):
        try:
            _record(node)
        except Exception:
            _state["full"] = True
        return node


def _record(tree):
    if threading.current_thread() is not threading.main_thread():
        _state["full"] = True  # a subshell: runs beside the main shell's cell
        return
    names = _scan(tree)
    if names & ESCAPES:
        _state["full"] = True
        _state["escaped"] = True
    _state["names"] |= names
    if not _state.get("worth", True):
        _state["full"] = True  # nothing big enough to spare: the next look is a full one
        return
    ns = _state["ns"]
    if ns is not None and not _state["full"]:
        # what the names hold before the code runs: a name the code rebinds or deletes may
        # still have been used to change what it held
        try:
            _state["pre"] |= _walk([ns[n] for n in names if n in ns], ns)
        except _Unbounded:
            _state["full"] = True


def _read_only(node, parent, grand):
    """Whether the ``Name`` ``node`` (a load) is only read where it stands (module doc)."""
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if not isinstance(parent.ctx, ast.Load):
            return False  # ``x.attr = …``, ``del x.attr``
        called = isinstance(grand, ast.Call) and grand.func is parent
        chained = isinstance(grand, (ast.Attribute, ast.Subscript)) and grand.value is parent
        return not called and not chained and not isinstance(grand, ast.AugAssign)
    if isinstance(parent, ast.Call) and node in parent.args:
        return isinstance(parent.func, ast.Name) and parent.func.id in READERS
    return isinstance(parent, (ast.FormattedValue, ast.Expr))


def _scan(tree):
    """The names ``tree`` mentions; records on the way how it uses them (``mentions``). One
    pass over the tree, each node with its parent and grandparent."""
    names = set()
    formats = imports = escaped = False
    attrs, readonly, mixed = _state["attrs"], _state["readonly"], _state["mixed"]
    stack = [(tree, None, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, parent, grand = pop()
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)
            if type(node.ctx) is ast.Load and _read_only(node, parent, grand):
                readonly.add(node.id)
            else:
                mixed.add(node.id)
            continue
        if kind is ast.Attribute:
            attrs.add(node.attr)
            if node.attr in ESCAPES:
                escaped = True
        elif kind is ast.Call:
            func = node.func
            name = func.id if type(func) is ast.Name else getattr(func, "attr", None)
            formats = formats or name in FORMATTERS
        elif kind is ast.JoinedStr:
            formats = True
        elif kind is ast.BinOp and type(node.op) is ast.Mod:
            formats = formats or isinstance(node.left, (ast.Constant, ast.JoinedStr))
        elif kind is ast.alias:
            names.add(node.name.split(".")[0])
            if node.asname:
                names.add(node.asname)
        elif kind is ast.Import:
            imports = True
        elif kind is ast.ImportFrom:
            imports = True
            if node.module:
                names.add(node.module.split(".")[0])
        elif kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)
        for child in ast.iter_child_nodes(node):
            push((child, node, parent))
    body = getattr(tree, "body", None)
    if body and isinstance(body[-1], ast.Expr):
        formats = True  # the last expression is displayed
    if escaped:
        _state["full"] = True
    _state["formats"] = _state["formats"] or formats
    _state["imports"] = _state["imports"] or imports
    _state["escaped"] = _state["escaped"] or escaped
    return names


def mentions():
    """How the code run since the last ``reached`` used what it named (module doc)."""
    mixed = _state["mixed"]
    return {
        "names": set(_state["names"]),
        "readonly": _state["readonly"] - mixed,
        "mixed": set(mixed),
        "attrs": set(_state["attrs"]),
        "formats": _state["formats"],
        "imports": _state["imports"],
        "escaped": _state["escaped"],
    }


def reaches(objs, ns, target):
    """Whether ``target`` (an id) is reachable from ``objs``; True when that cannot be bounded."""
    try:
        return target in _walk(objs, ns)
    except Exception:
        return True


def _library_paths():
    import sysconfig

    out: set[Any] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            out.add(p)
    for p in sys.path:
        if "site-packages" in p or "dist-packages" in p:
            out.add(p)
    return tuple(sorted(out))


_LIBS = None


def _is_library_file(path):
    global _LIBS
    if _LIBS is None:
        _LIBS = _library_paths()
    if not isinstance(path, str):
        return True  # built-in or namespace module: no state of a local file
    return path.startswith((*_LIBS, "<"))


def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def roots_of_array(a, np):
    """The object owning an array's memory (the end of its ``base`` chain)."""
    base = a
    for _ in range(64):
        if isinstance(base, np.ndarray):
            nxt = base.base
        elif isinstance(base, memoryview):  # ``np.frombuffer(bytearray)``: the bytearray
            nxt = base.obj
        else:
            nxt = None
        if nxt is None:
            break
        base = nxt
    return id(base)


def _pandas_arrays(obj, pd):
    """numpy arrays under a pandas object (blocks, index values), for their memory roots."""
    out = []
    mgr = getattr(obj, "_mgr", None) if isinstance(obj, (pd.DataFrame, pd.Series)) else None
    if mgr is not None:
        for blk in getattr(mgr, "blocks", ()):
            out.append(blk.values)
        out.append(obj.index)
        if isinstance(obj, pd.DataFrame):
            out.append(obj.columns)
    elif isinstance(obj, pd.Index) and not isinstance(obj, pd.RangeIndex):
        # a RangeIndex holds no array (``_values`` would build one)
        out.append(obj._values)
    return out


def _walk(objs, ns):
    """ids of every object reachable from ``objs`` (see the module docstring), plus
    ``("root", id)`` for the memory owners of reached arrays."""
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")
    seen = set()
    out: set[Any] = set()
    stack = list(objs)
    gc = sys.modules.get("gc") or __import__("gc")
    while stack:
        o = stack.pop()
        i = id(o)
        if i in seen:
            continue
        seen.add(i)
        if len(seen) > BUDGET:
            raise _Unbounded
        if isinstance(o, _LEAF):
            continue
        if o is ns:
            raise _Unbounded
        out.add(i)
        if isinstance(o, types.ModuleType):
            if not _is_library_file(getattr(o, "__file__", None)):
                raise _Unbounded
            continue
        if np is not None and isinstance(o, np.ndarray):
            out.add(("root", roots_of_array(o, np)))
            if o.dtype.hasobject:
                if o.size > BUDGET:
                    raise _Unbounded
                stack.extend(o.ravel().tolist())
            continue
        if pd is not None and isinstance(o, (pd.DataFrame, pd.Series, pd.Index)):
            for arr in _pandas_arrays(o, pd):
                stack.append(arr)
                if isinstance(arr, pd.Index):
                    continue  # walked as an index (a RangeIndex builds ``_data`` on demand)
                for name in ("_ndarray", "_data", "_mask", "_codes"):
                    try:
                        inner = object.__getattribute__(arr, name)
                    except Exception:
                        continue
                    stack.append(inner)
            attrs = getattr(o, "attrs", None) if not isinstance(o, pd.Index) else None
            if attrs:
                stack.append(attrs)
            continue
        if isinstance(o, types.FunctionType):
            if o.__globals__ is not ns:
                if not _is_library_file(o.__globals__.get("__file__")):
                    raise _Unbounded
                continue
            names: set[str] = set()
            _code_names(o.__code__, names)
            if names & ESCAPES:
                raise _Unbounded
            stack.extend(ns[n] for n in names if n in ns)
            for cell in o.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:
                    pass
            stack.extend(o.__defaults__ or ())
            stack.extend((o.__kwdefaults__ or {}).values())
            continue
        if isinstance(o, type):
            if (
                o.__module__ == "__main__"
                or getattr(sys.modules.get(o.__module__), "__dict__", None) is ns
            ):
                stack.extend(o.__dict__.values())
                stack.extend(o.__bases__)
            elif not _is_library_file(getattr(sys.modules.get(o.__module__), "__file__", None)):
                raise _Unbounded
            continue
        if isinstance(o, dict):
            stack.extend(o.values())
            continue
        if isinstance(o, (list, tuple, set, frozenset)):
            if len(o) > BUDGET:
                raise _Unbounded
            stack.extend(o)
            continue
        if isinstance(o, (types.BuiltinFunctionType, types.CodeType)):
            continue
        # anything else (instances, bound methods, partials, generators…): what the garbage
        # collector sees it hold, its class included (a notebook class leads to its methods)
        stack.extend(gc.get_referents(o))
    return out


def worth_walking(flag):
    """Whether the values statemon would spare re-hashing are worth the walks (see statemon)."""
    _state["worth"] = bool(flag)


def owners(obj, ns):
    """The memory owners (``("root", id)``) under a big value; raises when they cannot be
    bounded."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
        return {("root", roots_of_array(obj, np))}
    return {x for x in _walk([obj], ns) if isinstance(x, tuple)}


#: threads the kernel itself starts later (subshells run their code through the transformer)
_KERNEL_THREADS = ("ipykernel", "IPython", "zmq", "jupyter_client", "tornado", "debugpy")


def _foreign_threads():
    """Threads started since install that are not the kernel's own (they may change anything
    at any time)."""
    known = _state["threads"]
    if not isinstance(known, set):
        return True
    return any(
        t.ident not in known
        and not type(t).__module__.startswith(_KERNEL_THREADS)
        # ipykeep's own (the checkpoint writer, traceback warming) read values, never change them
        and not t.name.startswith("ipykeep-")
        for t in threading.enumerate()
    )


def _comms_open():
    for mod_name in ("comm",):
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        try:
            mgr = mod.get_comm_manager()
            if getattr(mgr, "comms", None):
                return True
        except Exception:
            return True
    return False


def install(ip, ns):
    """Start recording on shell ``ip`` whose user namespace is ``ns`` (once per process)."""
    _state["ns"] = ns
    _state["threads"] = {t.ident for t in threading.enumerate()}
    reset(True)
    if _state["installed"]:
        return
    ip.ast_transformers.append(_Recorder())
    original = ip.user_expressions

    def user_expressions(expressions):
        # the kernel's own probes are read-only; anything else may change anything
        try:
            if not all(_ours(e) for e in (expressions or {}).values()):
                _state["full"] = True
        except Exception:
            _state["full"] = True
        return original(expressions)

    ip.user_expressions = user_expressions
    _state["installed"] = True


def reset(full=False):
    _state["names"] = set()
    _state["pre"] = set()
    _state["full"] = full
    _state["readonly"] = set()
    _state["mixed"] = set()
    _state["attrs"] = set()
    _state["formats"] = _state["imports"] = _state["escaped"] = False


def reached(ns):
    """ids (and ``("root", id)`` memory owners) that code run since the last call could have
    changed, or None when that cannot be bounded. Starts the next window."""
    names = _state["names"]
    pre = _state["pre"]
    full = _state["full"] or not _state["installed"] or ns is not _state["ns"]
    _state["count"] += 1
    if _state["count"] % FULL_EVERY == 0:
        full = True
    reset()
    if full or _foreign_threads() or "ipyflow" in sys.modules or _comms_open():
        return None
    try:
        return pre | _walk([ns[n] for n in names if n in ns], ns)
    except _Unbounded:
        return None
