"""Every daemon RPC method name, once (standard library only: the thin CLI imports this).

``api.methods`` declares a ``Method`` under each of these names (a test checks the two agree);
call sites use the constants, so ``grep`` finds every caller of a method.
"""

from __future__ import annotations

from typing import Final

# daemon and kernels
PING: Final = "ping"
VERSION: Final = "version"
STATUS: Final = "status"
LIST_KERNELS: Final = "list_kernels"
CREATE_KERNEL: Final = "create_kernel"
WAIT_WARM: Final = "wait_warm"
CLOSE_KERNEL: Final = "close_kernel"
RESTART: Final = "restart"
SHUTDOWN: Final = "shutdown"
# running code
EXECUTE: Final = "execute"
READ_EXECUTION: Final = "read_execution"
INTERRUPT: Final = "interrupt"
RUN_CELLS: Final = "run_cells"
LIST_CELLS: Final = "list_cells"
MARKDOWN: Final = "markdown"
READ_ARTIFACT: Final = "read_artifact"
# staleness
RUN_STALE: Final = "run_stale"
PLAN_PROGRESS: Final = "plan_progress"
WATCH_FILE: Final = "watch_file"
# editing
EDIT_CELL: Final = "edit_cell"
# inspection
INSPECT: Final = "inspect"
NAMESPACE: Final = "namespace"
# serving
SERVE: Final = "serve"
UNSERVE: Final = "unserve"
PUBLISH: Final = "publish"
CONSOLE: Final = "console"
# checkpoints
CHECKPOINT: Final = "checkpoint"
RESTORE: Final = "restore"
CHECKPOINTS: Final = "checkpoints"
FORK_KERNEL: Final = "fork_kernel"
DIFF_FORK: Final = "diff_fork"
# environments
ADD_PACKAGES: Final = "add_packages"
# debugger
DEBUG: Final = "debug"

ALL: Final = frozenset(
    {
        PING,
        VERSION,
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
        EDIT_CELL,
        INSPECT,
        NAMESPACE,
        SERVE,
        UNSERVE,
        PUBLISH,
        CONSOLE,
        CHECKPOINT,
        RESTORE,
        CHECKPOINTS,
        FORK_KERNEL,
        DIFF_FORK,
        ADD_PACKAGES,
        DEBUG,
    }
)
