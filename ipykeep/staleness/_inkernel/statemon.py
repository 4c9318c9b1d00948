"""Observes what each execution did to the kernel's global namespace.

Sent into the kernel as source and installed once as a module (standard library only; numpy
and pandas are looked up in ``sys.modules`` only when the notebook already imported them).
``collect()`` is evaluated as a ``user_expression`` right after every execution: it compares each
global name with what it held after the previous execution and reports

* ``bound``: a new name, or one now holding a different value;
* ``mutated``: a name holding the same object as before whose content changed (so a change made
  through an alias, inside a library call such as ``heapq.heappush`` or by drawing from a random
  generator shows on every global that reaches the object);
* ``deleted``: a name that is gone;
* ``opaque``: names whose content cannot be fingerprinted (identity only);
* ``uncompared``: the bound names whose new value the fingerprints cannot compare with the old
  one (one of them is not exact: an object fingerprinted by its attributes): reported bound, as
  nothing proves them equal, but nothing proves them different either;
* ``captured``: per bound name, the names the code mentioned (and did not rebind) whose object
  the new value holds a reference to (``holder = {'data': rows}``, a model fitted on ``df``,
  ``alias = df``): when such an object is rebuilt as a new one, the holder must be rebuilt too.

Pseudo-names stand for hidden global state that cells share: ``<numpy.random>`` (the legacy
global generator behind ``np.random.seed``/``np.random.normal``) and ``<random>`` (the ``random``
module's). A cell that draws from them mutates them, so cells drawing in sequence depend on one
another as they do in a fresh run. The process-wide settings of ``settings.py`` (numpy print
options, pandas options, rcParams, warning filters, the working directory…) are pseudo-names
too: a cell that changed one mutated it, and ``read`` lists the ones the cell's code used.

A read that fills a cache is not a change (``cache fill``): matplotlib figures are fingerprinted
by what they show (``plotfp.py``); attributes that declared caches fill (``cached_property``,
statsmodels' ``cache_readonly``, ``_cache`` dictionaries) are left out; and an object whose
only change is new attributes, named since the last look only to be read (``res.HC0_se``,
``repr(fig)``) and reached by nothing else the code used, is not mutated.

A value is fingerprinted by identity plus a bounded content hash: scalars and strings by value,
containers up to ``MAX_ITEMS`` items and ``MAX_DEPTH`` levels (sampled beyond), numpy arrays by
their bytes (sampled beyond ``MAX_BYTES``), pandas frames and series by their blocks and index,
random generators by their state, other objects by their attributes. A name rebound to a new
object counts as unchanged only when both fingerprints are exact and equal (an edit that only
changed a ``print``): sampled fingerprints never prove equality. Every public function returns
a JSON string and never raises into the user's code.
"""

import hashlib
import json
import re
import sys
import time
import types
import weakref
from itertools import compress
from operator import is_not
from typing import Any

PROTOCOL_VERSION = 1
DATAHASH_MODULE = "_ipykeep_datahash"
_datahash = sys.modules[DATAHASH_MODULE]  # installed just before this module (see the engine)
MAX_ITEMS, MAX_BYTES, SAMPLE = _datahash.MAX_ITEMS, _datahash.MAX_BYTES, _datahash.SAMPLE
MAX_DEPTH = 3
MAX_REPORT = 500
_STATE_KEY = "_ipykeep_statemon_state"
REACH_MODULE = "_ipykeep_reach"
SETTINGS_MODULE = "_ipykeep_settings"
PLOTFP_MODULE = "_ipykeep_plotfp"
#: descriptors whose value is stored under their own name in the instance (a cache fill)
_CACHING_DESCRIPTORS = frozenset({"cached_property", "cache_readonly", "CachedAttribute"})
#: below this much hashing of big values per look, looking at everything is cheaper than
#: finding what the code could reach (object graph walks of ~1 µs per object)
WALK_WORTH_S = 0.002
_HISTORY = re.compile(r"_i?\d+\Z")
_SKIP = frozenset(
    {
        "_",
        "__",
        "___",
        "_i",
        "_ii",
        "_iii",
        "_oh",
        "_ih",
        "_dh",
        "In",
        "Out",
        "exit",
        "quit",
        "get_ipython",
        "_exit_code",
    }
)
_LEAF = (int, float, complex, bool, str, bytes, type(None))
_LEAF_TYPES = frozenset(_LEAF)  # exact types: a subclass may define its own hash or equality
_SEQ = (list, tuple)
_SETS = (set, frozenset)

_state = sys.__dict__.setdefault(_STATE_KEY, {"ns": None, "prev": None})
_state.setdefault("cache", {})


def _skip(name):
    return name in _SKIP or name.startswith(("__", "_ipykeep")) or bool(_HISTORY.match(name))


_DataHash: Any = _datahash._DataHash  # a class of the module installed before this one


class _Fp(_DataHash):
    """One snapshot pass: fingerprints memoised by object id (aliases are hashed once).

    ``touched``: what ``reach`` says the code run since the last pass could have changed (ids,
    and ``("root", id)`` memory owners), or None (it cannot say: hash everything). A big value
    (numpy array, pandas frame, series, index) outside it keeps the fingerprint cached from an
    earlier pass, if it is the same object (weak reference) with the same structure (shape,
    data pointer, blocks) and shares no memory with a touched array.
    """

    __slots__ = (
        "memo",
        "np",
        "pd",
        "touched",
        "cache",
        "ns",
        "hits",
        "hashed",
        "artists",
        "artist_arrays",
    )

    def __init__(self, touched=None, cache=None, ns=None):
        self.memo = {}
        self.np: Any = sys.modules.get("numpy")
        self.pd: Any = sys.modules.get("pandas")
        self.touched = touched
        self.cache = cache if cache is not None else {}
        self.ns = ns
        self.hits = 0
        self.hashed = 0
        self.artists = {}  # one figure's artists, shared by the globals naming them
        self.artist_arrays = {}

    def _artist(self, obj):
        """A matplotlib artist by what it shows (``plotfp``); remembers the arrays it holds."""
        fp, complete, arrays = sys.modules[PLOTFP_MODULE].fingerprint(obj, self.artists)
        self.artist_arrays[id(obj)] = arrays
        return ("artist", id(type(obj))) + fp, False, not complete

    def _artist_owners(self, obj, reach):
        """The memory owners of the arrays an artist shows (a line over ``a[:100]``)."""
        np = self.np
        arrays = self.artist_arrays.get(id(obj), ())
        return {("root", reach.roots_of_array(a, np)) for a in arrays} if np is not None else set()

    def _big(self, obj, compute, owners=None):
        """``compute()``, or the cached result when ``obj`` cannot have changed (see class doc)."""
        key = id(obj)
        try:
            signal = self._signal(obj)
        except Exception:
            return compute()
        entry = self.cache.get(key)
        touched = self.touched
        if (
            entry is not None
            and touched is not None
            and entry[3] is not None
            and entry[0]() is obj
            and entry[1] == signal
            and key not in touched
            and not (entry[3] & touched)
            # the memory's owner itself reached (a ``bytearray`` under ``np.frombuffer``)
            and not any(root[1] in touched for root in entry[3])
        ):
            self.hits += 1
            return entry[2]
        began = time.perf_counter()
        out = compute()
        cost = time.perf_counter() - began
        self.hashed += 1
        reach = sys.modules.get(REACH_MODULE)
        try:
            if reach is None:
                raise LookupError("no reach module: values are not cached")
            # a full look uses the entry only for its cost (``worth_walking``): the memory
            # owners (an object graph walk) are found by the first look that can reuse it
            if touched is None:
                roots = None
            elif owners is not None:
                roots = frozenset(owners(obj, reach))
            else:
                roots = frozenset(reach.owners(obj, self.ns))
            self.cache[key] = (weakref.ref(obj), signal, out, roots, cost)
        except Exception:  # no weak references, or memory that cannot be bounded: no caching
            self.cache.pop(key, None)
        return out

    def _signal(self, obj):
        """Cheap structure of a big value: changes when pandas or numpy swap what is under it."""
        np = self.np
        if id(obj) in self.artist_arrays or _is_artist(obj):
            return ("artist", id(obj))  # what it shows is looked at only when it was reached
        if np is not None and isinstance(obj, np.ndarray):
            return ("nd", obj.shape, obj.strides, obj.dtype.str, obj.__array_interface__["data"][0])
        mgr = getattr(obj, "_mgr", None)
        if mgr is not None:
            blocks = tuple((id(b), id(b.values)) for b in mgr.blocks)
            cols = id(obj.columns) if isinstance(obj, self.pd.DataFrame) else repr(obj.name)
            return ("pd", obj.shape, id(mgr), blocks, id(obj.index), cols)
        if isinstance(obj, self.pd.RangeIndex):
            return ("range", obj.start, obj.stop, obj.step)
        return ("idx", len(obj), id(obj._values))

    def of(self, obj, depth):
        """(fingerprint, exact, opaque)"""
        if isinstance(obj, _LEAF):
            if isinstance(obj, (str, bytes)) and len(obj) > 64:
                return (type(obj).__name__, len(obj), hash(obj)), True, False
            return (type(obj).__name__, obj), True, False
        key = (id(obj), depth)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        try:
            out = self._compute(obj, depth)
        except Exception:
            out = (("id", id(obj)), False, True)
        self.memo[key] = out
        return out

    def _items(self, values, depth):
        if all(type(v) in _LEAF_TYPES for v in values):
            # leaves only (a list of numbers or strings, an object's plain attributes): hashed
            # at once, types included so 1, 1.0 and True stay apart (as ``of`` keeps them)
            return hash((tuple(map(type, values)), tuple(values))), True
        exact = True
        parts = []
        for v in values:
            fp, ex, _ = self.of(v, depth - 1)
            parts.append(fp)
            exact = exact and ex
        return hash(tuple(parts)), exact

    def _sample(self, seq):
        n = len(seq)
        if n <= MAX_ITEMS:
            return list(seq), True
        step = n // MAX_ITEMS + 1
        return list(seq[::step]) + [seq[-1]], False

    def _compute(self, obj, depth):
        t = type(obj)
        if depth <= 0:
            return ("id", id(obj)), False, False
        if t in _SEQ or isinstance(obj, _SEQ):
            items, full = self._sample(obj)
            h, ex = self._items(items, depth)
            return (t.__name__, len(obj), h), full and ex, not (full and ex)
        if isinstance(obj, dict):
            n = len(obj)
            it = iter(obj.items())
            pairs = [next(it) for _ in range(min(n, MAX_ITEMS))]
            h, ex = self._items([v for _, v in pairs], depth)
            keys = self._items([k for k, _ in pairs], 2)[0]
            exact = ex and n <= MAX_ITEMS
            return ("dict", n, keys, h), exact, not exact
        if isinstance(obj, _SETS):
            n = len(obj)
            if n > MAX_ITEMS:
                return (t.__name__, n, id(obj)), False, True
            return (t.__name__, n, hash(frozenset(obj))), True, False
        np = self.np
        if np is not None:
            if isinstance(obj, np.ndarray):
                if obj.nbytes <= MAX_BYTES:  # hashed whole, cheaper than the bookkeeping
                    return self._array(obj)
                return self._big(obj, lambda: self._array(obj))
            if isinstance(obj, (np.random.Generator, np.random.RandomState)) and depth < MAX_DEPTH:
                # a generator held inside another object (scipy distributions hold the global
                # one): its draws are not a change of the holder
                return ("rng-id", id(obj)), False, False
            if isinstance(obj, np.random.Generator):
                return ("rng", repr(obj.bit_generator.state)), True, False
            if isinstance(obj, np.random.RandomState):
                st = obj.get_state()
                return ("rs", st[0], st[1].tobytes(), st[2], st[3], st[4]), True, False
            if isinstance(obj, np.generic):
                return ("npscalar", obj.dtype.str, obj.tobytes()), True, False
        pd = self.pd
        if pd is not None:
            if isinstance(obj, pd.DataFrame):
                return self._big(obj, lambda: self._frame(obj))
            if isinstance(obj, pd.Series):
                return self._big(obj, lambda: self._series(obj))
            if isinstance(obj, pd.Index):
                return self._big(obj, lambda: self._index_fp(obj))
        if isinstance(obj, _random_type()) and depth < MAX_DEPTH:
            return ("rng-id", id(obj)), False, False
        if isinstance(obj, _random_type()):
            return ("random", hash(obj.getstate())), True, False
        artist = _artist_type()
        if artist is not None and isinstance(obj, artist):
            return self._big(obj, lambda: self._artist(obj), owners=self._artist_owners)
        # type-based checks only: ``hasattr`` would run a custom ``__getattr__`` (a mock, a
        # lazy proxy) and could change the very object being observed
        if isinstance(obj, (type, types.FunctionType)):
            return self._function(obj)
        if t.__name__ == "module":
            return ("module", id(obj)), True, False
        try:
            attrs = object.__getattribute__(obj, "__dict__")
        except Exception:
            attrs = None
        if callable(obj) and attrs is None:  # builtins, ufuncs: identity is all
            return ("callable", id(obj)), False, False
        if isinstance(attrs, dict):
            count = len(attrs)
            attr_keys = [
                k
                for k in list(attrs)[:MAX_ITEMS]
                if not str(k).startswith("_cache") and not _caching_slot(t, k)
            ]
            # one hash per attribute, so an addition can be told from a change (``_cache_fill``),
            # and the fingerprints of objects held, to tell it one level down too
            hashes: list[int] = []
            inner: list[Any] = []
            for v in (attrs[k] for k in attr_keys):
                if type(v) in _LEAF_TYPES:
                    hashes.append(hash((type(v), v)))
                    inner.append(None)
                    continue
                sub = self.of(v, depth - 1)[0]
                hashes.append(hash(sub))
                inner.append(sub if sub[:1] == ("obj",) else None)
            # a declared cache's slot filled is no change in count either
            shown = count if count > MAX_ITEMS else len(attr_keys)
            fp = ("obj", id(t), shown, tuple(attr_keys), tuple(hashes), _Detail(inner))
            return fp, False, False
        return ("id", id(obj)), False, True

    def _function(self, obj):
        code = getattr(obj, "__code__", None)
        if code is None:  # a class: rebuilt by every run of its cell
            return ("type", id(obj)), False, False
        defaults = getattr(obj, "__defaults__", None)
        try:
            dh = hash(tuple(self.of(d, 1)[0] for d in defaults or ()))
        except Exception:
            dh = id(defaults)
        # exact for equality only (see _snapshot): the same function object is never "mutated"
        # (tracers such as ipyflow rewrite a function's code in place)
        return ("fn", _code_key(code), dh), True, False


def _code_key(code):
    """A hash of what a code object does (bytecode, names, constants; nested code included).
    Not ``marshal``: its output depends on reference counts."""
    consts = tuple(
        _code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
        for c in code.co_consts
    )
    return hash((code.co_code, code.co_names, code.co_varnames, code.co_freevars, consts))


_SLOTS: dict[Any, bool] = {}


def _caching_slot(cls, key):
    """Whether ``key`` of a ``cls`` instance is the slot a caching descriptor fills on read."""
    found = _SLOTS.get((cls, key))
    if found is None:
        found = False
        for klass in getattr(cls, "__mro__", ()):
            desc = klass.__dict__.get(key) if isinstance(key, str) else None
            if desc is not None:
                found = type(desc).__name__ in _CACHING_DESCRIPTORS
                break
        if len(_SLOTS) > 10_000:
            _SLOTS.clear()
        _SLOTS[(cls, key)] = found
    return found


def _is_artist(obj):
    artist = _artist_type()
    return artist is not None and isinstance(obj, artist)


def _artist_type():
    mpl = sys.modules.get("matplotlib.artist")
    if mpl is None or PLOTFP_MODULE not in sys.modules:
        return None
    return getattr(mpl, "Artist", None)


class _Detail:
    """The fingerprints of the objects an object holds, riding along in its fingerprint for
    ``_cache_fill`` only: equal to any other, so comparing fingerprints compares the hashes."""

    __slots__ = ("inner",)

    def __init__(self, inner):
        self.inner = inner

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def _cache_fill(before, now):
    """Whether object fingerprint ``now`` only adds attributes to ``before``, at any level the
    fingerprints reach (see module doc)."""
    if not (isinstance(before, tuple) and isinstance(now, tuple)):
        return False
    if len(before) != 6 or len(now) != 6:  # not an object's, or an older copy's
        return False
    if before[0] != "obj" or now[0] != "obj" or before[1] != now[1]:
        return False
    if max(before[2], now[2]) > MAX_ITEMS:
        return False  # keys past the sample: a change among them would go unseen
    has = {k: (h, sub) for k, h, sub in zip(now[3], now[4], now[5].inner)}
    for key, h, sub in zip(before[3], before[4], before[5].inner):
        got = has.get(key)
        if got is None:
            return False  # an attribute removed
        if got[0] != h and not _cache_fill(sub, got[1]):
            return False
    return True


def _random_type():
    mod = sys.modules.get("random")
    return mod.Random if mod is not None else ()


RNG_NAMES = ("<numpy.random>", "<random>")
_MISSING = object()
#: generator name -> whether its state is as seeding left it (no word drawn since): a generator
#: that its module's import just created and nothing drew from holds what any fresh import holds
_UNDRAWN: dict[str, bool] = {}


def _global_rngs():
    """Each hidden generator's state as a digest that is equal in every process for an equal
    state: a checkpoint restored into a new kernel compares the states it saved with the ones the
    new kernel's re-runs reach (``hash()`` of bytes is salted per process, and of ``None`` is an
    address on Python < 3.12)."""
    out: dict[str, Any] = {}
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            st = np.random.mtrand._rand.get_state()
            h = hashlib.blake2b(st[1].tobytes(), digest_size=16)
            h.update(repr((st[0], st[2], st[3], st[4])).encode())
            out["<numpy.random>"] = h.hexdigest()
            # the import's seeding leaves the position at 623 (624 for ``seed(n)``) and no
            # cached gaussian; a draw moves it
            _UNDRAWN["<numpy.random>"] = st[2] in (623, 624) and st[3] == 0
        except Exception:
            pass
    rnd = sys.modules.get("random")
    if rnd is not None and hasattr(rnd, "_inst"):
        try:
            version, words, gauss = rnd._inst.getstate()
            # ints and floats hash alike in every process (strings, bytes and None do not)
            out["<random>"] = str(hash((version, words, gauss is None, gauss or 0.0)))
            _UNDRAWN["<random>"] = words[-1] == 624 and gauss is None
        except Exception:
            pass
    return out


def _fixed(obj):
    """Whether ``obj``'s entry is settled by its identity alone: an immutable scalar or short
    string (the same object, the same value) or a module or class (fingerprinted by identity).
    While a name holds the same such object, its entry is carried over without a look."""
    t = type(obj)
    if t in _LEAF_TYPES:
        return not (t in (str, bytes) and len(obj) > 64)  # a long one is not held (memory)
    # exactly a module (a subclass is fingerprinted by its attributes), or any class
    return t is types.ModuleType or isinstance(obj, type)


def _to_look(ns, prev):
    """The names whose entries must be computed again, or None (all of them): new names,
    names no longer holding their ``_fixed`` object, and every other name (its content may have
    changed). Done with C-level set and map operations, so a namespace of settled values costs
    a cell little more than what it bound. None after a deletion (rare; the full pass finds it).
    """
    fixed = _state.get("fixed")
    if fixed is None or prev is None:
        return None
    hidden = set(_state.get("hidden", ()))  # pseudo-names (generators, settings)
    # IPython's history names (``_i12``) are never in ``prev`` (skipped), so they are in the
    # symmetric difference every time, one more per cell run: dropped at C level, or the loops
    # below would visit every one of them on every cell (no skipped name was ever in ``prev``)
    added_or_gone = ns.keys() ^ prev.keys()
    added_or_gone -= _state["skipped"]
    if any(name not in ns and name not in hidden for name in added_or_gone):
        return None
    new = {name for name in added_or_gone if name in ns}
    held = list(fixed)
    gone = list(compress(held, map(is_not, map(ns.get, held), fixed.values())))
    for name in gone:
        del fixed[name]
    return (prev.keys() - fixed.keys() - hidden) | new


def _snapshot(ns, touched=None, prev=None):
    """Entries per name, and the names looked at (None: all)."""
    cache = _state["cache"]
    for key in [k for k, entry in cache.items() if entry[0]() is None]:
        del cache[key]
    fp = _Fp(touched, cache, ns)
    _state["last"] = fp
    hidden = _global_rngs()
    settings = sys.modules.get(SETTINGS_MODULE)
    if settings is not None:
        hidden.update(settings.snapshot())
    # IPython adds history names (``_i12``, ``_12``) with every cell, so the namespace grows with
    # the session; the verdict per name is remembered (a regex per name per cell cost ~1 ms
    # per 1,000 names).
    skipped = _state.setdefault("skipped", set())
    kept = _state.setdefault("kept", set())
    if len(skipped) + len(kept) > 200_000:
        skipped.clear()
        kept.clear()
        _state["fixed"] = None
    looked = _to_look(ns, prev)
    if looked is None:
        out: dict[str, Any] = {}
        fixed = _state["fixed"] = {}
        names = list(ns)
    else:
        out = dict(prev)
        fixed = _state["fixed"]
        names = list(looked)
        for name in _state.get("hidden", ()):  # the hidden state is taken again below
            out.pop(name, None)
    for name, state in hidden.items():
        out[name] = (0, state, True, False, state)
    _state["hidden"] = list(hidden)
    for name in names:
        if name in skipped:
            continue
        if name not in kept:
            if not isinstance(name, str) or _skip(name):
                skipped.add(name)
                continue
            kept.add(name)
        obj = ns.get(name, _MISSING)
        if obj is _MISSING:  # deleted while looked at (a thread): the next full pass sees it
            out.pop(name, None)
            continue
        f, exact, opaque = fp.of(obj, MAX_DEPTH)
        if isinstance(f, tuple) and f and f[0] == "fn":
            out[name] = (id(obj), ("fn", id(obj)), exact, opaque, f)
        else:
            out[name] = (id(obj), f, exact, opaque, f)
        if _fixed(obj):
            fixed[name] = obj
    return out, None if looked is None else [*hidden, *looked]


def _is_identifier(name):
    return not name.startswith("<")


class _Fills:
    """Tells a cache fill from a change for one look (see module doc)."""

    __slots__ = ("uses", "ns", "readonly", "others")

    def __init__(self, uses, ns):
        self.uses = uses
        self.ns = ns
        self.readonly = None
        self.others = None

    def only_filled(self, oid, before, now):
        uses = self.uses
        if uses is None or uses["escaped"] or not _cache_fill(before, now):
            return False
        if self.readonly is None:
            ns = self.ns
            self.readonly = {id(ns[n]) for n in uses["readonly"] if n in ns}
            self.others = [ns[n] for n in uses["mixed"] if n in ns]
        if oid not in self.readonly:
            return False
        reach = sys.modules.get(REACH_MODULE)
        # the code's other names must not lead to the object (a pipeline fitting its step)
        return reach is not None and not reach.reaches(self.others, self.ns, oid)


def _names_random(uses, undrawn):
    """Whether the code run since the last look may have seeded or drawn from a global
    generator (True when unknown). ``random`` alone is mostly the module's name
    (``np.random.default_rng(…)`` draws nothing from the global generator); it counts only when
    the generator's state shows a draw (``undrawn`` is False)."""
    if uses is None or uses["escaped"]:
        return True
    named = uses["names"] | uses["attrs"]
    if any(
        word in name
        for name in named
        if name != "random"
        for word in ("rand", "seed", "shuffle", "choice", "sample", "normal", "uniform")
    ):
        return True
    return "random" in named and not undrawn


#: objects a ``captured`` walk visits per look; beyond it a bound value counts as holding every
#: name the code mentioned (conservative)
CAPTURE_BUDGET = 5000


def _captured(bound, ns, prev, uses):
    """Bound name -> the mentioned, not rebound names whose objects its value references (see
    the module doc). Names holding settled values neither hold nor are held."""
    mentioned = uses["names"] if uses is not None else prev.keys()
    new = set(bound)
    targets: dict[int, list[str]] = {}
    for name in mentioned:
        if name in new or not isinstance(name, str) or not _is_identifier(name):
            continue
        obj = ns.get(name, _MISSING)
        before = prev.get(name)
        if obj is _MISSING or before is None or before[0] != id(obj) or _fixed(obj):
            continue
        targets.setdefault(id(obj), []).append(name)
    if not targets:
        return {}
    out = {}
    gc = sys.modules.get("gc") or __import__("gc")
    skip = {id(ns), id(sys.modules), id(__builtins__)}
    for name in bound:
        obj = ns.get(name, _MISSING)
        if obj is _MISSING or _fixed(obj):
            continue
        held = set()
        seen = set(skip)
        stack = [obj]
        while stack:
            o = stack.pop()
            i = id(o)
            if i in seen:
                continue
            seen.add(i)
            if i in targets:
                held.update(targets[i])
            if len(seen) > CAPTURE_BUDGET:
                held = {n for names in targets.values() for n in names}
                break
            t = type(o)
            if t in _LEAF_TYPES or isinstance(o, (type, types.ModuleType)):
                continue  # a class or module is shared by every fresh run: no captured value
            if isinstance(o, types.FunctionType):
                # its globals are looked up by name when called, not held
                stack.extend(c.cell_contents for c in o.__closure__ or () if _filled(c))
                stack.extend(o.__defaults__ or ())
                stack.extend((o.__kwdefaults__ or {}).values())
                continue
            if t in (list, tuple, set, frozenset) and len(o) > CAPTURE_BUDGET:
                if set(map(type, o)) <= _LEAF_TYPES:
                    continue
            stack.extend(gc.get_referents(o))
        held.discard(name)
        if held:
            out[name] = sorted(held)
    return out


def _filled(cell):
    try:
        return cell.cell_contents is not _MISSING
    except ValueError:  # an empty closure cell
        return False


def install(ns=None):
    """Start observing ``ns`` (the shell's user namespace by default) from its current state."""
    if ns is None:
        ip = sys.modules["IPython"].get_ipython()
        ns = ip.user_ns
        reach = sys.modules.get(REACH_MODULE)
        if reach is not None:
            reach.install(ip, ns)
    _state["ns"] = ns
    _state["cache"].clear()
    _state["fixed"] = None
    _state["prev"] = _snapshot(ns)[0]
    return json.dumps({"protocol": PROTOCOL_VERSION, "names": len(_state["prev"])})


def collect():
    """What changed in the namespace since the last collect (or install)."""
    start = time.perf_counter()
    ns = _state["ns"]
    if ns is None:
        return json.dumps({"protocol": PROTOCOL_VERSION, "available": False})
    try:
        prev = _state["prev"] or {}
        reach = sys.modules.get(REACH_MODULE)
        uses = reach.mentions() if reach is not None else None
        touched = reach.reached(ns) if reach is not None else None
        cur, looked = _snapshot(ns, touched, _state["prev"])
        if reach is not None:
            # walking what code reaches pays off only when re-hashing the big values costs more
            reach.worth_walking(sum(entry[4] for entry in _state["cache"].values()) > WALK_WORTH_S)
    except Exception as exc:  # never break the user's code
        return json.dumps({"protocol": PROTOCOL_VERSION, "available": False, "error": repr(exc)})
    bound, mutated, opaque, filled, uncompared = [], [], [], [], []
    fills = _Fills(uses, ns)
    settings = sys.modules.get(SETTINGS_MODULE)
    # names not looked at hold the same settled object as before: nothing to report of them
    looked_at = cur if looked is None else looked
    for name in looked_at:
        entry = cur.get(name)
        if entry is None:
            continue
        oid, fp, exact, opq, eq = entry
        before = prev.get(name)
        if opq:
            opaque.append(name)
        if before is None:
            if name in RNG_NAMES and _names_random(uses, _UNDRAWN.get(name, False)):
                # created by the import and drawn from in the same code: state it set (an import
                # alone, or one followed by ``default_rng(…)``, leaves the state every fresh run
                # starts from: no write)
                mutated.append(name)
            elif _is_identifier(name):
                bound.append(name)
            # a setting appearing with its library's import holds its defaults: no write
        elif before[0] == oid:
            if before[1] != fp:
                if settings is not None and uses is not None and settings.by_import(name, uses):
                    continue  # a library's import set it (see settings.by_import)
                if fills.only_filled(oid, before[1], fp):
                    filled.append(name)
                else:
                    mutated.append(name)
        elif not (exact and before[2] and before[4] == eq):
            bound.append(name)
            if not (exact and before[2]):
                uncompared.append(name)
    deleted = [n for n in prev.keys() - cur.keys() if _is_identifier(n)]
    read = []
    if settings is not None and uses is not None:
        try:
            read = settings.readers(uses, ns, cur)
        except Exception:  # no reads rather than a broken probe
            read = []
    try:
        captured = _captured(bound, ns, prev, uses)
    except Exception:  # every mentioned name rather than a broken probe
        captured = None
    _state["prev"] = cur
    return json.dumps(
        {
            "protocol": PROTOCOL_VERSION,
            "available": True,
            "bound": sorted(bound)[:MAX_REPORT],
            "mutated": sorted(mutated)[:MAX_REPORT],
            "deleted": sorted(deleted)[:MAX_REPORT],
            "opaque": sorted(opaque)[:MAX_REPORT],
            "uncompared": sorted(uncompared)[:MAX_REPORT],
            "captured": captured,
            "truncated": max(len(bound), len(mutated), len(deleted), len(opaque)) > MAX_REPORT,
            # the settings the code used (pseudo-names), and names whose change was a cache fill
            "read": read,
            "filled": sorted(filled)[:MAX_REPORT],
            # hidden state (generators, settings), so equal states are recognised as one value
            "states": {n: cur[n][1] for n in looked_at if n in cur and not _is_identifier(n)},
            "ms": round((time.perf_counter() - start) * 1000, 3),
            # big values re-hashed / reused from the cache (``reach``); scan: everything looked at
            "hashed": _state["last"].hashed,
            "reused": _state["last"].hits,
            "scan": "full" if touched is None else "reached",
            # names whose entries were computed (the rest hold the same settled value)
            "looked": len(cur) if looked is None else len(looked),
        }
    )
