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

import hashlib
import hmac
import os
from concurrent.futures import ThreadPoolExecutor, wait

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


def blob_id(key, parts):
    """The id of the bytes ``parts`` joined (one thread, streaming: the writer's side)."""
    chunk_key, blob_key = subkeys(key)
    tags, mac, filled, total = [], None, 0, 0
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
    count = int.from_bytes(view[len(MAGIC): len(MAGIC) + 4], "little")
    at = len(MAGIC) + 4
    if at + 8 * count > len(view):
        raise ValueError("truncated checkpoint blob header")
    lengths = [int.from_bytes(view[at + 8 * i: at + 8 * i + 8], "little") for i in range(count)]
    at += 8 * count
    if at + sum(lengths) != len(view) or not count:
        raise ValueError("checkpoint blob parts do not add up to its size")
    parts = []
    for n in lengths:
        parts.append(view[at: at + n])
        at += n
    return parts


def outdated(data):
    """Why a blob of an earlier format is not loaded, or None (read before any MAC: it costs
    nothing, and such a blob is never unpickled either way)."""
    old = OLD_MAGICS.get(bytes(memoryview(data)[: len(MAGIC)]))
    if old is None:
        return None
    return f"outdated: written in checkpoint format {old} by an earlier ipykeep (now {FORMAT}); its cell re-runs"


class Verifier:
    """Authenticates blobs on a pool of threads while the caller unpickles earlier ones.

    ``submit`` queues every chunk of a blob at once; ``check`` waits (up to a deadline) for that
    blob's tags and compares the id. Blobs are checked in the order submitted, so the first
    value can load while the large ones behind it are still being hashed.
    """

    def __init__(self, key, workers=None):
        self.chunk_key, self.blob_key = subkeys(key)
        self.pool = ThreadPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1), thread_name_prefix="ipykeep-verify")

    def submit(self, data):
        view = memoryview(data).cast("B") if len(data) else memoryview(b"")
        starts = range(0, max(view.nbytes, 1), CHUNK)
        futures = [self.pool.submit(chunk_tag, self.chunk_key, i, view[s: s + CHUNK]) for i, s in enumerate(starts)]
        return view.nbytes, futures

    def check(self, blob_id_hex, submitted, timeout):
        """True when the bytes submitted have id ``blob_id_hex``; TimeoutError past ``timeout``
        seconds (None: no limit)."""
        length, futures = submitted
        _, late = wait(futures, timeout=None if timeout is None else max(timeout, 0))
        if late:
            raise TimeoutError()
        return hmac.compare_digest(combine(self.blob_key, length, [f.result() for f in futures]), blob_id_hex)

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
