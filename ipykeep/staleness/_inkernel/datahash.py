"""Content hashes of numpy and pandas data, for the namespace observer (``statemon.py``).

Installed in the kernel (standard library only) just before ``statemon``, whose fingerprinter
``_Fp`` mixes these methods in and shares these limits. ``self.np`` / ``self.pd`` are the
kernel's numpy and pandas when the notebook imported them (None otherwise); ``self._items``
and ``self._sample`` come from ``_Fp``.
"""

PROTOCOL_VERSION = 1
MAX_ITEMS = 64
MAX_BYTES = 1 << 16
SAMPLE = 2048


from typing import Any


class _DataHash:
    """Fingerprints of arrays, Arrow buffers, pandas blocks, indexes, series and frames."""

    np: Any
    pd: Any

    def _series(self, obj):
        vals = self._values(obj._values)
        idx = self._index(obj.index)
        exact = vals[1] and idx[1]
        return ("series", obj.shape, repr(obj.name), vals[0], idx[0]), exact, not exact

    def _index_fp(self, obj):
        fp, exact = self._index(obj)
        return fp, exact, not exact

    def _array(self, a):
        head = ("nd", a.shape, a.dtype.str)
        if a.dtype.hasobject:
            return head + (id(a),), False, True
        if a.nbytes <= MAX_BYTES:
            return head + (hash(a.tobytes()),), True, False
        flat = a.reshape(-1) if a.flags.c_contiguous else a.flat
        step = a.size // SAMPLE + 1
        sample = flat[::step]
        import numpy

        sample = numpy.asarray(sample)
        return (
            head + (hash(sample.tobytes()), hash(numpy.asarray(flat[-1:]).tobytes())),
            False,
            True,
        )

    def _values(self, values):
        """(fingerprint, exact) of the values behind a pandas object. Uses the arrays pandas
        keeps them in (numpy, Arrow buffers, masks, codes) so no Python object is made per
        element; converting a sample to Python objects cost ~1 ms per string column."""
        np = self.np
        if np is not None and isinstance(values, np.ndarray):
            fp, ex, _ = self._array(values)
            return fp, ex
        if np is None:
            return ("id", id(values)), False
        kind = type(values).__name__

        def attr(name):
            # no ``getattr``: a third-party array's ``__getattr__`` must not run
            try:
                return object.__getattribute__(values, name)
            except Exception:
                return None

        try:
            arrow = attr("_pa_array")
            if arrow is not None:
                return self._arrow(arrow)
            codes = attr("_codes")
            if isinstance(codes, np.ndarray):  # Categorical: codes and categories
                fp, ex, _ = self._array(codes)
                cats, cex = self._index(values.categories)
                return ("cat", fp, cats, bool(values.ordered)), ex and cex
            parts: list[Any] = [kind, str(values.dtype)]
            exact = True
            found = False
            for name in ("_ndarray", "_data", "_mask", "_left", "_right"):
                arr = attr(name)
                if isinstance(arr, np.ndarray):
                    fp, ex, _ = self._array(arr)
                elif self.pd is not None and isinstance(arr, self.pd.Index):
                    fp, ex = self._index(arr)
                else:
                    continue
                parts.append(fp)
                exact = exact and ex
                found = True
            if found:
                return tuple(parts), exact
        except Exception:
            pass
        return self._values_sampled(values)

    def _arrow(self, chunked):
        """Arrow data by its buffers' bytes (Arrow arrays are immutable: pandas replaces them to
        change a value, so a changed column also shows new buffer addresses)."""
        np = self.np
        chunks = getattr(chunked, "chunks", None)
        if chunks is None:
            chunks = [chunked]
        parts: list[Any] = [str(chunked.type), len(chunked), len(chunks)]
        exact = len(chunks) <= MAX_ITEMS
        for c in chunks[:MAX_ITEMS]:
            parts.append((c.offset, len(c), c.null_count))
            for buf in c.buffers():
                if buf is None:
                    parts.append(None)
                    continue
                raw = np.frombuffer(buf, dtype=np.uint8)
                if raw.size <= MAX_BYTES:
                    parts.append(hash(raw.tobytes()))
                    continue
                exact = False
                step = raw.size // (SAMPLE * 8) + 1
                parts.append(
                    (buf.address, raw.size, hash(raw[::step].tobytes()), hash(raw[-64:].tobytes()))
                )
        return tuple(parts), exact

    def _values_sampled(self, values):
        np = self.np
        try:  # other extension arrays: sample into numpy
            n = len(values)
            step = n // SAMPLE + 1
            arr = np.asarray(values[::step])
            if not arr.dtype.hasobject:
                return ("ext", n, hash(arr.tobytes())), step == 1
            return ("ext", n, hash(tuple(map(repr, arr)))), step == 1
        except Exception:
            return ("id", id(values)), False

    def _index(self, idx):
        pd = self.pd
        if isinstance(idx, pd.RangeIndex):
            return ("range", idx.start, idx.stop, idx.step), True
        fp, ex = self._values(idx._values)
        return ("index", len(idx), fp), ex

    def _frame(self, df):
        parts: list[Any] = [("frame", df.shape)]
        exact = True
        cols = list(df.columns[:MAX_ITEMS])
        parts.append(hash(tuple(repr(c) for c in cols)))
        exact = exact and len(df.columns) <= MAX_ITEMS
        idx, ex = self._index(df.index)
        parts.append(idx)
        exact = exact and ex
        try:
            blocks = df._mgr.blocks
            for blk in blocks[:MAX_ITEMS]:
                fp, ex = self._values(blk.values)
                parts.append(fp)
                exact = exact and ex
            exact = exact and len(blocks) <= MAX_ITEMS
        except Exception:
            parts.append(id(df))
            exact = False
        return tuple(parts), exact, not exact
