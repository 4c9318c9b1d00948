"""Pre-started local kernels: a ready kernel handed over when one is asked for.

After the daemon has served a local kernel for an (interpreter, dataflow mode), it starts one
more of the same kind in the background, so the next ``create_kernel``, ``start``, restart or
restore of a lost kernel gets a live kernel at once instead of waiting ~1 s for the launch.

- At most ``prestart_kernels`` spares exist, one per key, for the most recently served keys; a
  key pushed out has its spare killed. The key is the interpreter path as the engine resolved
  it, so a project's own environment gets spares of its own.
- A spare is started only while the machine has ``MIN_FREE_MB`` of memory available.
- A spare is handed over once (it leaves the pool when taken) and never serves two notebooks;
  a request arriving while its spare is still starting waits for that spare.
- Spares are children of the daemon like every local kernel (``JPY_PARENT_PID``: they exit when
  the daemon dies, however it dies) and are killed when the engine shuts down.
- A spare starts in the project directory; the kernel it becomes is moved to the directory
  the request named (the in-kernel ``chdir`` a gateway kernel gets too) before any code runs.
- A spare is prepared while it waits: the in-kernel helpers every kernel of its mode gets
  (``KERNEL_SETUP`` and those the engine's services name) are installed and the traceback
  warm-up is begun, so adoption sends only what depends on the notebook. A spare whose
  preparation fails is killed, like one that does not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipykeep.api.errors import KernelStartError
from ipykeep.kernel.inkernel import KERNEL_SETUP, InKernelModule, install_expression, install_order
from ipykeep.kernel.providers.base import DataflowMode, LaunchSpec, ProviderKind
from ipykeep.kernel.providers.local import LocalProvider
from ipykeep.platform.processes import available_memory_mb, pid_alive

log = logging.getLogger("ipykeep.kernel")

PoolKey = tuple[str, DataflowMode]
#: The in-kernel helpers every kernel of a dataflow mode is given (the engine's services say).
HelpersFor = Callable[[DataflowMode], tuple[InKernelModule, ...]]

#: Memory (MB) the machine must have available before a spare kernel is started.
MIN_FREE_MB = 512

#: Seconds a spare may take to become ready before it is given up.
START_TIMEOUT = 60.0


def _alive(provider: LocalProvider) -> bool:
    pid = provider.pid
    return pid is not None and pid > 0 and pid_alive(pid)


def _no_helpers(dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
    return ()


async def _reply_and_idle(kc: Any, msg_id: str) -> dict[str, Any]:
    """The shell reply to ``msg_id``, once its idle status arrived (earlier messages dropped)."""
    while True:
        reply: dict[str, Any] = await kc.get_shell_msg()
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    while True:
        status = await kc.get_iopub_msg()
        if (
            status["parent_header"].get("msg_id") == msg_id
            and status["header"]["msg_type"] == "status"
            and status["content"].get("execution_state") == "idle"
        ):
            return reply


async def _prepare(spare: LocalProvider, helpers: tuple[InKernelModule, ...]) -> None:
    """Install ``helpers`` (and ``KERNEL_SETUP``) in ``spare`` and begin the traceback warm-up,
    in one request. Nothing routes the spare's messages yet: its reply and the iopub status
    messages it caused (those of the readiness check too) are read here, so none of them reach
    the kernel it becomes as another client's traffic."""
    modules = install_order((KERNEL_SETUP, *helpers))
    kc = spare.kc
    msg = kc.session.msg(
        "execute_request",
        {
            "code": "",
            "silent": True,
            "store_history": False,
            # evaluated in order: the warm-up calls the module installed just before it
            "user_expressions": {
                "install": install_expression(*modules),
                "warm": KERNEL_SETUP.call("warm_tracebacks"),
            },
            "allow_stdin": False,
            "stop_on_error": False,
        },
    )
    msg_id = msg["header"]["msg_id"]
    kc.shell_channel.send(msg)
    reply = await asyncio.wait_for(_reply_and_idle(kc, msg_id), START_TIMEOUT)
    results = reply["content"].get("user_expressions", {})
    failed = [k for k in ("install", "warm") if results.get(k, {}).get("status") != "ok"]
    if reply["content"].get("status") != "ok" or failed:
        raise KernelStartError(
            f"a spare kernel's in-kernel set-up failed: {failed or reply['content'].get('ename')}",
            hint="the kernel asked for is started afresh; run `ipykeep doctor` if that fails too",
        )
    spare.preinstalled = frozenset(m.name for m in modules)


class KernelPool:
    """The spares of one engine, keyed by (interpreter, dataflow mode)."""

    def __init__(
        self,
        size: int,
        launch_dir: Path,
        helpers: HelpersFor = _no_helpers,
        ipython_history: bool = False,
    ) -> None:
        self.size = max(0, size)
        self.launch_dir = launch_dir
        self.helpers = helpers
        self.ipython_history = ipython_history  # the spares' kernel option (``kernel_options``)
        self._spares: dict[PoolKey, LocalProvider] = {}
        self._starting: dict[PoolKey, asyncio.Task[None]] = {}
        self._served: list[PoolKey] = []  # most recent last
        self._closed = False

    @property
    def spares(self) -> dict[PoolKey, int | None]:
        """The ready spares and their pids (for status and tests)."""
        return {key: p.pid for key, p in self._spares.items()}

    def provider(self, spec: LaunchSpec) -> PooledProvider:
        """A local provider for ``spec`` that starts from a spare when one is ready."""
        return PooledProvider(self, spec)

    async def take(self, spec: LaunchSpec) -> LocalProvider | None:
        """The spare for ``spec``'s key, removed from the pool, or None. A spare still starting
        is waited for: it is further along than a launch begun now, which would compete with
        it for the same cores."""
        if spec.env or spec.ipython_history != self.ipython_history:
            return None  # variables and options are set at launch: a spare does not have them
        key = (spec.python, spec.dataflow)
        starting = self._starting.get(key)
        if starting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(starting)
        spare = self._spares.pop(key, None)
        if spare is None:
            return None
        if not _alive(spare):
            asyncio.get_running_loop().create_task(spare.kill())
            return None
        spare.spec = dataclasses.replace(spare.spec, name=spec.name, cwd=spec.cwd)
        return spare

    def served(self, spec: LaunchSpec) -> None:
        """A kernel of ``spec``'s kind was handed out: keep a spare of that kind ready."""
        if self.size == 0 or self._closed:
            return
        key = (spec.python, spec.dataflow)
        if key in self._served:
            self._served.remove(key)
        self._served.append(key)
        wanted = set(self._served[-self.size :])
        for old in [k for k in self._spares if k not in wanted]:
            asyncio.get_running_loop().create_task(self._spares.pop(old).kill())
        for old in [k for k in self._starting if k not in wanted]:
            self._starting.pop(old).cancel()
        if key not in self._spares and key not in self._starting:
            free = available_memory_mb()
            if free is not None and free < MIN_FREE_MB:
                log.info("no spare kernel: %.0f MB available, %d MB needed", free, MIN_FREE_MB)
                return
            self._starting[key] = asyncio.get_running_loop().create_task(
                self._start(key), name=f"prestart-{key[1]}"
            )

    async def _start(self, key: PoolKey) -> None:
        python, dataflow = key
        spare = LocalProvider(
            LaunchSpec(
                "spare", python, dataflow, self.launch_dir, ipython_history=self.ipython_history
            )
        )
        try:
            await spare.start(START_TIMEOUT)
            await _prepare(spare, self.helpers(dataflow))
        except asyncio.CancelledError:
            await spare.kill()
            raise
        except Exception as exc:  # the request itself will report a kernel that cannot start
            log.info("spare %s kernel not started: %s", dataflow, exc)
            await spare.kill()
            return
        finally:
            self._starting.pop(key, None)
        if self._closed:
            await spare.kill()
            return
        self._spares[key] = spare

    async def close(self) -> None:
        """Kill every spare (the engine is shutting down)."""
        self._closed = True
        starting = list(self._starting.values())
        for task in starting:
            task.cancel()
        for task in starting:
            with contextlib.suppress(BaseException):
                await task
        ready, self._spares = list(self._spares.values()), {}
        await asyncio.gather(*(p.kill() for p in ready), return_exceptions=True)


class PooledProvider:
    """A local kernel's provider that takes a spare from the pool on every (re)start."""

    kind: ProviderKind = "local"
    remote: bool = False
    location = "local"

    def __init__(self, pool: KernelPool, spec: LaunchSpec) -> None:
        self.pool = pool
        self.spec = spec
        self.current = LocalProvider(spec)
        #: set when a spare was taken: the driver moves the kernel to the requested directory
        self.kernel_cwd: str | None = None
        #: whether the running kernel came from the pool (for status and tests)
        self.prestarted = False

    @property
    def pid(self) -> int | None:
        return self.current.pid

    @property
    def connection_file(self) -> str | None:
        return self.current.connection_file

    @property
    def preinstalled(self) -> frozenset[str]:
        return self.current.preinstalled

    @property
    def lost_reason(self) -> str | None:
        return self.current.lost_reason

    @lost_reason.setter
    def lost_reason(self, value: str | None) -> None:
        self.current.lost_reason = value

    async def start(self, timeout: float) -> Any:
        spare = await self.pool.take(self.spec)
        if spare is not None:
            self.current, self.prestarted = spare, True
            self.kernel_cwd = str(self.spec.cwd)
            self.pool.served(self.spec)
            return spare.kc
        self.current, self.prestarted, self.kernel_cwd = LocalProvider(self.spec), False, None
        kc = await self.current.start(timeout)
        self.pool.served(self.spec)
        return kc

    async def is_alive(self) -> bool:
        return await self.current.is_alive()

    async def interrupt(self) -> None:
        await self.current.interrupt()

    async def kill(self) -> None:
        await self.current.kill()

    async def shutdown(self, *, now: bool = False) -> None:
        await self.current.shutdown(now=now)
