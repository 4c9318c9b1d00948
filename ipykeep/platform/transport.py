"""The ZeroMQ transport local kernels use: ipc on POSIX, tcp on loopback on Windows.

ipc (Unix domain sockets in a private 0700 runtime directory) is the fastest locally and opens
no TCP port. pyzmq's Windows builds have no ipc transport, so Windows kernels listen on
127.0.0.1 with jupyter_client's random ports; every message is still signed with the
connection file's key, and the connection file is owner-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from ipykeep.platform import system


class KernelTransport(NamedTuple):
    transport: Literal["ipc", "tcp"]
    #: The ``ip`` jupyter_client gets: an ipc path prefix, or the loopback address.
    ip: str


def kernel_transport(runtime_dir: Path) -> KernelTransport:
    """The transport and address for a kernel whose files live in ``runtime_dir``."""
    if system.IS_WINDOWS:
        return KernelTransport("tcp", "127.0.0.1")
    return KernelTransport("ipc", str(runtime_dir / "ipc"))
