"""Per-kernel bookkeeping that every call adds to stays bounded over a long session."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ipykeep.engine import writeback
from ipykeep.engine.archive import KernelArchive
from ipykeep.engine.resolve import kernel_process
from ipykeep.engine.session import (
    OWN_WRITES_KEPT,
    REQUEST_IDS_KEPT,
    KernelSession,
    code_digest,
)
from ipykeep.project.config import Config
from ipykeep.project.notebook import WriteReport


def _session(tmp_path: Path) -> KernelSession:
    config = Config()
    return KernelSession(
        kernel_id="k1",
        process=kernel_process("k1", config, tmp_path, None),
        notebook=tmp_path / "n.ipynb",
        cwd=tmp_path,
        config=config,
        archive=KernelArchive(tmp_path / "k1", "k1"),
    )


def test_the_notebook_writes_the_watcher_ignores_are_the_latest_ones(tmp_path: Path) -> None:
    session = _session(tmp_path)
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(1_000)]
    for digest in hashes:  # a thousand write-backs of outputs
        writeback._account(session, WriteReport(written=True, content_hash=digest))
    assert len(session.own_writes) == OWN_WRITES_KEPT
    assert all(digest in session.own_writes for digest in hashes[-OWN_WRITES_KEPT:])
    # content ipykeep wrote long ago, back in the file, is someone else's doing
    assert hashes[0] not in session.own_writes


def test_retries_are_answered_for_the_latest_request_ids(tmp_path: Path) -> None:
    session = _session(tmp_path)
    code = "x = 1\n" * 10_000  # 60 KB of code, once per call
    for i in range(REQUEST_IDS_KEPT + 500):
        session.remember_request(f"r-{i}", code, f"c{i + 1}")
    assert len(session.request_ids) == REQUEST_IDS_KEPT
    latest = session.request_ids[f"r-{REQUEST_IDS_KEPT + 499}"]
    assert latest == (code_digest(code), f"c{REQUEST_IDS_KEPT + 500}")
    assert "r-499" not in session.request_ids and "r-500" in session.request_ids
    # the code itself is not kept: a digest of it is
    assert all(len(digest) == 32 for digest, _ in session.request_ids.values())
