"""The digest of every global, the same code in the kernel and in the fresh runs.

``DIGEST`` is source text: run in a namespace it defines ``_field_globals()``, which maps each
global name (not ``_``-prefixed, not a module, function or class) to ``[digest, kind,
numeric columns]``. Numbers, strings, arrays, frames and containers are digested by value;
other objects by their attributes (a fitted model by its parameters and the data its model
holds), a few levels deep, public attributes only (private ones hold caches and scratch
buffers: statsmodels' GLM keeps an ``np.empty`` array whose bytes differ between processes);
what cannot be digested (figures, open files) is ``None`` and not compared.
"""

from __future__ import annotations

DIGEST = r"""
def _field_globals():
    import hashlib, json, sys, types
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")

    def sha(b):
        return hashlib.sha1(b).hexdigest()[:20]

    def frame(v):
        try:
            h = pd.util.hash_pandas_object(v, index=True).values.tobytes()
        except Exception:
            h = v.to_json(default_handler=repr).encode()
        cols = list(v.columns) if isinstance(v, pd.DataFrame) else [v.name]
        return f"pd:{type(v).__name__}:{v.shape}:{cols!r}:" + sha(h)

    def dig(v, depth, seen):
        if isinstance(v, (bool, int, float, complex, str, bytes, type(None))):
            r = repr(v)
            return r if len(r) < 120 else "sha:" + sha(r.encode())
        if isinstance(v, (types.ModuleType, types.FunctionType, types.MethodType, type)):
            return None
        if np is not None and isinstance(v, np.generic):
            return repr(v.item())
        if np is not None and isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                return "nd-object:" + sha(repr(v.tolist()).encode())
            return f"nd:{v.shape}:{v.dtype.str}:" + sha(np.ascontiguousarray(v).tobytes())
        if pd is not None and isinstance(v, (pd.DataFrame, pd.Series)):
            return frame(v)
        if pd is not None and isinstance(v, pd.Index):
            return "pd-index:" + sha(repr(list(v)).encode())
        if depth > 4 or id(v) in seen or len(seen) > 400:
            return None
        mod = type(v).__module__ or ""
        if mod.startswith(("matplotlib", "_io", "io", "IPython", "ipykernel")):
            return None
        seen.add(id(v))
        if isinstance(v, (list, tuple)):
            return type(v).__name__ + "[" + ",".join(str(dig(x, depth + 1, seen)) for x in v) + "]"
        if isinstance(v, (set, frozenset)):
            return "set" + repr(sorted(str(dig(x, depth + 1, seen)) for x in v))
        if isinstance(v, dict):
            items = ((repr(k), str(dig(x, depth + 1, seen))) for k, x in v.items())
            return "dict" + repr(sorted(items))
        parts = []
        params = getattr(v, "params", None) if mod.startswith("statsmodels") else None
        if params is not None and not callable(params):
            parts.append(("params", dig(params, depth + 1, seen)))
            model = getattr(v, "model", None)
            data = getattr(model, "data", None)
            for k in ("frame", "orig_endog", "orig_exog"):
                held = getattr(data, k, None)
                if held is not None:
                    parts.append((k, dig(held, depth + 1, seen)))
        else:
            try:
                attrs = vars(v)
            except TypeError:
                return None
            for k, x in sorted(attrs.items()):
                if k.startswith("_"):  # caches and scratch space (np.empty: not a value)
                    continue
                parts.append((k, dig(x, depth + 1, seen)))
        parts = [(k, d) for k, d in parts if d is not None]
        if not parts:
            return None
        return type(v).__name__ + ":" + sha(repr(parts).encode())

    def kind(v):
        cols = ()
        if pd is not None and isinstance(v, pd.DataFrame):
            try:
                numeric = v.select_dtypes("number").columns
                cols = tuple(str(c) for c in numeric if isinstance(c, str))
            except Exception:
                cols = ()
        return type(v).__name__, cols

    out = {}
    for name, value in list(globals().items()):
        if name.startswith("_") or name in ("In", "Out", "exit", "quit", "get_ipython"):
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        try:
            d = dig(value, 0, set())
        except Exception:
            d = None
        out[name] = [d, *kind(value)]
    return out
"""
