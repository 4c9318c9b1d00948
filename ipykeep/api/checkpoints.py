"""Checkpoints: named checkpoints of a kernel's variables, rollback, and what is saved."""

from __future__ import annotations

from pydantic import Field

from ..checkpoints.records import CheckpointListing, NamedCheckpointResult, RollbackResult
from . import errors as e
from . import names
from .kernels import KERNEL_LOOKUP
from .spec import KernelParams, Method


class CheckpointParams(KernelParams):
    name: str | None = Field(None, description="checkpoint name (default: a timestamp)")


class RestoreParams(KernelParams):
    name: str = Field(description="a name given to checkpoint")


_CALLS = KERNEL_LOOKUP + (e.KERNEL_BUSY, e.KERNEL_DIED, e.TIMEOUT, e.CHECKPOINT_ERROR)

CHECKPOINT: Method[CheckpointParams, NamedCheckpointResult] = Method(
    names.CHECKPOINT, CheckpointParams, NamedCheckpointResult, _CALLS,
    "Save every user variable of the kernel under a name, to roll back to with restore.",
)
RESTORE: Method[RestoreParams, RollbackResult] = Method(
    names.RESTORE, RestoreParams, RollbackResult, _CALLS + (e.CHECKPOINT_TAMPERED, e.UNKNOWN_CHECKPOINT),
    "Roll the kernel's variables back to a named checkpoint; variables made since are deleted.",
)
CHECKPOINTS: Method[KernelParams, CheckpointListing] = Method(
    names.CHECKPOINTS, KernelParams, CheckpointListing, KERNEL_LOOKUP,
    "What is checkpointed for the kernel's notebook (per cell and named), and its size.",
)
