"""Fingerprints of matplotlib figures and artists by what they show, for ``statemon``.

Installed in the kernel (standard library only) before ``statemon``; used only when the
notebook imported matplotlib. A figure's attributes are mostly caches: drawing it, saving it or
even ``repr(fig)`` (which sizes its bounding box) fills renderer caches, transformed bounding
boxes and the ``stale`` flags, and autoscaling settles the view limits. Fingerprinting those
made every read of a figure look like a change of it. This one reads what a figure shows
through matplotlib's getters that compute nothing: the figure's size, dpi and colour; each
axes' position, scales, titles, axis labels, user-set ticks and limits (the data limits while
autoscaling is on: the view limits are then derived from them); and for every artist below it
(lines, texts, patches, collections, images, legends) its data and its plain settings. Ticks
that matplotlib makes lazily are never asked for.
"""

import hashlib
import sys
from typing import Any

PROTOCOL_VERSION = 1
#: artists looked at per figure; past this the fingerprint is partial (and says so)
MAX_ARTISTS = 2000
#: plain attributes that are caches or flags, not what the artist shows
_VOLATILE = frozenset(
    {"stale", "_stale", "_transformSet", "_mouseover", "_cachedRenderer", "_tick_position"}
)
_VOLATILE_PREFIXES = ("_invalid", "_cached", "_renderer", "_transformed")
#: artists whose path matplotlib recomputes when it draws (from the view limits)
_DRAWN_PATHS = frozenset({"Spine", "Text", "Annotation"})
_PLAIN = (int, float, complex, bool, str, bytes, type(None))
#: the arrays the running ``fingerprint`` hashed (the probe runs on one thread at a time)
_seen_arrays: list = []


def _data(values):
    """A process-independent digest of array-like data (a numpy array, a list of numbers)."""
    numpy = sys.modules.get("numpy")  # matplotlib loads it: here whenever a figure is
    if numpy is None:
        return repr(values)
    try:
        if isinstance(values, numpy.ndarray):
            _seen_arrays.append(values)  # user memory the artist may share (``a[:100]``)
        arr = numpy.asarray(values)
        if arr.dtype.hasobject:
            return repr(values)
        return (arr.shape, arr.dtype.str, hashlib.blake2b(arr.tobytes(), digest_size=16).digest())
    except Exception:
        return repr(values)


def _plain_attrs(artist):
    """The artist's own plain settings (colour, width, text, visibility…), caches left out."""
    try:
        attrs = object.__getattribute__(artist, "__dict__")
    except Exception:
        return ()
    out = []
    for key, value in attrs.items():
        if key in _VOLATILE or key.startswith(("_invalid", "_cached", "_renderer", "_transformed")):
            continue
        if (
            isinstance(value, _PLAIN)
            or isinstance(value, tuple)
            and all(isinstance(v, _PLAIN) for v in value)
        ):
            out.append((key, value))
    return tuple(sorted(out, key=lambda kv: kv[0]))


def _axis(axis):
    """An axis by its label, scale and user-set locators/formatters (no lazily made ticks)."""
    parts = [axis.get_label().get_text(), axis.get_scale(), axis.get_visible()]
    for ticker in (axis.get_major_locator(), axis.get_major_formatter()):
        kind = type(ticker).__name__
        parts.append(kind)
        # only ticks the user fixed are state (an AutoLocator keeps its last computed ones)
        value = {"FixedLocator": "locs", "FixedFormatter": "seq"}.get(kind)
        if value is not None:
            parts.append(_data(getattr(ticker, value, None)))
    return tuple(parts)


def _axes(ax):
    parts = [tuple(ax.get_position(original=True).bounds), ax.get_aspect()]
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        parts.append(_axis(axis))
        auto = getattr(ax, f"get_autoscale{name}_on")()
        # while autoscaling, the view limits follow the data (settled lazily, at draw time)
        lims = ax.dataLim.intervalx if name == "x" else ax.dataLim.intervaly
        if not auto:
            lims = ax.get_xlim() if name == "x" else ax.get_ylim()
        parts.append((auto, _data(lims)))
    return tuple(parts)


def _own(artist):
    """What one artist shows, by its type."""
    kind = type(artist).__name__
    parts = [kind, _plain_attrs(artist)]
    getters = {
        "Figure": lambda a: (tuple(a.get_size_inches()), a.get_dpi(), repr(a.get_facecolor())),
        "Line2D": lambda a: (
            _data(a.get_xdata(orig=True)),
            _data(a.get_ydata(orig=True)),
            repr(a.get_marker()),
        ),
        "Text": lambda a: (a.get_fontsize(), repr(a.get_fontweight())),
        "Rectangle": lambda a: (a.get_x(), a.get_y(), a.get_width(), a.get_height()),
        "AxesImage": lambda a: (_data(a.get_array()),),
        "Legend": lambda a: tuple(t.get_text() for t in a.get_texts()),
    }
    get = getters.get(kind)
    if get is not None:
        parts.append(get(artist))
    elif hasattr(artist, "get_offsets"):  # collections: scatter points, their colour values
        parts.append((_data(artist.get_offsets()), _data(artist.get_array())))
    elif hasattr(artist, "get_path") and kind not in _DRAWN_PATHS:
        parts.append(_data(artist.get_path().vertices))
    if hasattr(artist, "get_xaxis") and hasattr(artist, "dataLim"):
        parts.append(_axes(artist))
    return tuple(parts)


def fingerprint(artist, memo):
    """(fingerprint, complete, arrays) of a matplotlib artist and everything drawn in it;
    ``memo`` (id -> part) shares the artists of one figure between the globals naming them
    (``fig``, ``ax``, ``line``); ``arrays`` are the numpy arrays hashed on the way."""
    parts: list[Any] = []
    stack = [artist]
    seen = set()
    del _seen_arrays[:]
    while stack:
        a = stack.pop()
        if id(a) in seen:
            continue
        seen.add(id(a))
        if len(seen) > MAX_ARTISTS:
            return (hash(tuple(parts)), len(seen)), False, list(_seen_arrays)
        part = memo.get(id(a))
        if part is None:
            part = memo[id(a)] = (_own(a), _children(a))
        parts.append(part[0])
        stack.extend(reversed(part[1]))
    return (hash(tuple(parts)), len(seen)), True, list(_seen_arrays)


def _children(a):
    if type(a).__name__ in ("XAxis", "YAxis", "Legend"):
        return ()  # their children are made on demand (ticks) or shown above (texts)
    try:
        return tuple(a.get_children())
    except Exception:
        return ()
