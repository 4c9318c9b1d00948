"""The one error tree of ipykeep: the engine, the daemon, the CLI and the MCP server raise these.

Every error carries a stable ``code`` (used in the MCP error envelope and mapped to a CLI exit
code), a message that says what happened and where, a ``hint`` that says what to do next, and
whether retrying the same call may succeed. Errors cross the daemon's RPC boundary as their
envelope and are rebuilt on the client side with the same class (looked up by code in the
registry ``ipykeep.api.error_codes``), so a caller can catch ``UnknownCellError`` whether it
runs in-process or talks to a daemon. Packages raise these classes as they are (the staleness
and inspection packages name some of them in their own ``errors`` modules); none converts one
error into another. The tree (a test pins it)::

    IpykeepError                              internal
    ├── UsageError                            bad_argument
    ├── ConfigError                           config_invalid
    ├── DaemonUnreachableError                daemon_unreachable
    ├── AuthError                             unauthorized
    ├── NotebookInvalidError                  notebook_invalid
    ├── NotebookWriteError                    notebook_write_failed
    ├── NotebookConflictError                 notebook_conflict
    ├── StaleCellVersionError                 stale_version
    ├── UnknownCellError                      unknown_cell
    ├── UnknownKernelError                    unknown_kernel
    ├── UnknownNameError                      unknown_name
    ├── KernelStartError                      kernel_start_failed
    │   ├── RemoteAuthError                   remote_auth_failed
    │   └── RemoteUnreachableError            remote_unreachable
    ├── ProbeFailedError                      probe_failed
    ├── KernelDiedError                       kernel_died
    ├── KernelUnresponsiveError               kernel_unresponsive
    ├── ExecutionTimeoutError                 timeout
    ├── ExecutionLostError                    execution_lost
    ├── KernelBusyError                       kernel_busy
    ├── RemoteNotSupportedError               not_supported
    ├── MissingExtraError                     missing_extra
    ├── PlatformNotSupportedError             platform_not_supported
    ├── InstallError                          install_failed
    ├── CheckpointError (checkpoints.store)   checkpoint_error
    │   ├── TamperedCheckpointError           checkpoint_tampered
    │   └── UnknownCheckpointError            unknown_checkpoint
    ├── DebugStateError (debugger.errors)     debug_state
    ├── ServeError (serve.errors)             serve_failed
    └── TunnelError (serve.errors)            tunnel_failed
"""

from __future__ import annotations

from typing import Any, ClassVar


class IpykeepError(Exception):
    """Root of every error ipykeep raises on purpose."""

    code: ClassVar[str] = "internal"
    exit_code: ClassVar[int] = 1
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str = "", details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def envelope(self) -> dict[str, Any]:
        """The typed error envelope ``{code, message, retryable, hint}`` (plus details)."""
        env: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "hint": self.hint,
        }
        if self.details:
            env["details"] = self.details
        return env

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UsageError(IpykeepError):
    code = "bad_argument"
    exit_code = 2


class ConfigError(IpykeepError):
    code = "config_invalid"
    exit_code = 2


class DaemonUnreachableError(IpykeepError):
    code = "daemon_unreachable"
    exit_code = 3


class AuthError(IpykeepError):
    code = "unauthorized"
    exit_code = 3


class NotebookInvalidError(IpykeepError):
    code = "notebook_invalid"
    exit_code = 4


class NotebookWriteError(IpykeepError):
    """Outputs could not be written back (read-only file or directory, full disk…)."""

    code = "notebook_write_failed"
    exit_code = 4


class NotebookConflictError(IpykeepError):
    code = "notebook_conflict"
    exit_code = 4
    retryable = True


class StaleCellVersionError(IpykeepError):
    """A cell edit based on a version of the cell that is not its current one; the message
    carries the current source and ``details`` its ``cell_id`` and current ``version``."""

    code = "stale_version"
    exit_code = 4
    retryable = True


class UnknownCellError(IpykeepError):
    code = "unknown_cell"
    exit_code = 5


class UnknownKernelError(IpykeepError):
    code = "unknown_kernel"
    exit_code = 6


class UnknownNameError(IpykeepError):
    code = "unknown_name"
    exit_code = 5


class KernelStartError(IpykeepError):
    code = "kernel_start_failed"
    exit_code = 7


class RemoteAuthError(KernelStartError):
    """A remote kernel host (gateway, SSH) refused ipykeep's credentials."""

    code = "remote_auth_failed"


class RemoteUnreachableError(KernelStartError):
    """A remote kernel host (gateway, SSH) could not be reached."""

    code = "remote_unreachable"
    retryable = True


class ProbeFailedError(IpykeepError):
    """An in-kernel probe failed or answered something unreadable (staleness: ``ProbeError``)."""

    code = "probe_failed"
    exit_code = 1


class KernelDiedError(IpykeepError):
    code = "kernel_died"
    exit_code = 7
    retryable = True


class KernelUnresponsiveError(IpykeepError):
    """The kernel's process is there but does not answer (stopped, or its heartbeat is gone)."""

    code = "kernel_unresponsive"
    exit_code = 7
    retryable = True


class ExecutionTimeoutError(IpykeepError):
    code = "timeout"
    exit_code = 8
    retryable = True


class ExecutionLostError(IpykeepError):
    """The kernel never answered a request; the execution was given up, the kernel kept."""

    code = "execution_lost"
    exit_code = 7
    retryable = True


class KernelBusyError(IpykeepError):
    """The kernel's queue is full: try again once running work has finished."""

    code = "kernel_busy"
    exit_code = 9
    retryable = True


class RemoteNotSupportedError(IpykeepError):
    code = "not_supported"
    exit_code = 2


class MissingExtraError(IpykeepError):
    code = "missing_extra"
    exit_code = 2


class PlatformNotSupportedError(IpykeepError):
    """An operation this operating system cannot do the way ipykeep does it elsewhere (the
    hint names the way that works there)."""

    code = "platform_not_supported"
    exit_code = 2


class InstallError(IpykeepError):
    """Installing packages into a kernel's environment failed or was refused; nothing was
    recorded (the message says why, the installer's log is named in the hint)."""

    code = "install_failed"
    exit_code = 1
