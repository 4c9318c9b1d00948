"""What the staleness feature keeps about one kernel: its tracker, its watchers, and what
running the notebook costs there."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipykeep.api.records import WarmProgress
from ipykeep.staleness.tracker import StalenessTracker

if TYPE_CHECKING:
    from ipykeep.engine.session import KernelSession


@dataclass
class StalenessState:
    """The tracker and the directory watcher of one kernel."""

    tracker: StalenessTracker = field(default_factory=StalenessTracker)
    watch_task: asyncio.Task[Any] | None = None
    #: a remote kernel's stat poll (``staleness/remote_stat.py``), in place of watched directories
    poll_task: asyncio.Task[Any] | None = None
    #: set to restart the watcher with a directory it does not watch yet
    watch_restart: asyncio.Event | None = None
    #: directories of the files cells read (watched besides the notebook's directory)
    read_dirs: set[str] = field(default_factory=set)
    #: a remote kernel's file stamps as last stat'ed through it, by the path asked for
    remote_stamps: dict[str, Any] = field(default_factory=dict)
    #: warm-up runs untraced under ipyflow (``warm_tracing = false``)
    untraced: bool = False


@dataclass(frozen=True)
class RunningPlan:
    """The batch ``run_stale`` is executing (``plan_progress`` reads it)."""

    progress: WarmProgress
    cell_ids: tuple[str, ...]
    #: the durations the remaining-time estimate uses
    durations: dict[str, float]
    started: float


@dataclass
class PlanMeasurements:
    """What running the notebook costs in this kernel (see ``staleness/plan_runs.py``)."""

    #: seconds the last kernel start took, probes included
    restart_s: float | None = None
    #: each cell's duration in the last top-to-bottom run from a new kernel
    fresh_durations: dict[str, float] = field(default_factory=dict)
    #: a ``run_stale(fresh=True)`` batch is running
    fresh_run: bool = False
    progress: RunningPlan | None = None
    #: the daemon's seconds per cell besides the cell's own run, over the last executed plan
    #: and over the last fresh run (warm-up or ``--fresh``)
    plan_overhead_s: float | None = None
    fresh_overhead_s: float | None = None
    #: the batch being measured: when it started (monotonic) and its cells' durations so far
    measuring: tuple[float, list[float]] | None = None


def staleness_of(session: KernelSession) -> StalenessState:
    return session.features.of(StalenessState)


def measurements_of(session: KernelSession) -> PlanMeasurements:
    return session.features.of(PlanMeasurements)
