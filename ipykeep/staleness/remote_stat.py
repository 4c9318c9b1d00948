"""File stamps of a remote kernel's files (gateway, ssh), taken through the kernel.

A remote kernel reads files on its own machine: stat'ing the same paths here would answer for
another filesystem (or for nothing). So every stamp of such a kernel comes from the in-kernel
file tracker (``filetrack.stat_many``), one silent round trip for all the paths a question
needs:

* a plan (``run_stale``) first asks a recording stat which paths it needs (``prefetched``), then
  fetches them all at once; a cell run stamps its path literals in the cell's own request;
* the synchronous views (cell states, the watcher's notice) answer from the stamps last fetched;
* instead of watching directories, ``poll`` re-stats the paths the plan needs every
  ``remote_watch_interval_s`` seconds, never on a busy main shell (a free subshell, or the tick
  is skipped), and leaves the same notice a local watcher would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ipykeep.api.errors import IpykeepError
from ipykeep.staleness import FileStamp, probes
from ipykeep.staleness.analysis import analyze_source
from ipykeep.staleness.errors import StalenessError
from ipykeep.staleness.state import staleness_of

if TYPE_CHECKING:
    from ipykeep.engine.session import KernelSession

log = logging.getLogger("ipykeep.staleness")

STAT_KEY = "ipykeep_stat"


def is_remote(session: KernelSession) -> bool:
    return bool(getattr(session.process.provider, "remote", False))


class KernelStat:
    """A ``StatFn`` answering from stamps taken through the kernel (None for a missing file, as
    the local stat does); the paths it had no stamp for are kept in ``missed``."""

    def __init__(self, stamps: dict[str, FileStamp]) -> None:
        self.stamps = stamps
        self.missed: set[str] = set()

    def __call__(self, path: str) -> FileStamp | None:
        stamp = self.stamps.get(path)
        if stamp is None:
            self.missed.add(path)
            return None
        return stamp if stamp.exists else None


def remember(
    session: KernelSession, asked: Iterable[str], stamps: Iterable[FileStamp]
) -> dict[str, FileStamp]:
    """Keep fresh stamps (by the path asked for and by the kernel's own name for it)."""
    fresh: dict[str, FileStamp] = {}
    for path, stamp in zip(asked, stamps):
        fresh[path] = fresh[stamp.path] = stamp
    staleness_of(session).remote_stamps.update(fresh)
    return fresh


def cached(session: KernelSession) -> KernelStat:
    """The stamps last fetched, for the synchronous views."""
    return KernelStat(staleness_of(session).remote_stamps)


def _main_busy(session: KernelSession) -> bool:
    return session.scheduler.main_lock.locked() or bool(session.running())


async def fetch(
    session: KernelSession, paths: Iterable[str], *, may_wait: bool = True
) -> dict[str, FileStamp] | None:
    """Stat ``paths`` in the kernel, all in one silent request.

    While the main shell is busy the request goes to a free subshell; without one it queues on
    the main shell, or, unless ``may_wait``, is not sent at all (None).
    """
    asked = sorted(set(paths))
    if not asked:
        return {}
    proc = session.process
    subshell = None
    if _main_busy(session):
        subshell = await proc.acquire_subshell(session.config.max_subshells)
        if subshell is None and not may_wait:
            return None
    try:
        payload = await proc.eval_silent(probes.filetrack_stat_expr(asked), subshell_id=subshell)
    finally:
        if subshell is not None:
            proc.release_subshell(subshell)
    return remember(session, asked, probes.parse_filetrack_stamps(payload))


async def prefetched(
    session: KernelSession, use: Callable[[KernelStat], Any], rounds: int = 3
) -> KernelStat:
    """A stat holding fresh stamps of every path ``use`` (a pure plan) asks for.

    ``use`` runs against what has been fetched so far and the paths it missed are fetched; one
    round trip, or two when a stamp's own name leads to new questions.
    """
    fresh: dict[str, FileStamp] = {}
    for _ in range(rounds):
        stat = KernelStat(fresh)
        use(stat)
        if not stat.missed:
            break
        fresh.update(await fetch(session, stat.missed) or {})
    return KernelStat(fresh)


def cell_paths(session: KernelSession, source: str) -> list[str]:
    """What a cell run stamps besides its reads: its path literals and the watched files."""
    analysis = analyze_source(source)
    return sorted(
        set(analysis.paths)
        | set(analysis.written_paths)
        | set(staleness_of(session).tracker.watched)
    )


def cell_stat_expr(session: KernelSession, source: str) -> str:
    return probes.filetrack_stat_expr(cell_paths(session, source))


async def poll(
    session: KernelSession, needed: Callable[[], set[str]], changed: Callable[[list[str]], None]
) -> None:
    """Re-stat ``needed()`` every ``remote_watch_interval_s``; report paths whose stamp moved."""
    interval = session.config.remote_watch_interval_s
    if interval <= 0:
        return
    while not session.closed:
        await asyncio.sleep(interval)
        if not session.process.alive:
            continue
        try:
            paths = needed()
            before = {p: staleness_of(session).remote_stamps.get(p) for p in paths}
            fresh = await fetch(session, paths, may_wait=False)
        except (IpykeepError, StalenessError) as exc:
            log.info("remote stat poll for %s failed: %s", session.kernel_id, exc.message)
            continue
        if fresh:
            moved = sorted(
                {
                    fresh[p].path
                    for p, old in before.items()
                    if old is not None and p in fresh and fresh[p] != old
                }
            )
            if moved:
                changed(moved)
