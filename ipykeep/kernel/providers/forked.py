"""Kernels made by forking a local kernel's process (``os.fork``, copy-on-write): a kernel
process ipykeep did not launch, driven like a local one.

The provider writes a new connection file (ports on the platform's transport and a new key,
owner-only, in its own private runtime directory, as ``local.py`` does) and asks the parent
kernel to fork into a kernel on it (``fork``, a callback that returns the child's pid;
``checkpoints/_inkernel/forkkernel.py`` is the kernel's side). The child leads its own process
group, so an interrupt or a kill of the parent's group never reaches it, and it ends its group
when the daemon is gone. Its channels come from the connection file exactly as a local
kernel's. A child that fails to build its kernel writes the reason beside the connection file
(``kernel.json.error``) and exits; ``start`` then raises ``KernelStartError`` with it.

The parent kernel reaps the child when it ends (or init, once the parent is gone). Restarting
a forked kernel starts a new local kernel, as restarting any kernel does: the fork's state is
not re-forked from the parent as the parent is now.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_client.connect import write_connection_file

from ipykeep.api.errors import IpykeepError, KernelStartError
from ipykeep.kernel.providers.base import KernelChannels, KernelProvider, LaunchSpec, ProviderKind
from ipykeep.kernel.providers.local import LocalProvider, short_runtime_dir
from ipykeep.kernel.providers.session import KernelClient, UndatedSession
from ipykeep.platform.files import make_private
from ipykeep.platform.processes import (
    ProcessTree,
    interrupt_process_group,
    pid_alive,
)
from ipykeep.platform.transport import kernel_transport

#: Seconds a graceful shutdown waits for the process to end before it is killed.
SHUTDOWN_WAIT = 5.0
#: Seconds between two looks at whether a starting child is still there.
START_POLL = 0.1


class ForkedProvider:
    """A kernel process forked from another local kernel (see the module docstring)."""

    kind: ProviderKind = "local"
    remote: bool = False
    location = "local"
    kernel_cwd: str | None = None

    def __init__(
        self,
        spec: LaunchSpec,
        fork: Callable[[str], Awaitable[int]],
        preinstalled: frozenset[str],
    ) -> None:
        self.spec = spec
        self._fork = fork
        self._preinstalled = preinstalled
        self._pid: int | None = None
        self.kc: Any = None
        self.runtime_dir: Path | None = None
        self.tree: ProcessTree | None = None
        self._forked = False
        #: after the first start, the kernel a restart started (a new local process)
        self._fresh: KernelProvider | None = None
        #: a local process has no link to lose (a restarted one's provider has its own)
        self.lost_reason: str | None = None

    @property
    def pid(self) -> int | None:
        return self._fresh.pid if self._fresh is not None else self._pid

    @property
    def connection_file(self) -> str | None:
        if self._fresh is not None:
            return self._fresh.connection_file
        return str(self.runtime_dir / "kernel.json") if self.runtime_dir else None

    @property
    def preinstalled(self) -> frozenset[str]:
        """The parent's helpers: the child holds them as the parent did."""
        return self._fresh.preinstalled if self._fresh is not None else self._preinstalled

    async def start(self, timeout: float) -> KernelChannels:
        if self._forked:  # a restart: a new kernel, as for any kernel
            await self._release()
            self._fresh = LocalProvider(self.spec)
            return await self._fresh.start(timeout)
        self._forked = True
        self.runtime_dir = short_runtime_dir()
        path = self.runtime_dir / "kernel.json"
        transport = kernel_transport(self.runtime_dir)
        write_connection_file(
            str(path),
            ip=transport.ip,
            transport=transport.transport,
            key=secrets.token_hex(32).encode("ascii"),
            signature_scheme="hmac-sha256",
        )
        make_private(path)
        try:
            self._pid = await self._fork(str(path))
        except IpykeepError as exc:
            self._cleanup()
            raise KernelStartError(
                f"the kernel could not be forked: {exc.message}", hint=exc.hint
            ) from exc
        self.tree = ProcessTree.adopt(self._pid)
        kc = KernelClient(session=UndatedSession())
        kc.load_connection_file(str(path))
        kc.start_channels(hb=False)
        self.kc = kc
        ready = asyncio.ensure_future(kc.wait_for_ready(timeout=timeout))
        try:
            while not ready.done():
                await asyncio.wait({ready}, timeout=START_POLL)
                if not ready.done() and not pid_alive(self._pid):
                    ready.cancel()
                    raise KernelStartError(
                        f"the forked kernel ended before it was ready: {self._child_error(path)}",
                        hint='fork it from a checkpoint instead (fork_method = "checkpoint")',
                    )
            ready.result()
        except KernelStartError:
            await self.kill()
            raise
        except Exception as exc:
            await self.kill()
            raise KernelStartError(
                f"the forked kernel did not become ready: {exc}",
                hint='fork it from a checkpoint instead (fork_method = "checkpoint")',
            ) from exc
        finally:
            if not ready.done():
                ready.cancel()
        return kc

    @staticmethod
    def _child_error(path: Path) -> str:
        """The last line of the child's reason (``forkkernel.py`` writes it), or what is known."""
        with contextlib.suppress(OSError):
            lines = (path.parent / (path.name + ".error")).read_text().strip().splitlines()
            if lines:
                return lines[-1]
        return "it left no reason"

    async def is_alive(self) -> bool:
        if self._fresh is not None:
            return await self._fresh.is_alive()
        if self._pid is None:
            return False
        alive = pid_alive(self._pid)
        if not alive and self.tree is not None:
            self.tree.kill_once_gone()
        return alive

    async def interrupt(self) -> None:
        if self._fresh is not None:
            await self._fresh.interrupt()
        elif self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                interrupt_process_group(self._pid)

    async def kill(self) -> None:
        if self._fresh is not None:
            await self._fresh.kill()
            return
        self._stop_channels()
        self._killpg()
        self._cleanup()

    async def shutdown(self, *, now: bool = False) -> None:
        if self._fresh is not None:
            await self._fresh.shutdown(now=now)
            return
        if not now and self.kc is not None and self._pid is not None:
            with contextlib.suppress(Exception):
                self.kc.control_channel.send(
                    self.kc.session.msg("shutdown_request", {"restart": False})
                )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SHUTDOWN_WAIT
            while pid_alive(self._pid) and loop.time() < deadline:
                await asyncio.sleep(START_POLL)
        await self.kill()

    async def _release(self) -> None:
        """Before a restart: the forked process and its files go."""
        await self.kill()
        self._pid = None

    def _stop_channels(self) -> None:
        if self.kc is not None:
            with contextlib.suppress(Exception):
                self.kc.stop_channels()
            self.kc = None

    def _killpg(self) -> None:
        if self.tree is not None:
            self.tree.kill()

    def _cleanup(self) -> None:
        if self.runtime_dir:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
