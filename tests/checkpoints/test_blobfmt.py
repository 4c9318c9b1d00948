"""The blob format's MAC (chunked HMAC-SHA256): the writer's streaming id and the reader's
parallel check agree, and any change to any chunk, or to the length, is refused (pure)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipykeep.checkpoints._inkernel import blobfmt
from ipykeep.checkpoints.store import CheckpointStore
from tests.checkpoints.test_store import _inkernel_module

KEY = bytes(range(32))


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Chunks of 64 bytes: a few hundred bytes then span many chunks."""
    monkeypatch.setattr(blobfmt, "CHUNK", 64)
    yield 64


def check(data: bytes, blob_id: str, workers: int = 2) -> bool:
    verifier = blobfmt.Verifier(KEY, workers=workers)
    try:
        return bool(verifier.check(blob_id, verifier.submit(data), 10))
    finally:
        verifier.close()


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 640, 1000])
def test_streaming_id_and_parallel_check_agree(small_chunks: int, size: int) -> None:
    data = os.urandom(size)
    whole = blobfmt.blob_id(KEY, [data])
    # the writer hashes the blob as its parts (header, stream, buffers): boundaries anywhere
    cuts = sorted({0, size // 3, size // 3 + 1, size - 5 if size > 5 else 0, size})
    parts = [data[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    assert blobfmt.blob_id(KEY, parts) == whole
    assert check(data, whole)
    assert check(data, whole, workers=0)  # the caller's thread alone hashes every chunk
    assert blobfmt.blob_id(bytes(32), [data]) != whole  # another project's key


def test_any_changed_chunk_or_length_is_refused(small_chunks: int) -> None:
    data = os.urandom(64 * 5 + 10)  # five whole chunks and a short last one
    blob_id = blobfmt.blob_id(KEY, [data])

    def flipped(at: int) -> bytes:
        return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]

    for at in (0, 63, 64, 200, len(data) - 1):  # first, chunk edges, middle, last byte
        assert not check(flipped(at), blob_id), at
    assert not check(data[:-1], blob_id)  # truncated inside the last chunk
    assert not check(data[: 64 * 5], blob_id)  # truncated at a chunk boundary
    assert not check(data + b"\0", blob_id)  # appended
    swapped = data[64:128] + data[:64] + data[128:]
    assert not check(swapped, blob_id)  # chunks reordered: their tags bind their index
    assert check(data, blob_id)


def test_chunk_tags_are_not_the_blob_id() -> None:
    """A one-chunk blob's id is not its chunk tag, nor a plain HMAC of its bytes (keys differ)."""
    import hashlib
    import hmac

    data = b"x" * 100
    chunk_key, _ = blobfmt.subkeys(KEY)
    blob_id = blobfmt.blob_id(KEY, [data])
    assert blob_id != blobfmt.chunk_tag(chunk_key, 0, data).hex()
    assert blob_id != hmac.new(KEY, data, hashlib.sha256).hexdigest()


def test_check_has_a_deadline(small_chunks: int) -> None:
    verifier = blobfmt.Verifier(KEY, workers=1)
    try:
        submitted = verifier.submit(os.urandom(64 * 2000))
        with pytest.raises(TimeoutError):
            verifier.check("0" * 64, submitted, -1)
    finally:
        verifier.close()


def test_blob_of_the_earlier_format_is_not_loaded_nor_quarantined(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / ".ipykeep")
    ns: dict = {}
    mod = _inkernel_module(store, ns)
    stream = b"\x80\x05K\x07."  # the int 7
    old = b"IPKCKPT1" + (1).to_bytes(4, "little") + len(stream).to_bytes(8, "little") + stream
    blob = store.put_blob(old)  # authentic under the key, but of format 1
    out = json.loads(mod.loader.restore([["seven", blob]], 10))["results"]
    assert out["seven"].startswith("outdated: written in checkpoint format 1") and "seven" not in ns
    assert json.loads(mod.loader.verify([blob]))[blob].startswith("outdated:")
    new = store.put_blob(mod.MAGIC + old[8:])
    assert (
        json.loads(mod.loader.restore([["seven", new]], 10))["results"]["seven"] == "ok"
        and ns["seven"] == 7
    )


def test_truncated_header_is_refused_before_unpickling(tmp_path: Path) -> None:
    """Even a blob that authenticates is checked for parts adding up to its size."""
    store = CheckpointStore(tmp_path / ".ipykeep")
    ns: dict = {}
    mod = _inkernel_module(store, ns)
    stream = b"\x80\x05K\x07."
    bad = mod.MAGIC + (1).to_bytes(4, "little") + (len(stream) + 9).to_bytes(8, "little") + stream
    blob = store.put_blob(bad)
    out = json.loads(mod.loader.restore([["seven", blob]], 10))["results"]
    assert out["seven"].startswith("load_failed: ValueError") and "seven" not in ns
