"""In-kernel checkpoint loader (standard library only; never imports ipykeep).

Installed after the writer (``_ipykeep_ckpt``, whose configuration, blob paths and unpickler it
uses) as ``sys.modules["_ipykeep_ckpt_load"]``. Every blob authenticates under the project's key
before it is unpickled (``blobfmt.Verifier``: chunk tags hashed on threads, compared in one MAC).

Authenticating a large blob is the one cost of a restore that does not depend on Python's
imports (~0.8 CPU-s per GB), so it is started as early as the daemon knows which blobs it will
load: ``prefetch`` queues them and returns at once, and the hashing overlaps whatever the kernel
does next (the cheap cells a restore re-runs first: imports, mostly). ``restore`` then takes
the prefetched blobs as they are (already checked, or still being hashed) and queues the
others. ``verify`` keeps the blobs it authenticated the same way, so a rollback's ``restore``
right after it does not hash them a second time. ``collect_blobs`` keeps an SSH kernel's store
(on its host) within its limit. Values are unpickled from the very bytes
that were authenticated (the same mapping), never from a second read of the file.
"""

import contextlib
import json
import mmap
import os
import re
import stat
import sys
import threading
import time

#: the writer's protocol, which this module's replies carry: the two change together
PROTOCOL_VERSION = 2
_fmt = sys.modules["_ipykeep_ckpt_blob"]
_snap = sys.modules["_ipykeep_ckpt"]
_BLOB_ID = re.compile(r"^[0-9a-f]{64}$")
_TAMPERED = (
    "tampered: the blob does not authenticate under this project's key; it was not unpickled"
)
_DEADLINE = "deadline: the restore deadline passed before this value was loaded"


class _Batch:
    """Blobs queued for authentication, by id: (mapped bytes, pending tags)."""

    def __init__(self):
        self.verifier = _fmt.Verifier(_snap._cfg["key"])
        self.blobs = {}
        self.failed = {}  # blob id -> why it cannot be loaded (missing, outdated)

    def add(self, blob_id):
        if blob_id in self.blobs or blob_id in self.failed:
            return
        data, why = _open(blob_id)
        if why:
            self.failed[blob_id] = why
        else:
            self.blobs[blob_id] = (data, self.verifier.submit(data))

    def close(self):
        self.verifier.close()
        self.blobs.clear()


_lock = threading.Lock()
_kept = [None]  # the batch ``prefetch`` or ``verify`` left for the next ``restore``


def _take():
    with _lock:
        batch, _kept[0] = _kept[0], None
    return batch


def _keep(batch):
    old = _take()
    if old is not None and old is not batch:
        old.close()
    with _lock:
        _kept[0] = batch


def _open(blob_id):
    """A blob's bytes, mapped (no copy of a large value), or why it cannot be loaded."""
    if not _BLOB_ID.match(blob_id):
        return None, f"tampered: {blob_id!r} is not a blob id"
    try:
        # O_NONBLOCK: opening a FIFO planted in the store returns at once instead of waiting
        # for a writer that never comes (a regular file ignores the flag)
        fd = os.open(_snap._blob_path(blob_id), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None, f"tampered: {blob_id[:12]} is not a regular file; it was not read"
            size = st.st_size
            # ACCESS_COPY keeps the arrays built over it writable without ever writing to the
            # file (blobs are replaced by rename, never rewritten in place)
            data = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY) if size else b""
    except (OSError, ValueError) as exc:
        return None, f"missing: {getattr(exc, 'strerror', None) or exc}"
    return data, _fmt.outdated(data)


def prefetch(blob_ids):
    """Start authenticating the blobs a ``restore`` will load next, and return at once.

    Replaces what an earlier prefetch left; ``discard`` drops it when no restore follows.
    """
    batch = _Batch()
    for blob_id in blob_ids:
        batch.add(blob_id)
    _keep(batch)
    return json.dumps(len(batch.blobs))


def discard():
    batch = _take()
    if batch is not None:
        batch.close()
    return "null"


def restore(items, deadline_s, delete=(), aliases=None):
    """Load ``items`` (``[name, blob_id]``), authenticated, until the deadline; drop ``delete``;
    bind each name of ``aliases`` (name -> a loaded name) to that name's object.

    Values are unpickled in order, each once its own bytes authenticate (the imports a small
    early value triggers overlap the hashing of a large later one). Returns per name "ok" or
    the reason it was not loaded; "tampered:" and "load_failed:" reasons poison the blob on
    the host side.
    """
    ns, _ = _snap._ns()
    deadline = time.monotonic() + float(deadline_s)
    out = {}
    batch = _take() or _Batch()
    try:
        for name, blob_id in items:
            if time.monotonic() > deadline:
                out[name] = _DEADLINE
                continue
            batch.add(blob_id)
        for name, blob_id in items:
            if name in out:
                continue
            if blob_id in batch.failed:
                out[name] = batch.failed[blob_id]
                continue
            data, submitted = batch.blobs[blob_id]
            try:
                if time.monotonic() > deadline:
                    raise TimeoutError()
                authentic = batch.verifier.check(blob_id, submitted, deadline - time.monotonic())
            except TimeoutError:
                out[name] = _DEADLINE
                continue
            if not authentic:
                out[name] = _TAMPERED
                continue
            try:
                value = _snap._load(data)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                out[name] = f"load_failed: {type(exc).__name__}: {str(exc)[:160]}"
                continue
            finally:
                del data
            if name == "<numpy.random>":
                __import__("numpy.random").random.set_state(value)
            elif name == "<random>":
                __import__("random").setstate(value)
            else:
                ns[name] = value
            del value
            with contextlib.suppress(OSError):
                os.utime(_snap._blob_path(blob_id))
            out[name] = "ok"
    finally:
        batch.close()
    for name, same in (aliases or {}).items():
        # one object under several names, pickled once per name: bound to one object again
        if out.get(same) == "ok":
            ns[name] = ns[same]
            out[name] = "ok"
        else:
            out[name] = out.get(same) or f"missing: {same} (the same object) was not loaded"
    for name in delete:
        ns.pop(name, None)
    return json.dumps({"protocol": _snap.PROTOCOL, "results": out})


def verify(blob_ids):
    """Blob id -> why it cannot be loaded, for every blob that does not authenticate (none: {}).

    The authenticated blobs are kept for the ``restore`` that follows (a rollback checks every
    value before it changes anything, then loads them).
    """
    batch = _Batch()
    for blob_id in blob_ids:
        batch.add(blob_id)
    bad = dict(batch.failed)
    for blob_id, (_, submitted) in list(batch.blobs.items()):
        if not batch.verifier.check(blob_id, submitted, None):
            bad[blob_id] = "tampered: the blob does not authenticate under this project's key"
            del batch.blobs[blob_id]
    _keep(batch)
    return json.dumps(bad)


def collect_blobs(live, max_bytes, grace_s):
    """Remote: keep the host's store within ``max_bytes``, as the daemon's collector does for
    local blobs: blobs no manifest names (``live``) go once older than ``grace_s``, then the
    least recently used. Returns the ids removed."""
    live = set(live)
    base = os.path.join(_snap._cfg["root"], "blobs")
    now = time.time()
    found = []
    for sub in os.listdir(base) if os.path.isdir(base) else []:
        d = os.path.join(base, sub)
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(d, name))
                found.append((st.st_mtime, sub + name, st.st_size))
    found.sort()
    removed, kept = [], []
    for mtime, blob_id, size in found:
        if blob_id not in live and now - mtime > float(grace_s):
            with contextlib.suppress(OSError):
                os.unlink(_snap._blob_path(blob_id))
                removed.append(blob_id)
            continue
        kept.append((blob_id, size))
    total = sum(size for _, size in kept)
    for blob_id, size in kept:
        if total <= int(max_bytes):
            break
        with contextlib.suppress(OSError):
            os.unlink(_snap._blob_path(blob_id))
            removed.append(blob_id)
            total -= size
    return json.dumps({"removed": removed, "bytes": total})
