"""Checkpoints: named checkpoints of a kernel's variables, rollback, and what is saved.

The result models live here (not in ``ipykeep.checkpoints``) so that the daemon's method
table, in core, can declare them without importing the checkpoints package (core never does).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import Record
from ipykeep.api.spec import KernelParams, Method


def than_rerunning(saved_s: float, digits: int = 2) -> str:
    """A restore's time against re-running its cells, in words: "1.50 s quicker than
    re-running" or, when loading took longer, "1.50 s slower than re-running"."""
    if saved_s < 0:
        return f"{-saved_s:.{digits}f} s slower than re-running"
    return f"{saved_s:.{digits}f} s quicker than re-running"


class CellCheckpointInfo(Record):
    cell_id: str
    index: int
    #: False: a value did not pickle, was over a limit or excluded; the cell re-runs after a restart
    restorable: bool
    bytes: int = 0
    values: list[str] = Field(default_factory=list)
    #: name -> bytes of its pickled value
    sizes: dict[str, int] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)
    #: seconds the kernel was held to pickle the values (writing happens on a thread)
    snapshot_s: float | None = None
    #: not checkpointed on purpose: re-running it (and the cheap cells it reads from) takes less
    #: than ``checkpoint_min_cell_s``, so restore re-runs it instead of loading values
    cheap: bool = False
    #: seconds re-running it would take, with the cheap cells it reads from
    recompute_s: float | None = None


class RestoreReport(Record):
    """What a restore into a new kernel did."""

    kernel_id: str
    restored: list[dict[str, Any]] = Field(default_factory=list)
    #: cheap cells (not checkpointed on purpose) re-run before the values were loaded
    recomputed: list[dict[str, Any]] = Field(default_factory=list)
    #: the cells that must re-run, with the plan's reasons
    rerun: list[dict[str, Any]] = Field(default_factory=list)
    blocked: list[dict[str, Any]] = Field(default_factory=list)
    not_restorable: dict[str, str] = Field(default_factory=dict)
    restore_s: float = 0.0
    #: the restored cells' last run time minus the restore time
    saved_s: float = 0.0
    errors: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        ran = sum(float(c.get("run_s", 0)) for c in self.restored)
        head = (
            f"restored {len(self.restored)} cell(s) from checkpoints in {self.restore_s:.2f} s "
            f"(their runs took {ran:.2f} s: {than_rerunning(self.saved_s)})"
        )
        if self.restored:
            head += ": " + ", ".join(str(c["index"]) for c in self.restored)
        if self.recomputed:
            # the words of ``client/checkpoint_words.py``: RERUN
            head += (
                f"; {len(self.recomputed)} re-run on restore (quicker than loading): "
                + ", ".join(str(c["index"]) for c in self.recomputed)
            )
        rerun = f"; {len(self.rerun)} cell(s) must re-run"
        if self.rerun:
            rerun += ": " + ", ".join(
                f"{e['index']} ({', '.join(sorted({r['kind'] for r in e['reasons']}))}"
                + (
                    f"; not restored: {self.not_restorable[e['cell_id']]}"
                    if e.get("cell_id") in self.not_restorable
                    else ""
                )
                + ")"
                for e in self.rerun
            )
        tail = "".join(f"; {e}" for e in self.errors[:3])
        return head + rerun + tail


class NamedCheckpointResult(Record):
    kernel_id: str
    name: str
    values: list[str] = Field(default_factory=list)
    bytes: int = 0
    #: names that could not be saved (rollback leaves them as they are)
    failed: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0


class RollbackResult(Record):
    kernel_id: str
    name: str
    restored: list[str] = Field(default_factory=list)
    #: names made after the checkpoint, removed
    deleted: list[str] = Field(default_factory=list)
    not_rolled_back: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0
    #: after a kernel restart: why the notebook's cells are still planned as lost in it
    still_lost: str | None = None


class CheckpointListing(Record):
    kernel_id: str
    enabled: bool
    reason: str | None = None
    cells: list[CellCheckpointInfo] = Field(default_factory=list)
    named: list[dict[str, Any]] = Field(default_factory=list)
    #: bytes of every blob in the project's store
    store_bytes: int = 0
    last_restore: RestoreReport | None = None
    #: per code cell of the notebook: the stored runs of its current source (``runs``: key,
    #: ``ran_at``, ``kernel_id``, ``run_s``, ``bytes``, ``loadable``, ``matches_now``) and,
    #: when its last run here was not memoized, why (``not_memoized``)
    memo: list[dict[str, Any]] = Field(default_factory=list)


class CheckpointParams(KernelParams):
    name: str | None = Field(None, description="default: a timestamp")


class RestoreParams(KernelParams):
    name: str = Field(description="a name given to checkpoint")


_CALLS = KERNEL_LOOKUP + (e.KERNEL_BUSY, e.KERNEL_DIED, e.TIMEOUT, e.CHECKPOINT_ERROR)

CHECKPOINT: Method[CheckpointParams, NamedCheckpointResult] = Method(
    names.CHECKPOINT,
    CheckpointParams,
    NamedCheckpointResult,
    _CALLS,
    "Save all variables under a name to roll back to with restore, e.g. before a risky cell.",
)
RESTORE: Method[RestoreParams, RollbackResult] = Method(
    names.RESTORE,
    RestoreParams,
    RollbackResult,
    _CALLS + (e.CHECKPOINT_TAMPERED, e.UNKNOWN_CHECKPOINT),
    "Roll the variables back to a checkpoint; newer variables are deleted.",
)
CHECKPOINTS: Method[KernelParams, CheckpointListing] = Method(
    names.CHECKPOINTS,
    KernelParams,
    CheckpointListing,
    KERNEL_LOOKUP,
    "What is checkpointed for the kernel's notebook (per cell and named), and its size.",
)


class ForkParams(KernelParams):
    name: str | None = Field(
        None, description="the fork's notebook (default: <notebook>.fork-N.ipynb beside it)"
    )


class ForkResult(Record):
    """A new kernel holding the parent's variables, bound to a copy of its notebook."""

    kernel_id: str
    parent_kernel_id: str
    notebook: str
    #: the variables the fork holds, as the parent held them
    values: list[str] = Field(default_factory=list)
    #: variables the parent holds that the fork does not, and why (they did not pickle…)
    not_copied: dict[str, str] = Field(default_factory=dict)
    seconds: float = 0.0
    #: how the state was copied: ``process`` (the parent's process forked, copy-on-write: every
    #: variable, as it is in the parent) or ``checkpoint`` (saved, then loaded into a new kernel)
    how: str = "checkpoint"
    #: why the checkpoint way was used where forking the process was wanted (None otherwise)
    fallback_reason: str | None = None


class ForkDiff(Record):
    """How a fork differs from its parent."""

    kernel_id: str
    parent_kernel_id: str
    #: ``cell_id``, ``index``, ``change``: ``edited``, ``only_in_fork``, ``only_in_parent``
    cells: list[dict[str, Any]] = Field(default_factory=list)
    #: ``name``, ``change``: ``different``, ``may_differ`` (written since the fork by a run
    #: whose value has no version), ``only_in_fork``, ``only_in_parent``
    names: list[dict[str, Any]] = Field(default_factory=list)


FORK_KERNEL: Method[ForkParams, ForkResult] = Method(
    names.FORK_KERNEL,
    ForkParams,
    ForkResult,
    _CALLS + (e.KERNEL_START_FAILED, e.NOTEBOOK_INVALID, e.CHECKPOINT_TAMPERED),
    "New kernel with this kernel's variables, bound to a copy of its notebook.",
)
DIFF_FORK: Method[KernelParams, ForkDiff] = Method(
    names.DIFF_FORK,
    KernelParams,
    ForkDiff,
    KERNEL_LOOKUP,
    "Which cells and variables of a fork differ from its parent's.",
)
