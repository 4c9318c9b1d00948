"""What a kernel provider is: where a kernel runs, kept apart from how ipykeep drives it.

As in jupyter_client's provisioning split, a provider starts, signals and stops one kernel and
hands back a client with channels; ``KernelProcess`` routes messages and runs code the same way
whichever provider launched the kernel (a local process, a kernel behind a Jupyter gateway, a
kernel on a host reached over SSH).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ipykeep.kernel.providers.session import DIGEST_HISTORY

DataflowMode = Literal["ipyflow", "static"]
ProviderKind = Literal["local", "gateway", "ssh"]


def kernel_module(dataflow: DataflowMode) -> str:
    """The module a kernel runs: ipyflow's kernel wraps ipykernel's with its tracer."""
    return "ipyflow.kernel" if dataflow == "ipyflow" else "ipykernel_launcher"


def kernel_options(ipython_history: bool) -> list[str]:
    """The kernel's options after its connection file. IPython's history database only when
    asked for: it commits every execution (about a millisecond of each call, and a lock shared
    by every kernel of the user); without it a kernel's input is kept in memory for its life
    (``In``, ``%history``), and ipykeep's record is the durable history. The kernel remembers
    as many signatures against replayed messages as the daemon does (``DIGEST_HISTORY``): with
    jupyter_client's 65,536 its memory grew with every call for hours."""
    digests = f"--Session.digest_history_size={DIGEST_HISTORY}"
    return [digests] if ipython_history else [digests, "--HistoryManager.hist_file=:memory:"]


def kernel_argv(python: str, dataflow: DataflowMode, ipython_history: bool) -> list[str]:
    return [
        python,
        "-m",
        kernel_module(dataflow),
        "-f",
        "{connection_file}",
        *kernel_options(ipython_history),
    ]


@dataclass(frozen=True)
class LaunchSpec:
    """What every provider needs to know to start one kernel."""

    name: str  # ipykeep's kernel id, for messages and task names
    python: str
    dataflow: DataflowMode
    cwd: Path  # the local working directory (the notebook's)
    env: dict[str, str] = field(default_factory=dict)  # extra variables for the kernel
    ipython_history: bool = False  # IPython's history database too (``kernel_options``)


class KernelChannels(Protocol):
    """The part of jupyter_client's ``AsyncKernelClient`` that ``KernelProcess`` uses.

    ``get_*_msg`` raise ``queue.Empty`` on timeout, as jupyter_client's clients do.
    """

    @property
    def session(self) -> Any: ...  # jupyter_client Session: builds messages
    @property
    def shell_channel(self) -> Any: ...  # has .send(msg)
    @property
    def control_channel(self) -> Any: ...

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]: ...
    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]: ...
    async def get_control_msg(self, timeout: float | None = None) -> dict[str, Any]: ...
    def stop_channels(self) -> None: ...


class KernelProvider(Protocol):
    """Starts, signals and stops one kernel; ``start`` returns a ready client."""

    kind: ProviderKind
    #: The kernel sees another filesystem than ipykeep (gateway, ssh): files are stat'ed and
    #: watched through the kernel (``staleness/remote_stat.py``), never on this machine.
    remote: bool
    #: Where the kernel runs, for messages ("local", "gateway https://…", "ssh://user@host/path").
    location: str
    #: Why ``is_alive`` turned False when the kernel itself may be fine (a lost connection).
    lost_reason: str | None
    #: A directory the kernel must ``chdir`` to after start (None: it started in the right one).
    kernel_cwd: str | None

    @property
    def pid(self) -> int | None: ...  # local process id (None when the kernel is remote)
    @property
    def connection_file(self) -> str | None: ...  # local connection file (for --serve)
    @property
    def preinstalled(self) -> frozenset[str]: ...  # in-kernel helpers held at start (a spare)

    async def start(self, timeout: float) -> KernelChannels: ...
    async def is_alive(self) -> bool: ...
    async def interrupt(self) -> None: ...
    async def shutdown(self, *, now: bool = False) -> None: ...
    async def kill(self) -> None: ...
