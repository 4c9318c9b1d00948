"""Local kernels: today's launch, through jupyter_client's public kernel-spec seam.

The kernel spec is handed to ``AsyncKernelManager`` by a kernel-spec manager that knows exactly
one spec (ipykeep's), so jupyter_client's local provisioner launches it; nothing private of
jupyter_client is touched. The transport is the platform's (``ipykeep/platform/transport.py``:
ipc in a private runtime directory on POSIX, fastest locally and no TCP port opened; tcp on
loopback on Windows).

jupyter_client's launcher makes the kernel its own session leader on POSIX
(``start_new_session``), so SIGINT goes to its whole process group, and on Windows gives it the
interrupt event it signals; ``JPY_PARENT_PID`` makes ipykernel's parent poller exit the kernel
within a second when the daemon dies, however it dies. The kernel's children die with it
through ``ipykeep/platform/processes.py: ProcessTree`` (its process group, or a Job Object).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from ipykeep.api.errors import KernelStartError
from ipykeep.kernel.providers.base import KernelChannels, LaunchSpec, ProviderKind, kernel_argv
from ipykeep.kernel.providers.session import KernelClient, UndatedSession
from ipykeep.platform.files import make_private, open_private, user_temp_dir
from ipykeep.platform.processes import ProcessTree, pid_alive, process_start
from ipykeep.platform.transport import kernel_transport

SPEC_NAME = "ipykeep"


#: the file in each kernel runtime directory naming the daemon that made it
OWNER_FILE = "owner.json"


def _runtime_base() -> Path:
    return user_temp_dir("ipykeep")


def short_runtime_dir() -> Path:
    """A private directory with a short path: ipc sockets are limited to ~107 characters.

    It names its owner (this process's pid and start time), so a daemon starting after one
    that was SIGKILLed can tell the dead one's directories from those of live daemons.
    """
    path = Path(tempfile.mkdtemp(prefix="k", dir=_runtime_base()))
    owner = {"pid": os.getpid(), "started": process_start(os.getpid())}
    fd = open_private(path / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "w") as fh:
        json.dump(owner, fh)
    return path


def collect_stale_runtime_dirs() -> list[Path]:
    """Remove the runtime directories whose owning daemon is gone; returns those removed.

    A directory is removed only when its owner file names a process that no longer exists (or
    whose pid now belongs to a process started at another time): one without a readable owner
    file may be one a live daemon is making this instant, and is left alone.
    """
    removed: list[Path] = []
    base = _runtime_base()
    with contextlib.suppress(OSError):
        for path in base.glob("k*"):
            try:
                owner = json.loads((path / OWNER_FILE).read_text())
                pid, started = int(owner["pid"]), owner.get("started")
            except (OSError, ValueError, TypeError, KeyError):
                continue
            if _owner_alive(pid, started):
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _owner_alive(pid: int, started: object) -> bool:
    if not pid_alive(pid):
        return False
    now = process_start(pid)
    # where start times are unknown a live pid is taken as the owner: a stale directory is
    # then kept, never a live one removed
    return started is None or now is None or now == started


class SingleSpecManager(KernelSpecManager):
    """A kernel-spec manager that knows one spec: the one ipykeep built for this kernel."""

    def __init__(self, spec: KernelSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def find_kernel_specs(self) -> dict[str, str]:
        return {SPEC_NAME: ""}

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return self.spec


def ipykeep_spec(python: str, dataflow: Any, ipython_history: bool) -> KernelSpec:
    return KernelSpec(
        argv=kernel_argv(python, dataflow, ipython_history),
        display_name=f"ipykeep ({dataflow})",
        language="python",
        interrupt_mode="signal",
        metadata={"debugger": False},
    )


def kernel_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JPY_PARENT_PID", None)
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    env.update(extra)
    return env


def start_hint(python: str, dataflow: str) -> str:
    return (
        f"check that {python} has ipykernel"
        + (" and ipyflow-core" if dataflow == "ipyflow" else "")
        + " installed (`ipykeep doctor`)"
        + (' or set dataflow = "static"' if dataflow == "ipyflow" else "")
    )


class LocalProvider:
    """A kernel process on this machine, started by jupyter_client's local provisioner."""

    kind: ProviderKind = "local"
    remote: bool = False
    location = "local"
    kernel_cwd: str | None = None
    #: set by the pool once it prepared this kernel as a spare (``prestart``)
    preinstalled: frozenset[str] = frozenset()

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.km: AsyncKernelManager | None = None
        self.kc: Any = None
        self.runtime_dir: Path | None = None
        self.lost_reason: str | None = None
        self.tree: ProcessTree | None = None

    @property
    def pid(self) -> int | None:
        prov = getattr(self.km, "provisioner", None)
        return getattr(prov, "pid", None)

    @property
    def connection_file(self) -> str | None:
        return self.km.connection_file if self.km else None

    async def start(self, timeout: float) -> KernelChannels:
        spec = self.spec
        self.preinstalled = frozenset()  # a new process holds none of them
        self.runtime_dir = short_runtime_dir()
        transport = kernel_transport(self.runtime_dir)
        km = AsyncKernelManager(
            transport=transport.transport,
            kernel_name=SPEC_NAME,
            kernel_spec_manager=SingleSpecManager(
                ipykeep_spec(spec.python, spec.dataflow, spec.ipython_history)
            ),
            connection_file=str(self.runtime_dir / "kernel.json"),
            ip=transport.ip,
            cache_ports=False,
            client_factory=KernelClient,
        )
        # Before the launch: the connection file carries this session's key.
        km.session = UndatedSession(parent=km)
        self.km = km
        try:
            await km.start_kernel(cwd=str(spec.cwd), env=kernel_env(spec.env))
        except Exception as exc:
            raise KernelStartError(
                f"could not start a kernel with {spec.python}: {exc}",
                hint=start_hint(spec.python, spec.dataflow),
            ) from exc
        if self.pid:
            self.tree = ProcessTree.adopt(self.pid)
        with contextlib.suppress(OSError):
            make_private(km.connection_file)
        kc = km.client()
        kc.start_channels()
        self.kc = kc
        try:
            await kc.wait_for_ready(timeout=timeout)
        except Exception as exc:
            await self.kill()
            raise KernelStartError(
                f"the kernel started with {spec.python} did not become ready: {exc}",
                hint=start_hint(spec.python, spec.dataflow),
            ) from exc
        return kc

    async def is_alive(self) -> bool:
        if self.km is None:
            return False
        alive = bool(await self.km.is_alive())
        if not alive and self.tree is not None:
            self.tree.kill_once_gone()
        return alive

    async def interrupt(self) -> None:
        if self.km is not None:
            await self.km.interrupt_kernel()

    def _stop_channels(self) -> None:
        if self.kc is not None:
            with contextlib.suppress(Exception):
                self.kc.stop_channels()
            self.kc = None

    def _killpg(self) -> None:
        if self.tree is not None:
            self.tree.kill()

    async def kill(self) -> None:
        self._stop_channels()
        if self.km is not None:
            with contextlib.suppress(Exception):
                await self.km.shutdown_kernel(now=True)
            self._killpg()
        self._cleanup()

    async def shutdown(self, *, now: bool = False) -> None:
        self._stop_channels()
        if self.km is not None:
            try:
                await asyncio.wait_for(self.km.shutdown_kernel(now=now), 10)
            except Exception:
                with contextlib.suppress(Exception):
                    await self.km.shutdown_kernel(now=True)
            self._killpg()
        self._cleanup()

    def _cleanup(self) -> None:
        if self.runtime_dir:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
