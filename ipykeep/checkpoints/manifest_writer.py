"""Cheap cells' manifests, written off the batch's path: one writer per kernel, in run order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from ipykeep.checkpoints.state import KernelCheckpoints
from ipykeep.checkpoints.store import CheckpointStore
from ipykeep.engine.session import KernelSession

log = logging.getLogger("ipykeep.checkpoints")

#: seconds the writer gathers manifests before it writes them together
GATHER_S = 0.05


def write_later(
    store: CheckpointStore,
    st: KernelCheckpoints,
    session: KernelSession,
    path: Path,
    manifest: dict[str, Any],
) -> None:
    """Queue a manifest (the cell's run returns without waiting for the disk). The writer
    takes what queued within ``GATHER_S``, and what queued while it wrote, in order and in one
    thread hop (a thread hop per quick cell cost the event loop more than the write), so the
    newest lands last. Whoever reads the manifests awaits ``st.manifest_write``."""
    st.manifest_queue.append((path, manifest))
    if st.manifest_write is not None and not st.manifest_write.done():
        return  # the running writer sees it before it stops

    async def write() -> None:
        while st.manifest_queue:
            await asyncio.sleep(GATHER_S)
            queued, st.manifest_queue = st.manifest_queue, []
            await asyncio.to_thread(_write_all, store, queued)

    st.manifest_write = session.scheduler.spawn(write())


def _write_all(store: CheckpointStore, queued: list[tuple[Path, dict[str, Any]]]) -> None:
    for path, manifest in queued:
        try:
            store.write_manifest(path, manifest)
        except OSError as exc:
            log.warning("checkpoint manifest %s not written: %s", path, exc)


async def written_in(st: KernelCheckpoints, directory: Path) -> None:
    """Wait for the writer when a manifest queued for ``directory`` is not written yet."""
    pending = st.manifest_write
    if pending is not None and any(path.parent == directory for path, _ in st.manifest_queue):
        with contextlib.suppress(Exception):
            await asyncio.shield(pending)
