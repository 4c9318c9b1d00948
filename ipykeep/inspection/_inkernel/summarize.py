"""Typed variable summaries computed inside the kernel.

This file is sent into the kernel as source and executed into a fresh module that is stored as
``sys.modules["_ipykeep_inspect"]``. It uses the standard library only, never imports ipykeep
(the kernel may run in another environment) and never imports pandas, numpy, polars, pyarrow,
xarray or torch: a library is used only when the user's code already loaded it (``sys.modules``).

Entry points return JSON text so the engine can read them from ``user_expressions`` replies:

* ``inspect_json(expr, budget_s, summarizers, cell_of)``: one summary of a variable or a safe
  dotted path (``model.coef_``, ``df["col"]``);
* ``namespace_json(budget_s, cell_of)``: every user variable with its type, shape or length,
  approximate memory and defining cell.

Time budget. Every call of user code (``__repr__``, ``__len__``, properties, summarizers...) runs
under a deadline. On the kernel's main thread the deadline is a ``SIGALRM`` interval timer whose
handler raises :class:`BudgetExceeded`, which stops hanging Python code (``time.sleep`` included)
so the shell is free again when the reply is sent; the previous handler and any running timer
(pytest-timeout uses one) are restored afterwards. Off the main thread (an ipykernel 7 subshell)
signals cannot be used, so the work runs in a daemon worker thread and the caller stops waiting
at the deadline: the worker may linger inside the hanging call, but the shell answers in time and
the worker checks the deadline between steps so it does no further work once it wakes up. Either
way a timeout gives a *degraded* summary: the type and what could be learnt before the deadline,
with the reason. The kernel is never killed nor left busy.

Custom summarizers. ``@summarizer(match=...)`` registers a function in this module's registry;
in a notebook cell ``from _ipykeep_inspect import summarizer`` works once the module is installed
(``ipykeep.inspection.summarizer`` does the same when ipykeep is importable in the kernel, and
installs this module first if needed). ``match`` is a type, a tuple of types, a dotted type name
(``"sklearn.linear_model.LinearRegression"``, matched against the whole MRO) or a predicate.
Configured ``"module:callable"`` strings are imported with importlib on each call; a configured
callable carries its match when it was decorated, otherwise it is asked about every object and
returns ``None`` when it does not apply. Order: configured summarizers (in configuration order),
then decorated ones (in registration order, a re-run cell replaces its earlier registration),
then the built-ins; the first that matches and succeeds wins, and one that raises is noted and
the next is tried.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import importlib
import inspect as _pyinspect
import json
import math
import signal
import sys
import threading
import time
import types

PROTOCOL_VERSION = 1
MODULE_NAME = "_ipykeep_inspect"
DEFAULT_BUDGET_S = 5.0
#: Largest JSON answer for one summary; bigger ones are trimmed (samples and previews first).
MAX_SUMMARY_BYTES = 4000
#: Rows used for statistics of large frames and arrays (a strided, deterministic sample).
SAMPLE_ROWS = 100_000
#: Rows scanned in full for null counts of text/object columns before a sample is used instead.
FULL_SCAN_OBJECT_ROWS = 1_000_000
#: Numeric cells scanned in full for null counts, over all columns, before a sample is used.
FULL_SCAN_NUMERIC_CELLS = 50_000_000
MAX_COLUMNS = 12
MAX_ITEMS = 8
MAX_DEPTH = 2
MAX_TEXT = 120
MAX_REPR = 200
MAX_NAMESPACE = 1000
#: Share of the whole budget one namespace variable may use before it is listed degraded.
PER_VARIABLE_SHARE = 0.25

IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


class BudgetExceeded(BaseException):
    """The time budget ran out. A BaseException so ``except Exception`` in user code lets it by."""


# --------------------------------------------------------------------------- deadlines


class _Deadline:
    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.end = time.monotonic() + budget_s

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> None:
        """Called between steps so a worker that outlived its deadline stops calling user code."""
        if time.monotonic() >= self.end:
            raise BudgetExceeded()


_ALARM_BUSY = threading.Lock()


def _alarm_usable() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and not _ALARM_BUSY.locked()
    )


def _run_with_alarm(fn, timeout_s: float):
    state = {"active": True}

    def on_alarm(signum, frame):
        if state["active"]:
            # Fire again shortly in case user code swallows the first one (bare except).
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            raise BudgetExceeded()

    with _ALARM_BUSY:
        previous = signal.getsignal(signal.SIGALRM)
        prev_delay, prev_interval = signal.setitimer(signal.ITIMER_REAL, 0)
        started = time.monotonic()
        signal.signal(signal.SIGALRM, on_alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            return fn()
        finally:
            # Disarm before restoring: the default SIGALRM action would end the kernel.
            state["active"] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
            if prev_delay > 0:
                left = max(prev_delay - (time.monotonic() - started), 0.001)
                signal.setitimer(signal.ITIMER_REAL, left, prev_interval)


def _run_in_worker(fn, timeout_s: float):
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="ipykeep-inspect", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise BudgetExceeded()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run_bounded(fn, timeout_s: float, mode: str = "auto"):
    """Return ``fn()``, or raise BudgetExceeded once ``timeout_s`` has passed.

    ``mode`` is "auto" (alarm on the main thread, worker thread elsewhere), "alarm" or "thread".
    """
    if timeout_s <= 0:
        raise BudgetExceeded()
    use_alarm = _alarm_usable() if mode == "auto" else mode == "alarm"
    return _run_with_alarm(fn, timeout_s) if use_alarm else _run_in_worker(fn, timeout_s)


# --------------------------------------------------------------------------- small helpers


def _type_names(tp) -> tuple:
    """(public name, defining name) of a type, read through ``type``'s own descriptors so no
    metaclass code runs. The public name is ``pkg.Name`` when the top-level package exports the
    type under that name (``pandas.DataFrame`` rather than ``pandas.core.frame.DataFrame``,
    whatever the library version); it is looked up in the module's ``__dict__``, never through
    a module ``__getattr__``."""
    try:
        module = type.__dict__["__module__"].__get__(tp, type)
        qual = type.__dict__["__qualname__"].__get__(tp, type)
    except Exception:
        return ("?", "?")
    if not isinstance(module, str) or module == "builtins":
        return (str(qual), str(qual))
    full = f"{module}.{qual}"
    top = module.split(".", 1)[0]
    if top != module:
        try:
            pkg = sys.modules.get(top)
            if pkg is not None and vars(pkg).get(qual) is tp:
                return (f"{top}.{qual}", full)
        except Exception:
            pass
    return (full, full)


def _type_name(tp) -> str:
    return _type_names(tp)[0]


def _mro_names(tp) -> list:
    """Names of the type and its bases, public and defining (for matching by dotted name)."""
    try:
        mro = type.__dict__["__mro__"].__get__(tp, type)
    except Exception:
        mro = (tp,)
    names = []
    for cls in mro:
        for name in _type_names(cls):
            if name not in names:
                names.append(name)
    return names


def _is(obj, cls) -> bool:
    # issubclass on type(obj), unlike isinstance, never reads a user-defined ``__class__``.
    try:
        return cls is not None and issubclass(type(obj), cls)
    except Exception:
        return False


def _mod_attr(module_name: str, *path: str):
    mod = sys.modules.get(module_name)
    for part in path:
        if mod is None:
            return None
        mod = getattr(mod, part, None)
    return mod


def _short(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _err(exc: BaseException) -> str:
    try:
        msg = str(exc)
    except Exception:
        msg = "<unprintable>"
    return _short(f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__, 160)


def _num(value):
    """A JSON-safe number: finite floats rounded to 6 significant digits, others as text."""
    try:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) or _is(value, _mod_attr("numpy", "integer")):
            value = int(value)
            return value if abs(value) < 2**53 else str(value)
        f = float(value)
    except Exception:
        return _short(str(value), 40)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return float(f"{f:.6g}")


_SCALARS = (bool, int, float, complex, type(None))


def _leaf(value, limit: int = 40):
    """A short JSON value standing for one element of a sample or preview."""
    tp = type(value)
    if tp is str:
        return _short(value, limit)
    if tp in (bool, type(None)):
        return value
    if tp in (int, float):
        return _num(value)
    np_generic = _mod_attr("numpy", "generic")
    if _is(value, np_generic):
        try:
            return _leaf(value.item(), limit)
        except Exception:
            pass
    return _short(_safe_str(value), limit)


def _safe_str(value) -> str:
    try:
        return str(value)
    except BudgetExceeded:
        raise
    except Exception as exc:
        return f"<{_type_name(type(value))}: str() failed: {_err(exc)}>"


def _safe_repr(value, limit: int = MAX_REPR) -> str:
    try:
        return _short(repr(value), limit)
    except BudgetExceeded:
        raise
    except Exception as exc:
        return f"<{_type_name(type(value))}: repr() failed: {_err(exc)}>"


# --------------------------------------------------------------------------- kinds


def _kind_of(obj) -> str:
    """Which built-in summarizer applies, decided from the type alone (no user code)."""
    if _is(obj, _mod_attr("pandas", "DataFrame")):
        return "dataframe"
    if _is(obj, _mod_attr("pandas", "Series")):
        return "series"
    if _is(obj, _mod_attr("numpy", "ndarray")):
        return "ndarray"
    if _is(obj, _mod_attr("polars", "DataFrame")):
        return "polars_dataframe"
    if _is(obj, _mod_attr("torch", "Tensor")):
        return "tensor"
    if _is(obj, _mod_attr("pyarrow", "Table")):
        return "arrow_table"
    if _is(obj, _mod_attr("xarray", "DataArray")) or _is(obj, _mod_attr("xarray", "Dataset")):
        return "xarray"
    if _is(obj, _SCALARS) or _is(obj, _mod_attr("numpy", "generic")):
        return "scalar"
    if _is(obj, (str, bytes, bytearray)):
        return "text"
    if _is(obj, (dict, list, tuple, set, frozenset)):
        return "container"
    if _is(obj, types.ModuleType):
        return "module"
    if _is(obj, type):
        return "class"
    if _is(
        obj,
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            types.BuiltinMethodType,
        ),
    ):
        return "function"
    for name in _mro_names(type(obj)):
        if name in ("decimal.Decimal", "fractions.Fraction") or name.startswith("datetime."):
            return "scalar"
    return "object"


_EXACT_SAFE = frozenset({bool, int, float, complex, type(None), str, bytes, bytearray})
_EXACT_CONTAINERS = frozenset({dict, list, tuple, set, frozenset})


def _approx_container_bytes(obj) -> int:
    """Shallow size plus the sizes of a few elements, scaled to the length (exact builtins only)."""
    size = sys.getsizeof(obj)
    n = len(obj)
    if not n:
        return size
    values = obj.values() if type(obj) is dict else obj
    items = []
    for i, v in enumerate(values):
        if i >= 64:
            break
        items.append(v)
    if type(obj) is dict:
        for i, k in enumerate(obj):
            if i >= 64:
                break
            items.append(k)
    inner = sum(sys.getsizeof(v) for v in items if type(v) in _EXACT_SAFE)
    per_item = inner / max(len(items), 1)
    factor = 2 if type(obj) is dict else 1
    return int(size + per_item * n * factor)


# --------------------------------------------------------------------------- built-in summarizers
#
# Each fills ``out`` step by step, so a timeout still returns what was learnt so far.


def _frame_sample(df, rows: int):
    n = len(df)
    if n <= SAMPLE_ROWS:
        return df, False
    step = -(-n // SAMPLE_ROWS)
    return df.iloc[::step], True


def _column_stats(col, out: dict, pd) -> None:
    api = pd.api.types
    dtype = col.dtype
    if api.is_bool_dtype(dtype):
        counts = col.value_counts(dropna=True)
        out["top"] = [[_leaf(k), int(v)] for k, v in list(counts.items())[:3]]
    elif api.is_numeric_dtype(dtype) and not api.is_complex_dtype(dtype):
        clean = col.dropna()
        if len(clean):
            out["min"] = _num(clean.min())
            out["max"] = _num(clean.max())
            out["mean"] = _num(clean.mean())
            out["std"] = _num(clean.std()) if len(clean) > 1 else 0
    elif api.is_datetime64_any_dtype(dtype) or api.is_timedelta64_dtype(dtype):
        clean = col.dropna()
        if len(clean):
            out["min"] = _short(str(clean.min()), 40)
            out["max"] = _short(str(clean.max()), 40)
    else:
        counts = col.value_counts(dropna=True)
        out["unique"] = int(len(counts))
        out["top"] = [[_leaf(k, 30), int(v)] for k, v in list(counts.items())[:3]]


def _summarize_dataframe(df, out: dict, ctx) -> None:
    pd = sys.modules["pandas"]
    api = pd.api.types
    n_rows, n_cols = df.shape
    out["shape"] = [int(n_rows), int(n_cols)]
    out["memory_bytes"] = int(df.memory_usage(deep=False, index=True).sum())
    ctx.note(out, "memory is shallow (object and string contents not counted)")
    ctx.deadline.check()
    sample, sampled = _frame_sample(df, SAMPLE_ROWS)
    if sampled:
        out["sample_rows"] = int(len(sample))
        ctx.note(out, f"stats from a {len(sample):,}-row strided sample of {n_rows:,} rows")
    columns: list[dict] = []
    out["columns"] = columns
    numeric_budget = FULL_SCAN_NUMERIC_CELLS
    estimated_nulls = 0
    for i in range(min(n_cols, MAX_COLUMNS)):
        ctx.deadline.check()
        name = df.columns[i]
        col = df.iloc[:, i]
        entry = {"name": _leaf(name, 40), "dtype": _short(str(col.dtype), 30)}
        columns.append(entry)
        numeric = api.is_numeric_dtype(col.dtype) or api.is_datetime64_any_dtype(col.dtype)
        if (
            not sampled
            or (numeric and numeric_budget >= n_rows)
            or (not numeric and n_rows <= FULL_SCAN_OBJECT_ROWS)
        ):
            entry["nulls"] = int(col.isna().sum())
            if numeric:
                numeric_budget -= n_rows
        else:
            part = sample.iloc[:, i]
            entry["nulls"] = int(round(int(part.isna().sum()) * n_rows / max(len(part), 1)))
            estimated_nulls += 1
        ctx.deadline.check()
        _column_stats(sample.iloc[:, i], entry, pd)
    if estimated_nulls:
        ctx.note(out, f"nulls of {estimated_nulls} column(s) estimated from the sample")
    if n_cols > MAX_COLUMNS:
        out["columns_omitted"] = int(n_cols - MAX_COLUMNS)
        rest = [
            f"{_leaf(c, 30)}:{t}" for c, t in zip(df.columns[MAX_COLUMNS:], df.dtypes[MAX_COLUMNS:])
        ]
        out["more_columns"] = _short(", ".join(rest[:40]), 300)
    ctx.deadline.check()
    out["index"] = _short(f"{type(df.index).__name__}[{df.index.dtype}]", 60)
    head = df.iloc[:3, :MAX_COLUMNS]
    out["sample"] = [[_leaf(v, 30) for v in row] for row in head.itertuples(index=False, name=None)]


def _summarize_series(s, out: dict, ctx) -> None:
    pd = sys.modules["pandas"]
    n = len(s)
    out["shape"] = [int(n)]
    out["dtype"] = _short(str(s.dtype), 30)
    if s.name is not None:
        out["series_name"] = _leaf(s.name, 60)
    out["memory_bytes"] = int(s.memory_usage(deep=False, index=True))
    ctx.deadline.check()
    sample, sampled = _frame_sample(s, SAMPLE_ROWS)
    if sampled:
        out["sample_rows"] = int(len(sample))
        ctx.note(out, f"stats from a {len(sample):,}-row strided sample of {n:,} rows")
    out["nulls"] = (
        int(s.isna().sum())
        if n <= FULL_SCAN_OBJECT_ROWS or not sampled
        else int(round(int(sample.isna().sum()) * n / max(len(sample), 1)))
    )
    ctx.deadline.check()
    stats: dict = {}
    _column_stats(sample, stats, pd)
    if stats:
        out["stats"] = stats
    out["index"] = _short(f"{type(s.index).__name__}[{s.index.dtype}]", 60)
    out["sample"] = [_leaf(v, 30) for v in s.iloc[:5].tolist()]


def _array_sample(a, limit: int):
    sample = a
    sampled = False
    while sample.ndim > 0 and sample.size > limit:
        rows = sample.shape[0]
        per_row = sample.size // max(rows, 1)
        if per_row > limit:
            sample = sample[0]
        else:
            sample = sample[:: -(-sample.size // limit)]
        sampled = True
    return sample, sampled


def _summarize_ndarray(a, out: dict, ctx) -> None:
    np = sys.modules["numpy"]
    out["shape"] = [int(d) for d in a.shape]
    out["dtype"] = str(a.dtype)
    out["memory_bytes"] = int(a.nbytes)
    ctx.deadline.check()
    kind = a.dtype.kind
    if a.size and kind in "biuf":
        sample, sampled = _array_sample(a, 1_000_000)
        if sampled:
            ctx.note(out, f"stats from a {sample.size:,}-element sample of {a.size:,}")
        stats: dict = {}
        flat = np.asarray(sample, dtype=float).ravel()
        finite = flat[np.isfinite(flat)]
        if kind == "f":
            stats["nans"] = int(np.isnan(flat).sum())
        if finite.size:
            stats["min"] = _num(finite.min())
            stats["max"] = _num(finite.max())
            stats["mean"] = _num(finite.mean())
            stats["std"] = _num(finite.std())
        out["stats"] = stats
    elif a.size and kind in "mM":
        stats = {"min": str(a.min()), "max": str(a.max())}
        out["stats"] = stats
    ctx.deadline.check()
    out["sample"] = [_leaf(v, 30) for v in a.flat[:6].tolist()] if a.size else []


def _summarize_polars(df, out: dict, ctx) -> None:
    n_rows, n_cols = df.shape
    out["shape"] = [int(n_rows), int(n_cols)]
    try:
        out["memory_bytes"] = int(df.estimated_size())
    except Exception as exc:
        ctx.note(out, f"estimated_size() failed: {_err(exc)}")
    nulls = df.null_count().row(0) if n_cols else ()
    columns: list[dict] = []
    out["columns"] = columns
    step = max(1, -(-n_rows // SAMPLE_ROWS))
    if step > 1:
        ctx.note(out, f"stats from a strided sample of every {step}th row of {n_rows:,}")
    for i, (name, dtype) in enumerate(list(df.schema.items())[:MAX_COLUMNS]):
        ctx.deadline.check()
        entry = {"name": _leaf(name, 40), "dtype": _short(str(dtype), 30), "nulls": int(nulls[i])}
        col = df.get_column(name)
        if step > 1:
            col = col.gather_every(step)
        try:
            if dtype.is_numeric():
                entry["min"] = _num(col.min())
                entry["max"] = _num(col.max())
                entry["mean"] = _num(col.mean())
        except Exception as exc:
            entry["error"] = _err(exc)
        columns.append(entry)
    if n_cols > MAX_COLUMNS:
        out["columns_omitted"] = int(n_cols - MAX_COLUMNS)
    out["sample"] = [[_leaf(v, 30) for v in row[:MAX_COLUMNS]] for row in df.head(3).rows()]


def _summarize_tensor(t, out: dict, ctx) -> None:
    out["shape"] = [int(d) for d in t.shape]
    out["dtype"] = str(t.dtype)
    out["device"] = str(t.device)
    out["requires_grad"] = bool(t.requires_grad)
    out["memory_bytes"] = int(t.element_size() * t.numel())


def _summarize_arrow(tbl, out: dict, ctx) -> None:
    out["shape"] = [int(tbl.num_rows), int(tbl.num_columns)]
    out["memory_bytes"] = int(tbl.nbytes)
    out["columns"] = [
        {
            "name": _leaf(f.name, 40),
            "dtype": _short(str(f.type), 30),
            "nulls": int(tbl.column(i).null_count),
        }
        for i, f in enumerate(list(tbl.schema)[:MAX_COLUMNS])
    ]
    if tbl.num_columns > MAX_COLUMNS:
        out["columns_omitted"] = int(tbl.num_columns - MAX_COLUMNS)


def _summarize_xarray(x, out: dict, ctx) -> None:
    out["dims"] = {str(k): int(v) for k, v in list(dict(x.sizes).items())[:MAX_COLUMNS]}
    out["memory_bytes"] = int(x.nbytes)
    if hasattr(x, "data_vars"):
        out["columns"] = [
            {"name": _leaf(k, 40), "dtype": str(v.dtype), "dims": [str(d) for d in v.dims]}
            for k, v in list(x.data_vars.items())[:MAX_COLUMNS]
        ]
    else:
        out["shape"] = [int(d) for d in x.shape]
        out["dtype"] = str(x.dtype)
    out["coords"] = [str(c) for c in list(x.coords)[:MAX_COLUMNS]]


def _summarize_scalar(v, out: dict, ctx) -> None:
    tp = type(v)
    if _is(v, _mod_attr("numpy", "generic")):
        out["dtype"] = str(v.dtype)
        v = v.item()
        tp = type(v)
    if tp in (bool, type(None)):
        out["value"] = v
    elif tp in (int, float) or _is(v, (int, float)):
        out["value"] = _num(v)
    else:
        out["value"] = _short(_safe_str(v), MAX_REPR)
    out["memory_bytes"] = int(sys.getsizeof(v))


def _summarize_text(v, out: dict, ctx) -> None:
    out["length"] = int(len(v))
    out["memory_bytes"] = int(sys.getsizeof(v))
    if _is(v, str):
        out["lines"] = int(v.count("\n") + 1) if v else 0
        out["preview"] = _short(str.__str__(v), 300)
    else:
        out["preview"] = _short(repr(bytes(v[:80])), 120)


def _preview(value, depth: int, seen: set, ctx, budget: list):
    """A nested preview of containers, capped in depth, items and total size, safe on cycles."""
    ctx.deadline.check()
    budget[0] -= 1
    if _is(value, (dict, list, tuple, set, frozenset)):
        if id(value) in seen:
            return "<cycle>"
        if depth >= MAX_DEPTH or budget[0] <= 0:
            return f"<{_type_name(type(value))} len={len(value)}>"
        seen.add(id(value))
        try:
            if _is(value, dict):
                result = {}
                for i, (k, v) in enumerate(value.items()):
                    if i >= MAX_ITEMS:
                        result["…"] = f"{len(value) - MAX_ITEMS} more"
                        break
                    key = k if type(k) is str else _safe_repr(k, 40)
                    result[_short(key, 40)] = _preview(v, depth + 1, seen, ctx, budget)
                return result
            items = []
            for i, v in enumerate(value):
                if i >= MAX_ITEMS:
                    items.append(f"… {len(value) - MAX_ITEMS} more")
                    break
                items.append(_preview(v, depth + 1, seen, ctx, budget))
            return items
        finally:
            seen.discard(id(value))
    if type(value) in (str, bool, int, float, type(None)):
        return _leaf(value, 60)
    kind = _kind_of(value)
    if kind in ("dataframe", "ndarray", "series", "tensor", "polars_dataframe"):
        try:
            return f"<{_type_name(type(value))} shape={tuple(value.shape)}>"
        except Exception:
            return f"<{_type_name(type(value))}>"
    return _safe_repr(value, 60)


def _type_counts(values, limit: int = 200) -> dict:
    counts: dict = {}
    for i, v in enumerate(values):
        if i >= limit:
            break
        name = _type_name(type(v))
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:6])


def _summarize_container(c, out: dict, ctx) -> None:
    out["length"] = int(len(c))
    if type(c) in _EXACT_CONTAINERS:
        out["memory_bytes"] = _approx_container_bytes(c)
        ctx.note(out, "memory is approximate (sampled elements)")
    else:
        out["memory_bytes"] = int(sys.getsizeof(c))
    ctx.deadline.check()
    if _is(c, dict):
        out["key_types"] = _type_counts(c.keys())
        out["value_types"] = _type_counts(c.values())
    else:
        out["item_types"] = _type_counts(c)
    if len(c) > 200:
        ctx.note(out, "element types counted over the first 200")
    ctx.deadline.check()
    out["preview"] = _preview(c, 0, set(), ctx, [60])


def _summarize_module(m, out: dict, ctx) -> None:
    out["module"] = _short(str(m.__name__), 80)
    path = getattr(m, "__file__", None)
    if isinstance(path, str):
        out["file"] = _short(path, 200)
    version = getattr(m, "__version__", None)
    if isinstance(version, str):
        out["version"] = _short(version, 40)
    names = vars(m)
    out["length"] = sum(1 for k in names if isinstance(k, str) and not k.startswith("_"))


def _doc_head(obj) -> str | None:
    doc = _pyinspect.getdoc(obj)
    if not isinstance(doc, str) or not doc.strip():
        return None
    head = doc.strip().split("\n\n")[0]
    return _short(" ".join(head.split()), 300)


def _summarize_callable(f, out: dict, ctx) -> None:
    try:
        sig = _pyinspect.signature(f)
        out["signature"] = _short(str(sig), 240)
    except (TypeError, ValueError) as exc:
        ctx.note(out, f"no signature: {_err(exc)}")
    ctx.deadline.check()
    module = getattr(f, "__module__", None)
    if isinstance(module, str):
        out["module"] = module
    doc = _doc_head(f)
    if doc:
        out["doc"] = doc
    code = getattr(f, "__code__", None)
    if code is not None and _is(code, types.CodeType):
        out["file"] = _short(code.co_filename, 200)
        out["line"] = int(code.co_firstlineno)
    if _is(f, type):
        bases = [_type_name(b) for b in f.__bases__ if b is not object]
        if bases:
            out["bases"] = bases[:6]
        methods = [
            k
            for k, v in vars(f).items()
            if isinstance(k, str) and not k.startswith("_") and callable(v)
        ]
        out["methods"] = sorted(methods)[:20]
        if len(methods) > 20:
            ctx.note(out, f"{len(methods) - 20} more public methods")


def _summarize_object(obj, out: dict, ctx) -> None:
    # The generic fallback: each probe of user code may fail on its own without losing the rest.
    try:
        out["memory_bytes"] = int(sys.getsizeof(obj))
    except BudgetExceeded:
        raise
    except Exception as exc:
        ctx.note(out, f"sizeof failed: {_err(exc)}")
    ctx.deadline.check()
    if hasattr(type(obj), "__len__"):
        try:
            out["length"] = int(len(obj))
        except BudgetExceeded:
            raise
        except Exception as exc:
            ctx.note(out, f"len() failed: {_err(exc)}")
    ctx.deadline.check()
    try:
        attrs = object.__getattribute__(obj, "__dict__")
        if type(attrs) is dict:
            public = [k for k in attrs if isinstance(k, str) and not k.startswith("_")]
            out["attributes"] = public[:20]
            if len(public) > 20:
                ctx.note(out, f"{len(public) - 20} more attributes")
    except (AttributeError, TypeError):
        pass
    ctx.deadline.check()
    out["repr"] = _safe_repr(obj)


BUILTIN_SUMMARIZERS = {
    "dataframe": _summarize_dataframe,
    "series": _summarize_series,
    "ndarray": _summarize_ndarray,
    "polars_dataframe": _summarize_polars,
    "tensor": _summarize_tensor,
    "arrow_table": _summarize_arrow,
    "xarray": _summarize_xarray,
    "scalar": _summarize_scalar,
    "text": _summarize_text,
    "container": _summarize_container,
    "module": _summarize_module,
    "class": _summarize_callable,
    "function": _summarize_callable,
    "object": _summarize_object,
}


# --------------------------------------------------------------------------- custom summarizers


class _Registered:
    __slots__ = ("match", "fn", "label")

    def __init__(self, match, fn, label: str) -> None:
        self.match = match
        self.fn = fn
        self.label = label


#: Summarizers registered with the decorator, in registration order.
_USER_SUMMARIZERS: list = []
#: Configured "module:callable" strings already imported (value: callable).
_CONFIGURED: dict = {}


def _label(fn) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{qual}"


def _check_match(match) -> None:
    ok = (
        isinstance(match, (type, str))
        or (isinstance(match, tuple) and match and all(isinstance(m, (type, str)) for m in match))
        or callable(match)
    )
    if not ok:
        raise TypeError(
            "summarizer(match=...) takes a type, a tuple of types, a dotted type name or a "
            f"predicate, not {type(match).__name__}"
        )


def summarizer(match, name: str | None = None):
    """Register a custom summarizer for the objects ``match`` selects.

    The function takes the object and returns a JSON-able dict (or ``None`` to pass). A later
    registration with the same label (module and qualified name, or ``name``) replaces the earlier
    one, so re-running the defining cell does not pile up copies.
    """
    _check_match(match)

    def register(fn):
        label = name or _label(fn)
        entry = _Registered(match, fn, label)
        for i, old in enumerate(_USER_SUMMARIZERS):
            if old.label == label:
                _USER_SUMMARIZERS[i] = entry
                break
        else:
            _USER_SUMMARIZERS.append(entry)
        try:
            fn.__ipykeep_match__ = match
        except (AttributeError, TypeError):
            pass
        return fn

    return register


def unregister(label: str) -> bool:
    """Remove a decorated summarizer by label; True when one was removed."""
    for i, old in enumerate(_USER_SUMMARIZERS):
        if old.label == label:
            del _USER_SUMMARIZERS[i]
            return True
    return False


def _adopt(previous) -> None:
    """Keep the registrations of a previously installed copy of this module (re-install)."""
    old = getattr(previous, "_USER_SUMMARIZERS", None)
    if isinstance(old, list):
        for entry in old:
            match, fn, label = (
                getattr(entry, "match", None),
                getattr(entry, "fn", None),
                getattr(entry, "label", ""),
            )
            if fn is not None and all(e.label != label for e in _USER_SUMMARIZERS):
                _USER_SUMMARIZERS.append(_Registered(match, fn, label))


def _load_configured(spec: str):
    if spec in _CONFIGURED:
        return _CONFIGURED[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"summarizer {spec!r} must look like 'module:callable'")
    target = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"summarizer {spec!r} is not callable")
    _CONFIGURED[spec] = target
    return target


def _matches(match, obj) -> bool:
    if match is None:
        return True
    if isinstance(match, str):
        return match in _mro_names(type(obj))
    if isinstance(match, type):
        return _is(obj, match)
    if isinstance(match, tuple):
        return any(_matches(m, obj) for m in match)
    return bool(match(obj))


# --------------------------------------------------------------------------- summary assembly


class _Ctx:
    def __init__(self, deadline: _Deadline, mode: str) -> None:
        self.deadline = deadline
        self.mode = mode

    @staticmethod
    def note(out: dict, text: str) -> None:
        out.setdefault("notes", []).append(text)


def _jsonable(value, depth: int = 0, budget: list | None = None):
    """Turn a user summarizer's result into bounded JSON values."""
    budget = budget if budget is not None else [200]
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    if type(value) in (str, bool, int, float, type(None)):
        return _leaf(value, 200) if type(value) is not str else _short(value, 300)
    if depth >= 4:
        return _short(_safe_str(value), 60)
    if isinstance(value, dict):
        return {
            _short(str(k), 60): _jsonable(v, depth + 1, budget) for k, v in list(value.items())[:40]
        }
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1, budget) for v in list(value)[:40]]
    return _leaf(value, 120)


def _candidates(obj, configured: list, notes: list) -> list:
    """(label, function, is_builtin) pairs to try, in order."""
    chain = []
    seen = set()
    for spec in configured:
        try:
            fn = _load_configured(spec)
        except BudgetExceeded:
            raise
        except Exception as exc:
            notes.append(f"summarizer {spec} could not be loaded: {_err(exc)}")
            continue
        chain.append((spec, getattr(fn, "__ipykeep_match__", None), fn))
        seen.add(id(fn))
    for entry in _USER_SUMMARIZERS:
        if id(entry.fn) not in seen:
            chain.append((entry.label, entry.match, entry.fn))
    picked = []
    for label, match, fn in chain:
        try:
            if _matches(match, obj):
                picked.append((label, fn, False))
        except BudgetExceeded:
            raise
        except Exception as exc:
            notes.append(f"summarizer {label} match failed: {_err(exc)}")
    kind = _kind_of(obj)
    picked.append((kind, BUILTIN_SUMMARIZERS[kind], True))
    if kind != "object":
        picked.append(("object", _summarize_object, True))
    return picked


def _envelope(obj, name: str, cell: str | None) -> dict:
    out = {"name": name, "type": _type_name(type(obj)), "kind": _kind_of(obj)}
    if cell:
        out["cell"] = cell
    return out


def _summarize(obj, name: str, ctx: _Ctx, configured: list, cell: str | None) -> dict:
    """Run summarizers in order within the deadline; always returns an envelope."""
    base = _envelope(obj, name, cell)
    failures: list = []
    progress: dict = {}

    def attempt() -> dict:
        for label, fn, is_builtin in _candidates(obj, configured, failures):
            ctx.deadline.check()
            out = dict(base)
            progress["out"] = out
            progress["label"] = label
            try:
                if is_builtin:
                    out["kind"] = label
                    fn(obj, out, ctx)
                    return out
                result = fn(obj)
                if result is None:
                    continue
                if not isinstance(result, dict):
                    raise TypeError(f"returned {type(result).__name__}, expected a dict or None")
                custom = dict(result)
                kind = custom.pop("kind", None)
                out["kind"] = kind if isinstance(kind, str) and kind else "custom"
                out["summarizer"] = label
                out["custom"] = _jsonable(custom)
                return out
            except BudgetExceeded:
                raise
            except Exception as exc:
                failures.append(f"summarizer {label} failed: {_err(exc)}")
        raise RuntimeError("no summarizer succeeded")

    try:
        result = run_bounded(attempt, ctx.deadline.remaining(), ctx.mode)
    except BudgetExceeded:
        partial = dict(progress.get("out") or base)
        partial["degraded"] = True
        where = progress.get("label", "summary")
        partial["degraded_reason"] = f"time budget of {ctx.deadline.budget_s:g}s ran out in {where}"
        result = partial
    except Exception as exc:
        result = dict(base)
        result["degraded"] = True
        result["degraded_reason"] = f"every summarizer failed: {_err(exc)}"
    if failures:
        result["notes"] = failures + list(result.get("notes", []))
    return result


_TRIM_ORDER = (
    "sample",
    "preview",
    "more_columns",
    "custom",
    "columns",
    "methods",
    "attributes",
    "repr",
    "doc",
)


def _fit(summary: dict, limit: int) -> str:
    text = json.dumps(summary, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode()) <= limit:
        return text
    trimmed = []
    for key in _TRIM_ORDER:
        if key not in summary:
            continue
        if key == "columns" and isinstance(summary[key], list) and len(summary[key]) > 3:
            summary["columns_omitted"] = summary.get("columns_omitted", 0) + len(summary[key]) - 3
            summary[key] = summary[key][:3]
        else:
            del summary[key]
        trimmed.append(key)
        text = json.dumps(summary, ensure_ascii=False, separators=(",", ":"))
        if len(text.encode()) <= limit - 80:
            break
    summary.setdefault("notes", []).append(f"trimmed to fit {limit} bytes: {', '.join(trimmed)}")
    text = json.dumps(summary, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode()) > limit:
        keep = {
            k: summary[k]
            for k in (
                "name",
                "type",
                "kind",
                "degraded",
                "degraded_reason",
                "memory_bytes",
                "shape",
                "length",
                "cell",
            )
            if k in summary
        }
        keep["notes"] = [f"summary too large for {limit} bytes; only the envelope is kept"]
        text = json.dumps(keep, ensure_ascii=False, separators=(",", ":"))
    return text


# --------------------------------------------------------------------------- namespace access


def _shell():
    # builtins.get_ipython exists only while a cell runs, not while user_expressions are
    # evaluated: ask IPython's registry of the running shell first.
    for getter in (
        _mod_attr("IPython.core.getipython", "get_ipython"),
        getattr(builtins, "get_ipython", None),
    ):
        try:
            shell = getter() if callable(getter) else None
        except Exception:
            shell = None
        if shell is not None:
            return shell
    return None


def _user_ns(ns=None) -> dict:
    if ns is not None:
        return ns
    shell = _shell()
    if shell is not None and isinstance(getattr(shell, "user_ns", None), dict):
        return shell.user_ns
    return sys.modules["__main__"].__dict__


def _hidden() -> dict:
    hidden = getattr(_shell(), "user_ns_hidden", None)
    return hidden if isinstance(hidden, dict) else {}


def _is_helper(value) -> bool:
    """Objects that ipykeep itself put in reach of the user (this module, its functions)."""
    if _is(value, types.ModuleType):
        name = getattr(value, "__name__", "")
        return name == MODULE_NAME or (
            isinstance(name, str) and (name == "ipykeep" or name.startswith("ipykeep."))
        )
    if _is(value, (types.FunctionType, type)):
        module = getattr(value, "__module__", "")
        return isinstance(module, str) and (module == MODULE_NAME or module.startswith("ipykeep."))
    return False


def _framework_function(value) -> bool:
    if not _is(value, (types.FunctionType, types.BuiltinFunctionType)):
        return False
    module = getattr(value, "__module__", None)
    return module != "__main__"


def _user_names(ns: dict) -> list:
    hidden = _hidden()
    missing = object()
    names = []
    for key, value in list(ns.items()):
        if not isinstance(key, str) or key.startswith("_") or key in IPYTHON_NAMES:
            continue
        shadowed = hidden.get(key, missing)
        if shadowed is value:
            continue
        if shadowed is not missing and _framework_function(value):
            # IPython hides its ``open``; ipyflow's tracing may rebind it to another wrapper.
            continue
        if _is_helper(value):
            continue
        names.append(key)
    return names


# --------------------------------------------------------------------------- dotted paths


class _PathError(Exception):
    def __init__(self, code: str, message: str, matches: list | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.matches = matches or []


def _constant(node):
    if isinstance(node, ast.Constant) and isinstance(
        node.value, (str, bytes, int, float, bool, type(None))
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        if isinstance(node.operand.value, (int, float)) and not isinstance(
            node.operand.value, bool
        ):
            return -node.operand.value
    if isinstance(node, ast.Tuple):
        return tuple(_constant(e) for e in node.elts)
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _constant(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    raise _PathError(
        "bad_expression", f"only constant keys are allowed in [...], not {ast.dump(node)[:60]}"
    )


def parse_path(expr: str) -> list:
    """Steps of a safe path: [("name", x), ("attr", a), ("item", key), ...]. Raises _PathError."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise _PathError("bad_expression", f"cannot parse {expr!r}: {exc.msg}") from None
    steps = []
    node = tree.body
    while True:
        if isinstance(node, ast.Name):
            steps.append(("name", node.id))
            break
        if isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
            node = node.value
        elif isinstance(node, ast.Subscript):
            steps.append(("item", _constant(node.slice)))
            node = node.value
        else:
            raise _PathError(
                "bad_expression",
                f"{expr!r} is not a variable path: "
                "only names, attributes and [constant] keys are allowed",
            )
    steps.reverse()
    return steps


def _close(word: str, candidates) -> list:
    pool = [c for c in candidates if isinstance(c, str)][:20000]
    return difflib.get_close_matches(word, pool, n=5, cutoff=0.6)


def _resolve(steps: list, ns: dict, visible: list):
    kind, root = steps[0]
    if root in ns:
        value = ns[root]
    elif hasattr(builtins, root):
        value = getattr(builtins, root)
    else:
        raise _PathError(
            "unknown_name", f"no variable named {root!r} in the kernel", _close(root, visible)
        )
    shown = root
    for kind, key in steps[1:]:
        if kind == "attr":
            try:
                value = getattr(value, key)
            except AttributeError:
                try:
                    names = dir(value)
                except Exception:
                    names = []
                raise _PathError(
                    "unknown_name",
                    f"{shown} has no attribute {key!r}",
                    _close(key, [n for n in names if not n.startswith("_")]),
                ) from None
            shown = f"{shown}.{key}"
        else:
            try:
                value = value[key]
            except (KeyError, IndexError) as exc:
                keys = []
                cols = getattr(value, "columns", None)
                if _is(value, dict):
                    keys = [k for k in list(value)[:20000] if isinstance(k, str)]
                elif cols is not None:
                    keys = [str(c) for c in list(cols)[:20000]]
                matches = _close(key, keys) if isinstance(key, str) else []
                raise _PathError(
                    "unknown_name", f"{shown}[{key!r}] not found ({type(exc).__name__})", matches
                ) from None
            shown = f"{shown}[{key!r}]"
    return value


# --------------------------------------------------------------------------- entry points


def _answer(payload: dict) -> str:
    payload = dict(payload)
    payload["protocol"] = PROTOCOL_VERSION
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _error(code: str, message: str, matches: list | None = None, **extra) -> str:
    err: dict = {"code": code, "message": message}
    if matches:
        err["matches"] = matches
    err.update(extra)
    return _answer({"ok": False, "error": err})


def inspect_json(
    expr: str,
    budget_s: float = DEFAULT_BUDGET_S,
    summarizers: list | None = None,
    cell_of: dict | None = None,
    *,
    ns: dict | None = None,
    mode: str = "auto",
    max_bytes: int = MAX_SUMMARY_BYTES,
) -> str:
    """JSON ``{"protocol", "ok": true, "summary": {...}}`` or ``{"ok": false, "error": {...}}``."""
    started = time.monotonic()
    try:
        deadline = _Deadline(float(budget_s))
        ctx = _Ctx(deadline, mode)
        try:
            steps = parse_path(expr)
        except _PathError as exc:
            return _error(exc.code, exc.message)
        space = _user_ns(ns)
        root = steps[0][1]
        if root not in space and not hasattr(builtins, root):
            return _error(
                "unknown_name",
                f"no variable named {root!r} in the kernel",
                _close(root, _user_names(space)),
                name=root,
            )
        try:
            value = run_bounded(lambda: _resolve(steps, space, []), deadline.remaining(), mode)
        except _PathError as exc:
            return _error(exc.code, exc.message, exc.matches, name=expr)
        except BudgetExceeded:
            return _answer(
                {
                    "ok": True,
                    "summary": {
                        "name": expr,
                        "type": "?",
                        "kind": "object",
                        "degraded": True,
                        "degraded_reason": (
                            f"time budget of {budget_s:g}s ran out while resolving {expr!r}"
                        ),
                    },
                }
            )
        except Exception as exc:
            return _error("unknown_name", f"cannot evaluate {expr!r}: {_err(exc)}", name=expr)
        cell = (cell_of or {}).get(root)
        summary = _summarize(
            value,
            expr.strip(),
            ctx,
            list(summarizers or []),
            cell if isinstance(cell, str) else None,
        )
        summary["elapsed_ms"] = int((time.monotonic() - started) * 1000)
        text = _fit(summary, max_bytes - 40)
        return '{"protocol":%d,"ok":true,"summary":%s}' % (PROTOCOL_VERSION, text)
    except BudgetExceeded:
        return _error("internal", "time budget ran out outside a guarded call")
    except Exception as exc:
        return _error("internal", f"inspection failed: {_err(exc)}")


def _brief(obj, entry: dict) -> None:
    """Namespace facts: shape or length, approximate memory, short value for scalars."""
    kind = entry["kind"]
    if kind in ("dataframe", "series", "ndarray", "tensor", "polars_dataframe"):
        entry["shape"] = [int(d) for d in obj.shape]
        if kind == "dataframe":
            entry["memory_bytes"] = int(obj.memory_usage(deep=False, index=True).sum())
        elif kind == "series":
            entry["memory_bytes"] = int(obj.memory_usage(deep=False, index=True))
        elif kind == "ndarray":
            entry["memory_bytes"] = int(obj.nbytes)
            entry["dtype"] = str(obj.dtype)
        elif kind == "tensor":
            entry["memory_bytes"] = int(obj.element_size() * obj.numel())
            entry["dtype"] = str(obj.dtype)
        else:
            entry["memory_bytes"] = int(obj.estimated_size())
    elif kind == "arrow_table":
        entry["shape"] = [int(obj.num_rows), int(obj.num_columns)]
        entry["memory_bytes"] = int(obj.nbytes)
    elif kind == "xarray":
        entry["memory_bytes"] = int(obj.nbytes)
    elif kind == "container":
        entry["length"] = int(len(obj))
        entry["memory_bytes"] = (
            _approx_container_bytes(obj)
            if type(obj) in _EXACT_CONTAINERS
            else int(sys.getsizeof(obj))
        )
    elif kind == "text":
        entry["length"] = int(len(obj))
        entry["memory_bytes"] = int(sys.getsizeof(obj))
        if type(obj) is str:
            entry["value"] = _short(obj, 40)
    elif kind == "scalar":
        entry["memory_bytes"] = int(sys.getsizeof(obj))
        entry["value"] = _leaf(obj, 40)
    elif kind in ("module", "class", "function"):
        pass
    else:
        entry["memory_bytes"] = int(sys.getsizeof(obj))
        if hasattr(type(obj), "__len__"):
            try:
                entry["length"] = int(len(obj))
            except (TypeError, ValueError):
                pass


_SAFE_BRIEF = _EXACT_SAFE | _EXACT_CONTAINERS


def namespace_json(
    budget_s: float = DEFAULT_BUDGET_S,
    cell_of: dict | None = None,
    *,
    ns: dict | None = None,
    mode: str = "auto",
    limit: int = MAX_NAMESPACE,
) -> str:
    """JSON ``{"protocol", "ok": true, "namespace": {"entries": [...], "count", ...}}``."""
    started = time.monotonic()
    try:
        deadline = _Deadline(float(budget_s))
        space = _user_ns(ns)
        names = sorted(_user_names(space))
        cells = cell_of or {}
        per_var = max(float(budget_s) * PER_VARIABLE_SHARE, 0.05)
        entries = []
        notes = []
        degraded = False
        for name in names[:limit]:
            value = space.get(name)
            entry = {"name": name, "type": _type_name(type(value)), "kind": _kind_of(value)}
            cell = cells.get(name)
            if isinstance(cell, str):
                entry["cell"] = cell
            entries.append(entry)
            if type(value) in _SAFE_BRIEF:
                _brief(value, entry)
                continue
            remaining = deadline.remaining()
            if remaining <= 0:
                entry["degraded"] = True
                entry["degraded_reason"] = "time budget exhausted before this variable"
                degraded = True
                continue
            partial: dict = dict(entry)
            try:
                run_bounded(lambda: _brief(value, partial), min(per_var, remaining), mode)  # noqa: B023 (called at once)
                entry.update(partial)
            except BudgetExceeded:
                entry.update(partial)
                entry["degraded"] = True
                entry["degraded_reason"] = f"took longer than {min(per_var, remaining):.2g}s"
                degraded = True
            except Exception as exc:
                entry.update(partial)
                entry["degraded"] = True
                entry["degraded_reason"] = _err(exc)
        if len(names) > limit:
            notes.append(f"{len(names) - limit} more variables not listed")
        listing = {"entries": entries, "count": len(names)}
        if degraded:
            listing["degraded"] = True
        if notes:
            listing["notes"] = notes
        listing["elapsed_ms"] = int((time.monotonic() - started) * 1000)
        return _answer({"ok": True, "namespace": listing})
    except BudgetExceeded:
        return _error("internal", "time budget ran out outside a guarded call")
    except Exception as exc:
        return _error("internal", f"namespace listing failed: {_err(exc)}")
