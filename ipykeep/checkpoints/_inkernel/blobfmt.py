"""The checkpoint blob format and its authentication (standard library only; never imports ipykeep).

Installed in kernels as ``sys.modules["_ipykeep_ckpt_blob"]`` next to ``_ipykeep_ckpt``
(``snapshot.py``); the daemon's store imports this same file, so both sides compute one id.

A blob is ``MAGIC``, the part count and lengths, then the parts (a pickle-5 stream and its
out-of-band buffers). Its id, which is also its file name and what signed manifests name, is a
MAC of all those bytes under the project's secret key, built so that it can be checked on
several cores at once (hashlib releases the GIL on large buffers)::

    chunk i  = bytes [i * CHUNK, (i + 1) * CHUNK)           (the last one may be shorter)
    tag i    = HMAC-SHA256(Kc, i as 8 bytes || chunk i)
    blob id  = HMAC-SHA256(Kb, length || CHUNK || count || tag 0 || ... || tag n-1)

with ``Kc`` and ``Kb`` derived from the project key by HMAC under two fixed labels (so neither
can be confused with the other nor with a manifest's MAC). Every chunk's tag depends on its
index and the final MAC on the total length and the tags in order: reordering, dropping,
truncating or changing any chunk changes the id. Nothing of the MAC is stored in the blob, so
there is no "verified" mark to forge: a reader recomputes everything from the bytes it is about
to unpickle.
"""

import collections
import hashlib
import hmac
import os
import threading
import time
from typing import Any

#: the calls this module answers (``FORMAT`` versions the blobs themselves)
PROTOCOL_VERSION = 1
FORMAT = 2
MAGIC = b"IPKCKPT2"
#: magics of earlier formats: such blobs are not loaded (their cells re-run), nor quarantined
OLD_MAGICS = {b"IPKCKPT1": 1}
CHUNK = 8 << 20
_LABELS = (b"ipykeep checkpoint blob v2: chunk tags", b"ipykeep checkpoint blob v2: blob id")


def _u64(n):
    return int(n).to_bytes(8, "little")


def subkeys(key):
    """(chunk key, blob key), derived from the project key."""
    return tuple(hmac.new(key, label, hashlib.sha256).digest() for label in _LABELS)


def chunk_tag(chunk_key, index, data):
    mac = hmac.new(chunk_key, _u64(index), hashlib.sha256)
    mac.update(data)
    return mac.digest()


def combine(blob_key, length, tags):
    """The blob id (hex) from the total length and the chunk tags in order."""
    body = b"".join([_u64(length), _u64(CHUNK), _u64(len(tags)), *tags])
    return hmac.new(blob_key, body, hashlib.sha256).hexdigest()


def blob_id(key: bytes, parts: Any) -> str:
    """The id of the bytes ``parts`` joined (one thread, streaming: the writer's side)."""
    chunk_key, blob_key = subkeys(key)
    tags: list = []
    mac, filled, total = None, 0, 0
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            if mac is None:
                mac, filled = hmac.new(chunk_key, _u64(len(tags)), hashlib.sha256), 0
            take = min(CHUNK - filled, view.nbytes)
            mac.update(view[:take])
            filled, total, view = filled + take, total + take, view[take:]
            if filled == CHUNK:
                tags.append(mac.digest())
                mac = None
    if mac is not None or not tags:  # a partial last chunk, or the single empty chunk of b""
        tags.append((mac or hmac.new(chunk_key, _u64(0), hashlib.sha256)).digest())
    return combine(blob_key, total, tags)


def header(lengths):
    return MAGIC + len(lengths).to_bytes(4, "little") + b"".join(_u64(n) for n in lengths)


def split(data):
    """The parts of a blob's bytes (memoryviews over ``data``): the stream, then the buffers."""
    view = memoryview(data)
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise ValueError("not a checkpoint blob")
    count = int.from_bytes(view[len(MAGIC) : len(MAGIC) + 4], "little")
    at = len(MAGIC) + 4
    if at + 8 * count > len(view):
        raise ValueError("truncated checkpoint blob header")
    lengths = [int.from_bytes(view[at + 8 * i : at + 8 * i + 8], "little") for i in range(count)]
    at += 8 * count
    if at + sum(lengths) != len(view) or not count:
        raise ValueError("checkpoint blob parts do not add up to its size")
    parts = []
    for n in lengths:
        parts.append(view[at : at + n])
        at += n
    return parts


def outdated(data):
    """Why a blob of an earlier format is not loaded, or None (read before any MAC: it costs
    nothing, and such a blob is never unpickled either way)."""
    old = OLD_MAGICS.get(bytes(memoryview(data)[: len(MAGIC)]))
    if old is None:
        return None
    return (
        f"outdated: written in checkpoint format {old} by an earlier ipykeep (now {FORMAT}); "
        "its cell re-runs"
    )


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Pending:
    """One blob being checked: its length and its chunk tags as they arrive."""

    def __init__(self, length, count):
        self.length = length
        self.tags = [None] * count
        self.left = count
        self.failed = False
        self.done = threading.Event()


class Verifier:
    """Authenticates blobs on threads while the caller unpickles earlier ones.

    ``submit`` queues every chunk of a blob; ``check`` waits (up to a deadline) for that blob's
    tags and compares the id. Chunks are taken in the order submitted, so the first value can
    load while the large ones behind it are still being hashed. There is one worker fewer than
    CPUs: the caller's thread is busy unpickling (imports, mostly) meanwhile, and when it has to
    wait for a blob it hashes that blob's remaining chunks itself instead of idling.
    """

    def __init__(self, key, workers=None):
        self.chunk_key, self.blob_key = subkeys(key)
        self.jobs: Any = collections.deque()  # (pending, chunk index, chunk bytes)
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.closed = False
        for _ in range(workers if workers is not None else min(3, max(1, _cpus() - 1))):
            threading.Thread(target=self._work, name="ipykeep-verify", daemon=True).start()

    def submit(self, data):
        view = memoryview(data).cast("B") if len(data) else memoryview(b"")
        starts = range(0, max(view.nbytes, 1), CHUNK)
        pending = _Pending(view.nbytes, len(starts))
        with self.lock:
            self.jobs.extend((pending, i, view[s : s + CHUNK]) for i, s in enumerate(starts))
            self.wake.notify_all()
        return pending

    def _run_one(self):
        """Hash the next queued chunk; False when none is queued."""
        with self.lock:
            if not self.jobs:
                return False
            pending, index, chunk = self.jobs.popleft()
        try:
            tag = chunk_tag(self.chunk_key, index, chunk)
        except Exception:  # a chunk that cannot be read is a blob that does not authenticate
            tag, pending.failed = None, True
        with self.lock:
            pending.tags[index] = tag
            pending.left -= 1
            if pending.left == 0:
                pending.done.set()
        return True

    def _work(self):
        while True:
            with self.lock:
                while not self.jobs and not self.closed:
                    self.wake.wait()
                if self.closed:
                    return
            self._run_one()

    def check(self, blob_id_hex, pending, timeout):
        """True when the bytes submitted have id ``blob_id_hex``; TimeoutError past ``timeout``
        seconds (None: no limit)."""
        end = None if timeout is None else time.monotonic() + max(timeout, 0)
        while not pending.done.is_set():
            if end is not None and time.monotonic() > end:
                raise TimeoutError()
            if not self._run_one():  # the rest is being hashed by the workers
                pending.done.wait(None if end is None else max(0.0, end - time.monotonic()))
        if pending.failed:
            return False
        return hmac.compare_digest(
            combine(self.blob_key, pending.length, pending.tags), blob_id_hex
        )

    def close(self):
        with self.lock:
            self.closed = True
            self.jobs.clear()
            self.wake.notify_all()
