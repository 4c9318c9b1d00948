"""Authentication of a large checkpoint blob: HMAC-SHA256 vs keyed BLAKE2b (one thread, fed
64 MB at a time), and the blob format's chunked HMAC-SHA256 checked by its ``Verifier`` on every
CPU; same process, same bytes: ``python -m benchmarks.mac_speed [GB]`` (default 1)."""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import time

from ipykeep.checkpoints._inkernel import blobfmt

CHUNK = 64 << 20


def _hmac_sha256(key: bytes, parts: list[memoryview]) -> str:
    m = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        m.update(p)
    return m.hexdigest()


def _blake2b(key: bytes, parts: list[memoryview]) -> str:
    m = hashlib.blake2b(key=key, digest_size=32)
    for p in parts:
        m.update(p)
    return m.hexdigest()


def _chunked(key: bytes, parts: list[memoryview]) -> str:
    """What a kernel does to check a blob (``_inkernel/blobfmt.py``); the caller's thread helps."""
    verifier = blobfmt.Verifier(key)
    try:  # the parts are slices of one buffer: check that buffer as one blob
        pending = verifier.submit(parts[0].obj)
        verifier.check("0" * 64, pending, None)
        return str(blobfmt.combine(verifier.blob_key, pending.length, pending.tags))
    finally:
        verifier.close()


def main() -> None:
    gb = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    data = os.urandom(CHUNK) * int(gb * 16)
    view = memoryview(data)
    parts = [view[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    key = os.urandom(32)
    times: dict[str, list[float]] = {"hmac-sha256": [], "blake2b": [], "chunked": []}
    for _ in range(3):  # interleaved: a busy machine slows all alike
        for name, fn in (
            ("hmac-sha256", _hmac_sha256),
            ("blake2b", _blake2b),
            ("chunked", _chunked),
        ):
            t = time.perf_counter()
            fn(key, parts)
            times[name].append(time.perf_counter() - t)
    size = len(data) / 2**30
    for name, ts in times.items():
        best = min(ts)
        print(
            f"{name:12s} {size:.2f} GiB: best {best:.3f} s ({size / best:.2f} GiB/s), runs "
            f"{', '.join(f'{t:.3f}' for t in ts)}"
        )
    print(f"blake2b / hmac-sha256 (best): {min(times['blake2b']) / min(times['hmac-sha256']):.2f}")
    print(
        "chunked (format 2) / hmac-sha256 (best): "
        f"{min(times['chunked']) / min(times['hmac-sha256']):.2f}"
    )


if __name__ == "__main__":
    main()
