"""The baseline: a kernel driven directly with jupyter_client, no ipykeep in between.

This is what a client without ipykeep does: start a kernel with ``AsyncKernelManager`` and call
``execute_interactive``, collecting every output. The same two kinds of kernel ipykeep runs are
available (``plain`` = ipykernel, ``ipyflow`` = ipyflow's kernel), on the same ipc transport,
so a ratio against ipykeep isolates ipykeep's own cost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import zmq
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec

KernelKind = Literal["plain", "ipyflow"]

MODULES: dict[KernelKind, str] = {"plain": "ipykernel_launcher", "ipyflow": "ipyflow.kernel"}


@dataclass(frozen=True)
class RawResult:
    status: str
    #: Every text byte the kernel sent back (stream text, text/plain results, tracebacks).
    output_bytes: int


class RawKernel:
    """A started kernel and its async client."""

    def __init__(self, km: AsyncKernelManager, kc: Any, runtime_dir: Path) -> None:
        self.km = km
        self.kc = kc
        self.runtime_dir = runtime_dir

    @property
    def pid(self) -> int:
        return int(self.km.provisioner.pid)  # type: ignore[union-attr]

    async def execute(self, code: str, timeout: float = 600) -> RawResult:
        size = 0

        def hook(msg: dict[str, Any]) -> None:
            nonlocal size
            kind = msg["header"]["msg_type"]
            content = msg["content"]
            if kind == "stream":
                size += len(content["text"].encode())
            elif kind in ("execute_result", "display_data"):
                size += len(str(content["data"].get("text/plain", "")).encode())
            elif kind == "error":
                size += len("\n".join(content.get("traceback", [])).encode())

        reply = await self.kc.execute_interactive(
            code, output_hook=hook, timeout=timeout, stop_on_error=False
        )
        return RawResult(reply["content"]["status"], size)


@contextlib.asynccontextmanager
async def raw_kernel(
    kind: KernelKind, cwd: Path | None = None, options: tuple[str, ...] = ()
) -> AsyncIterator[RawKernel]:
    """Start a kernel of ``kind`` (with ``options`` after its connection file; none: the kernel
    as a client without ipykeep starts it); it is shut down (and killed if need be) on exit."""
    base = Path(tempfile.gettempdir()) / f"ipkb-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    runtime_dir = Path(tempfile.mkdtemp(prefix="r", dir=base))
    km = AsyncKernelManager(transport="ipc")
    # jupyter_client 8.10 has no ``kernel_cmd``: the spec is set directly.
    km._kernel_spec = KernelSpec(
        argv=[sys.executable, "-m", MODULES[kind], "-f", "{connection_file}", *options],
        display_name=f"raw {kind}",
        language="python",
        interrupt_mode="signal",
    )
    km.connection_file = str(runtime_dir / "kernel.json")
    km.ip = str(runtime_dir / "ipc")
    km.cache_ports = False
    env = dict(os.environ)
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    kc = None
    try:
        await km.start_kernel(cwd=str(cwd or runtime_dir), env=env)
        kc = km.client()
        # The daemon's receive limit (kernel/providers/session.py: unlimited_receive): with
        # zmq's default of 1000 messages a burst of output on a busy machine overflows the
        # queues and drops messages, the idle status among them, and execute_interactive then
        # waits out its whole timeout.
        kc.context.setsockopt(zmq.RCVHWM, 0)
        kc.start_channels()
        await kc.wait_for_ready(timeout=120)
        yield RawKernel(km, kc, runtime_dir)
    finally:
        if kc is not None:
            with contextlib.suppress(Exception):
                kc.stop_channels()
        with contextlib.suppress(Exception):
            await km.shutdown_kernel(now=True)
        shutil.rmtree(runtime_dir, ignore_errors=True)
