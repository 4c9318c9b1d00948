"""The registry of error codes: each code the daemon may send, and the class that raises it.

Errors cross the RPC boundary as their envelope (``{code, message, retryable, hint}``) and the
client rebuilds them with ``error_from_envelope``. The class is looked up here, by code, and
imported on demand: the rebuilt error no longer depends on which modules the client process
happened to import (a fresh CLI used to get ``probe_failed`` as a plain ``internal`` error).
Standard library only, because the thin CLI rebuilds errors too.

A new error class must be added here; ``tests/api/test_registry.py`` finds every
``IpykeepError`` subclass in the package and fails on one that is missing or mismatched.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ipykeep.api.errors import IpykeepError

INTERNAL: Final = "internal"
BAD_ARGUMENT: Final = "bad_argument"
CONFIG_INVALID: Final = "config_invalid"
DAEMON_UNREACHABLE: Final = "daemon_unreachable"
UNAUTHORIZED: Final = "unauthorized"
NOTEBOOK_INVALID: Final = "notebook_invalid"
NOTEBOOK_WRITE_FAILED: Final = "notebook_write_failed"
NOTEBOOK_CONFLICT: Final = "notebook_conflict"
STALE_VERSION: Final = "stale_version"
UNKNOWN_CELL: Final = "unknown_cell"
UNKNOWN_KERNEL: Final = "unknown_kernel"
UNKNOWN_NAME: Final = "unknown_name"
KERNEL_START_FAILED: Final = "kernel_start_failed"
KERNEL_DIED: Final = "kernel_died"
KERNEL_UNRESPONSIVE: Final = "kernel_unresponsive"
TIMEOUT: Final = "timeout"
EXECUTION_LOST: Final = "execution_lost"
KERNEL_BUSY: Final = "kernel_busy"
NOT_SUPPORTED: Final = "not_supported"
MISSING_EXTRA: Final = "missing_extra"
PLATFORM_NOT_SUPPORTED: Final = "platform_not_supported"
PROBE_FAILED: Final = "probe_failed"
SERVE_FAILED: Final = "serve_failed"
TUNNEL_FAILED: Final = "tunnel_failed"
REMOTE_AUTH_FAILED: Final = "remote_auth_failed"
REMOTE_UNREACHABLE: Final = "remote_unreachable"
CHECKPOINT_ERROR: Final = "checkpoint_error"
CHECKPOINT_TAMPERED: Final = "checkpoint_tampered"
UNKNOWN_CHECKPOINT: Final = "unknown_checkpoint"
INSTALL_FAILED: Final = "install_failed"
DEBUG_STATE: Final = "debug_state"

#: code -> "module:Class" of the error that carries it (imported only to rebuild one).
ERROR_CLASSES: Final[Mapping[str, str]] = {
    INTERNAL: "ipykeep.api.errors:IpykeepError",
    BAD_ARGUMENT: "ipykeep.api.errors:UsageError",
    CONFIG_INVALID: "ipykeep.api.errors:ConfigError",
    DAEMON_UNREACHABLE: "ipykeep.api.errors:DaemonUnreachableError",
    UNAUTHORIZED: "ipykeep.api.errors:AuthError",
    NOTEBOOK_INVALID: "ipykeep.api.errors:NotebookInvalidError",
    NOTEBOOK_WRITE_FAILED: "ipykeep.api.errors:NotebookWriteError",
    NOTEBOOK_CONFLICT: "ipykeep.api.errors:NotebookConflictError",
    STALE_VERSION: "ipykeep.api.errors:StaleCellVersionError",
    UNKNOWN_CELL: "ipykeep.api.errors:UnknownCellError",
    UNKNOWN_KERNEL: "ipykeep.api.errors:UnknownKernelError",
    UNKNOWN_NAME: "ipykeep.api.errors:UnknownNameError",
    KERNEL_START_FAILED: "ipykeep.api.errors:KernelStartError",
    KERNEL_DIED: "ipykeep.api.errors:KernelDiedError",
    KERNEL_UNRESPONSIVE: "ipykeep.api.errors:KernelUnresponsiveError",
    TIMEOUT: "ipykeep.api.errors:ExecutionTimeoutError",
    EXECUTION_LOST: "ipykeep.api.errors:ExecutionLostError",
    KERNEL_BUSY: "ipykeep.api.errors:KernelBusyError",
    NOT_SUPPORTED: "ipykeep.api.errors:RemoteNotSupportedError",
    MISSING_EXTRA: "ipykeep.api.errors:MissingExtraError",
    PLATFORM_NOT_SUPPORTED: "ipykeep.api.errors:PlatformNotSupportedError",
    PROBE_FAILED: "ipykeep.api.errors:ProbeFailedError",
    SERVE_FAILED: "ipykeep.serve.errors:ServeError",
    TUNNEL_FAILED: "ipykeep.serve.errors:TunnelError",
    REMOTE_AUTH_FAILED: "ipykeep.api.errors:RemoteAuthError",
    REMOTE_UNREACHABLE: "ipykeep.api.errors:RemoteUnreachableError",
    CHECKPOINT_ERROR: "ipykeep.checkpoints.store:CheckpointError",
    CHECKPOINT_TAMPERED: "ipykeep.checkpoints.store:TamperedCheckpointError",
    UNKNOWN_CHECKPOINT: "ipykeep.checkpoints.store:UnknownCheckpointError",
    INSTALL_FAILED: "ipykeep.api.errors:InstallError",
    DEBUG_STATE: "ipykeep.debugger.errors:DebugStateError",
}

#: Codes any call may get: its arguments are checked, the token too, and bugs happen.
ANY_CALL: Final = (BAD_ARGUMENT, UNAUTHORIZED, INTERNAL)


@cache
def error_class(code: str) -> type[IpykeepError]:
    """The class registered for ``code`` (an unknown code: ``IpykeepError``, code ``internal``)."""
    module, _, name = ERROR_CLASSES.get(code, ERROR_CLASSES[INTERNAL]).partition(":")
    cls: type[IpykeepError] = getattr(importlib.import_module(module), name)
    return cls


def error_from_envelope(envelope: Mapping[str, Any]) -> IpykeepError:
    """Rebuild an error received over RPC from its envelope, as the class that sent it."""
    code = str(envelope.get("code"))
    cls = error_class(code)
    err = cls(
        str(envelope.get("message", "unknown error")),
        hint=str(envelope.get("hint", "")),
        details=envelope.get("details") or None,
    )
    return err
