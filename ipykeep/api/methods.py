"""Every declared daemon method, by name: what the daemon serves and clients may call.

``ALL`` is gathered from the declaring modules, so a new method is declared in one of them and
nowhere else here; the older ones are re-exported by name for their callers (``api.EXECUTE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Final

from ipykeep.api import (
    checkpoints,
    debugger,
    editing,
    environments,
    execution,
    inspection,
    kernels,
    serve,
    staleness,
)
from ipykeep.api.checkpoints import CHECKPOINT, CHECKPOINTS, RESTORE
from ipykeep.api.debugger import DEBUG
from ipykeep.api.editing import EDIT_CELL
from ipykeep.api.environments import ADD_PACKAGES
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
from ipykeep.api.serve import CONSOLE, PUBLISH, SERVE, UNSERVE
from ipykeep.api.spec import Method
from ipykeep.api.staleness import PLAN_PROGRESS, RUN_STALE, WATCH_FILE

__all__ = [
    "ADD_PACKAGES",
    "ALL",
    "BY_NAME",
    "CLOSE_KERNEL",
    "CONSOLE",
    "CREATE_KERNEL",
    "DEBUG",
    "EDIT_CELL",
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

#: The modules that declare methods: every ``Method`` in them is served and callable.
DECLARING: Final[tuple[ModuleType, ...]] = (
    kernels,
    execution,
    staleness,
    editing,
    inspection,
    serve,
    checkpoints,
    environments,
    debugger,
)

ALL: Final[tuple[Method[Any, Any], ...]] = tuple(
    value for module in DECLARING for value in vars(module).values() if isinstance(value, Method)
)

BY_NAME: Final[Mapping[str, Method[Any, Any]]] = {m.name: m for m in ALL}
