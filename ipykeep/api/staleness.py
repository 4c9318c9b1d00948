"""Staleness: the re-run plan, its progress while it runs, files registered as inputs."""

from __future__ import annotations

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.execution import RUNS
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import Record, RunStaleResult
from ipykeep.api.spec import KernelParams, Method, PathArg


class RunStaleParams(KernelParams):
    execute: bool = Field(default=False, description="run the plan (default false: only show it)")
    #: With ``execute``: restart the kernel and run every code cell instead.
    fresh: bool = Field(
        default=False,
        description="with execute: restart and run all cells (default false)",
    )
    #: With ``execute``: reply once the outputs are in the notebook file (False: written within
    #: ``write_delay_ms`` after the reply; the MCP tools pass False).
    wait_for_write: bool = True


class WatchFileParams(KernelParams):
    path: PathArg = Field(description="relative to the kernel's cwd")


class PlanProgress(Record):
    """How far the plan being executed has got (``finished`` when none runs)."""

    kernel_id: str
    done: int
    total: int
    current: str | None = None
    failed: list[str] = Field(default_factory=list)
    finished: bool = False
    elapsed_s: float | None = None
    remaining_s: float | None = None


class WatchResult(Record):
    kernel_id: str
    path: str
    exists: bool
    watched: list[str]


RUN_STALE: Method[RunStaleParams, RunStaleResult] = Method(
    names.RUN_STALE,
    RunStaleParams,
    RunStaleResult,
    RUNS + (e.NOTEBOOK_INVALID, e.NOTEBOOK_WRITE_FAILED, e.PROBE_FAILED),
    "Cells to re-run after edits, in order, with reasons; execute=true runs them.",
)
PLAN_PROGRESS: Method[KernelParams, PlanProgress] = Method(
    names.PLAN_PROGRESS,
    KernelParams,
    PlanProgress,
    KERNEL_LOOKUP,
    "Progress of the plan run_stale is executing.",
)
WATCH_FILE: Method[WatchFileParams, WatchResult] = Method(
    names.WATCH_FILE,
    WatchFileParams,
    WatchResult,
    KERNEL_LOOKUP,
    "Cells reading this file go stale when it changes.",
)
