"""Daemon and kernel lifecycle: ping, status, create, warm-up, close, restart, shutdown."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.records import DaemonInfo, KernelRecord, Record, StatusRecord
from ipykeep.api.spec import KernelParams, Method, Params, PathArg

#: The wire protocol every daemon request and answer follows.
PROTOCOL: Final = "JSON-RPC 2.0"

#: Errors of a call that names a kernel (by id or notebook) that may not exist.
KERNEL_LOOKUP = (e.UNKNOWN_KERNEL,)


class NoParams(Params):
    pass


#: Whose view of the kernel's pending notices a record is (None: every pending notice): a
#: reader is shown each notice once, until an execution takes the kernel's notices.
_NOTICE_READER = Field(
    default=None, description="show each pending notice once to this reader (e.g. cli)"
)


class StatusParams(KernelParams):
    reader: str | None = _NOTICE_READER


class CreateKernelParams(Params):
    notebook: PathArg | None = Field(
        default=None, description=".ipynb to bind (none: a scratch kernel)"
    )
    cwd: PathArg | None = Field(
        default=None,
        description="scratch kernel's working dir, or ssh://[user@]host/path",
    )
    #: Run the kernel behind this Jupyter Server / Kernel Gateway URL (token from the environment).
    gateway: str | None = Field(
        default=None,
        description="Jupyter server/gateway URL",
    )
    python: PathArg | None = Field(default=None, description="interpreter (default: configured)")
    warm: bool = Field(default=True, description="run the notebook's cells now (default true)")
    write_outputs: bool | None = None
    dataflow: Literal["ipyflow", "static"] | None = None
    #: Wait for the warm-up to finish (False: return at once; poll ``wait_warm``).
    wait: bool = True


class WaitWarmParams(KernelParams):
    timeout: float = Field(default=0.5, ge=0, le=600)
    reader: str | None = _NOTICE_READER


class VersionInfo(Record):
    version: str
    protocol: str
    #: The Python the daemon runs on (kernels may run another).
    python: str


class ShutdownResult(Record):
    stopping: bool
    pid: int


PING: Method[NoParams, DaemonInfo] = Method(
    names.PING, NoParams, DaemonInfo, (), "The daemon's pid, version and project."
)
VERSION: Method[NoParams, VersionInfo] = Method(
    names.VERSION,
    NoParams,
    VersionInfo,
    (),
    "The daemon's version, wire protocol and Python.",
)
STATUS: Method[StatusParams, StatusRecord] = Method(
    names.STATUS,
    StatusParams,
    StatusRecord,
    KERNEL_LOOKUP + (e.NOTEBOOK_INVALID,),
    "Kernels with per-cell state.",
)
LIST_KERNELS: Method[NoParams, list[KernelRecord]] = Method(
    names.LIST_KERNELS,
    NoParams,
    list[KernelRecord],
    (),
    "Running kernels with their notebook, state and stale cells.",
)
CREATE_KERNEL: Method[CreateKernelParams, KernelRecord] = Method(
    names.CREATE_KERNEL,
    CreateKernelParams,
    KernelRecord,
    (
        e.NOTEBOOK_INVALID,
        e.KERNEL_START_FAILED,
        e.NOT_SUPPORTED,
        e.CONFIG_INVALID,
        e.PROBE_FAILED,
        e.REMOTE_AUTH_FAILED,
        e.REMOTE_UNREACHABLE,
    ),
    "Start a kernel, bound to a notebook if given (or return the bound one).",
)
WAIT_WARM: Method[WaitWarmParams, KernelRecord] = Method(
    names.WAIT_WARM,
    WaitWarmParams,
    KernelRecord,
    KERNEL_LOOKUP,
    "Wait up to timeout s for warm-up; the record has its progress.",
)
CLOSE_KERNEL: Method[KernelParams, KernelRecord] = Method(
    names.CLOSE_KERNEL,
    KernelParams,
    KernelRecord,
    KERNEL_LOOKUP,
    "Shut a kernel down; its variables are lost.",
)
RESTART: Method[KernelParams, KernelRecord] = Method(
    names.RESTART,
    KernelParams,
    KernelRecord,
    KERNEL_LOOKUP + (e.KERNEL_START_FAILED,),
    "Restart a kernel; variables are lost (run_stale lists what to re-run).",
)
SHUTDOWN: Method[NoParams, ShutdownResult] = Method(
    names.SHUTDOWN,
    NoParams,
    ShutdownResult,
    (),
    "Close every kernel and exit the daemon (after replying).",
)
