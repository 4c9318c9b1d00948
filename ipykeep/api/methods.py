"""Every declared daemon method, by name: what the daemon serves and clients may call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ipykeep.api.checkpoints import CHECKPOINT, CHECKPOINTS, RESTORE
from ipykeep.api.execution import (
    EXECUTE,
    INTERRUPT,
    LIST_CELLS,
    MARKDOWN,
    READ_ARTIFACT,
    READ_EXECUTION,
    RUN_CELLS,
)
from ipykeep.api.inspection import INSPECT, NAMESPACE
from ipykeep.api.kernels import (
    CLOSE_KERNEL,
    CREATE_KERNEL,
    LIST_KERNELS,
    PING,
    RESTART,
    SHUTDOWN,
    STATUS,
    WAIT_WARM,
)
from ipykeep.api.serve import PUBLISH, SERVE, UNSERVE
from ipykeep.api.spec import Method
from ipykeep.api.staleness import PLAN_PROGRESS, RUN_STALE, WATCH_FILE

__all__ = [
    "ALL",
    "BY_NAME",
    "CLOSE_KERNEL",
    "CREATE_KERNEL",
    "EXECUTE",
    "INSPECT",
    "INTERRUPT",
    "LIST_CELLS",
    "LIST_KERNELS",
    "MARKDOWN",
    "NAMESPACE",
    "PING",
    "PLAN_PROGRESS",
    "PUBLISH",
    "READ_ARTIFACT",
    "READ_EXECUTION",
    "RESTART",
    "RUN_CELLS",
    "RUN_STALE",
    "SERVE",
    "SHUTDOWN",
    "STATUS",
    "UNSERVE",
    "WAIT_WARM",
    "WATCH_FILE",
    "CHECKPOINT",
    "RESTORE",
    "CHECKPOINTS",
]

ALL: Final[tuple[Method[Any, Any], ...]] = (
    PING,
    STATUS,
    LIST_KERNELS,
    CREATE_KERNEL,
    WAIT_WARM,
    CLOSE_KERNEL,
    RESTART,
    SHUTDOWN,
    EXECUTE,
    READ_EXECUTION,
    INTERRUPT,
    RUN_CELLS,
    LIST_CELLS,
    MARKDOWN,
    READ_ARTIFACT,
    RUN_STALE,
    PLAN_PROGRESS,
    WATCH_FILE,
    INSPECT,
    NAMESPACE,
    SERVE,
    UNSERVE,
    PUBLISH,
    CHECKPOINT,
    RESTORE,
    CHECKPOINTS,
)

BY_NAME: Final[Mapping[str, Method[Any, Any]]] = {m.name: m for m in ALL}
