"""Checkpoints of a kernel on an SSH host: the blobs stay with the kernel, the manifests come here.

The kernel pickles and writes its values on its own disk, in ``.ipykeep/checkpoints/<project>``
under its working directory on the host (directories 0700, blobs 0600), so large values never
cross the link. It has no access to the project's key file: the key is sent once, in the silent
request that configures the in-kernel writer, over the kernel's authenticated channel
(HMAC-signed messages through the SSH tunnel); it is never logged or written on the host. Each
finished manifest (small JSON, signed by the kernel with the same key) comes back, fetched right
after the snapshot (``settle``) or riding on a later reply, and is stored with the project's
other manifests, so planning, listing and restore read them as for a local kernel; the kernel
reads its blobs on the host when it restores them.

A manifest is written here only when the daemon issued it (its path and ``seq`` match the
newest one asked for): a snapshot that was superseded or withdrawn meanwhile (the cell ran
again, or failed) is dropped, and a kernel cannot name a path of its own choosing.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import posixpath
from pathlib import Path
from typing import Any

from ipykeep.checkpoints.limits import GRACE_S, Limits
from ipykeep.checkpoints.state import KernelCheckpoints, call_loader
from ipykeep.checkpoints.state import call as _call
from ipykeep.checkpoints.store import CheckpointStore
from ipykeep.engine.session import KernelSession
from ipykeep.platform.processes import fork_is_safe

log = logging.getLogger("ipykeep.checkpoints")

#: where an SSH kernel keeps its blobs, relative to its working directory on the host
REMOTE_STORE = ".ipykeep/checkpoints"


def remote_root(session: KernelSession, store: CheckpointStore) -> str | None:
    """The store directory on the kernel's host, or None when the kernel is not an SSH one.

    One directory per project (named by a MAC of the project's key, which reveals nothing of
    it): two projects whose kernels share a host directory never collect each other's blobs.
    """
    provider: Any = getattr(
        session.process, "provider", None
    )  # by kind: SSH code loads only when used
    if provider is not None and provider.kind == "ssh":
        project = hmac.new(store.key, b"ipykeep remote checkpoint store", "sha256").hexdigest()[:16]
        return posixpath.join(provider.target.path, REMOTE_STORE, project)
    return None


def configure_call(store: CheckpointStore, root: str | None, limits: Limits, config: Any) -> str:
    """The in-kernel call configuring the kernel's writer: on the project's store, where the
    kernel reads the key file itself, or (``root``, an SSH kernel's directory on its host) with
    the key in the call (never log it)."""
    common = (
        limits.max_value_bytes,
        limits.max_cell_bytes,
        limits.max_pending_bytes,
        limits.snapshot_budget_s,
        list(config.checkpoint_exclude_names),
        list(config.checkpoint_exclude_types),
        # A remote kernel's host decides for itself (the in-kernel code checks for os.fork).
        config.checkpoint_pickle_in == "fork" and (root is not None or fork_is_safe()),
    )
    if root is None:
        return _call("configure", str(store.root), str(store.key_path), *common)
    return _call("configure_remote", root, store.key.hex(), *common)


def issue(st: KernelCheckpoints, path: Path, seq: int | None) -> None:
    """The newest manifest asked for at ``path`` (named checkpoints have no ``seq``)."""
    st.remote_issued[str(path)] = seq


def withdraw(st: KernelCheckpoints, path: Path) -> None:
    """The cell's checkpoint no longer holds: a snapshot of it still on its way is dropped."""
    st.remote_issued.pop(str(path), None)


def deliver(store: CheckpointStore, st: KernelCheckpoints, manifests: Any) -> int:
    """Store the manifests a remote kernel finished; returns how many were written."""
    written = 0
    for item in manifests or []:
        try:
            path, manifest = str(item[0]), dict(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        if path not in st.remote_issued or st.remote_issued[path] != manifest.get("seq"):
            continue  # superseded, withdrawn, or never asked for
        mac = manifest.get("mac")
        if not isinstance(mac, str) or not hmac.compare_digest(store.sign(manifest)["mac"], mac):
            continue  # not signed with this project's key
        try:
            store.write_manifest(Path(path), manifest)
        except OSError as exc:  # a full disk costs the checkpoint (its cell re-runs), nothing else
            log.warning("checkpoint manifest %s not written: %s", path, exc)
            continue
        written += 1
    return written


async def take(session: KernelSession, store: CheckpointStore, st: KernelCheckpoints) -> None:
    """Fetch and store the manifests the kernel finished since its last reply."""
    manifests = await session.process.eval_silent(_call("take_manifests"))
    await asyncio.to_thread(deliver, store, st, manifests)


#: seconds a background fetch waits for the kernel's writer (what is later comes with the next
#: reply)
SETTLE_S = 5.0


async def settle(session: KernelSession, store: CheckpointStore, st: KernelCheckpoints) -> None:
    """After a snapshot: fetch its manifest once written, so a kernel lost before its next
    cell still leaves it here. On a free subshell while the main shell is busy; skipped when
    there is none (the manifest then comes with the next reply)."""
    proc = session.process
    subshell = None
    if session.scheduler.main_lock.locked() or session.running():
        subshell = await proc.acquire_subshell(session.config.max_subshells)
        if subshell is None:
            return
    try:
        manifests = await proc.eval_silent(
            _call("settle", SETTLE_S), subshell_id=subshell, timeout=SETTLE_S + 30
        )
    finally:
        if subshell is not None:
            proc.release_subshell(subshell)
    await asyncio.to_thread(deliver, store, st, manifests)


def live_blobs(store: CheckpointStore) -> list[str]:
    """Every blob a manifest of the project names (the host's collector keeps those)."""
    live: set[str] = set()
    for path in store.all_manifest_paths():
        try:
            data = store.read_manifest(path)
        except Exception:
            continue
        live |= {
            v["blob"]
            for v in (data.get("values") or {}).values()
            if isinstance(v, dict) and "blob" in v
        }
    return sorted(live)


async def collect(session: KernelSession, store: CheckpointStore, limits: Limits) -> None:
    """Keep the host's store within the project limit, as ``limits.collect`` does here."""
    live = await asyncio.to_thread(live_blobs, store)
    await session.process.eval_silent(
        call_loader("collect_blobs", live, limits.max_project_bytes, GRACE_S), timeout=120
    )
