"""Inside the Jupyter server: a kernel manager that hosts ipykeep's running kernels.

Runs only in the server process (imports jupyter_server). A kernel is *adopted* from its
connection file: the server connects to its sockets like any other client and never owns the
process. What the browser may do to an adopted kernel:

- **interrupt** is forwarded: SIGINT to the kernel's process group (ipykeep starts every kernel
  as its own session leader, so the group is the kernel and its children);
- **restart** (``POST /api/kernels/<id>/restart``) and **shutdown** (``DELETE /api/kernels/<id>``,
  and ``DELETE /api/sessions/<id>``, which shuts its kernel down) are refused with HTTP 403 and
  a message saying to use ipykeep; the kernel keeps its state;
- a ``shutdown_request`` sent over the kernel websocket is dropped (it would end the process
  behind ipykeep's back), with a warning in the server log;
- starting a new kernel is refused with 403: this server lists exactly ipykeep's kernels;
- auto-restart and culling are off, and stopping the server only disconnects.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import TYPE_CHECKING, Any

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager, ServerKernelManager
from tornado import web
from traitlets import Bool, Integer, default

if TYPE_CHECKING:  # older jupyter_client versions do not define it
    from jupyter_client.connect import KernelConnectionInfo

REFUSE_RESTART = (
    "ipykeep owns this kernel: restarting it from the browser is refused (its state is shared with "
    "the agent). Restart it with `ipykeep stop` and `ipykeep start`, or re-run cells."
)
REFUSE_SHUTDOWN = (
    "ipykeep owns this kernel: shutting it down from the browser is refused. "
    "Stop it with `ipykeep stop` (or `ipykeep serve --stop` to detach it from this server)."
)
REFUSE_START = (
    "this Jupyter server only hosts kernels started by ipykeep; start one with `ipykeep start NOTEBOOK --serve`"
)


class AdoptedProvisioner(KernelProvisionerBase):
    """Stands for a kernel process somebody else started: it can signal it, never end it."""

    pid = Integer(0)

    @property
    def has_process(self) -> bool:
        return self.pid > 0

    async def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 1
        except PermissionError:
            return None
        return None

    async def wait(self) -> int | None:
        while await self.poll() is None:
            await asyncio.sleep(0.5)
        return 1

    async def send_signal(self, signum: int) -> None:
        if signum not in (signal.SIGINT,):
            self.log.warning("refusing signal %s to ipykeep's kernel %s", signum, self.kernel_id)
            return
        interrupt_group(self.pid)

    async def kill(self, restart: bool = False) -> None:
        self.log.warning("not killing ipykeep's kernel %s: it belongs to the ipykeep daemon", self.kernel_id)

    async def terminate(self, restart: bool = False) -> None:
        await self.kill(restart)

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        raise web.HTTPError(403, REFUSE_START)

    async def cleanup(self, restart: bool = False) -> None:
        return None


def interrupt_group(pid: int) -> None:
    """SIGINT the kernel's process group (the kernel is its group's leader)."""
    try:
        os.killpg(os.getpgid(pid), signal.SIGINT)
    except ProcessLookupError:
        raise web.HTTPError(404, "the kernel process is gone") from None


class AdoptedKernelManager(ServerKernelManager):
    """One adopted kernel: connects to it, interrupts it, refuses to restart or stop it.

    The ``type: ignore[override]`` below: jupyter_client types these methods as the blocking
    ``KernelManager`` ones, but the server's (async) kernel managers define and await them as
    coroutines, as these overrides do.
    """

    autorestart = Bool(False)

    async def start_kernel(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        raise web.HTTPError(403, REFUSE_START)

    async def shutdown_kernel(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        raise web.HTTPError(403, REFUSE_SHUTDOWN)

    async def restart_kernel(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        raise web.HTTPError(403, REFUSE_RESTART)

    async def interrupt_kernel(self) -> None:  # type: ignore[override]
        prov = self.provisioner
        if isinstance(prov, AdoptedProvisioner):
            interrupt_group(prov.pid)


def _done_future() -> asyncio.Future[None]:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut


class AdoptingKernelManager(AsyncMappingKernelManager):
    """The server's kernel map, holding only adopted kernels."""

    @default("kernel_manager_class")
    def _default_kernel_manager_class(self) -> str:
        return "ipykeep.serve.kernels.AdoptedKernelManager"

    # Culling would shut kernels down; it is off whatever the configuration says.
    @default("cull_idle_timeout")
    def _default_cull(self) -> int:
        return 0

    def initialize_culler(self) -> None:
        self._initialized_culler = True

    # -- adoption ----------------------------------------------------------------------------
    def adopt(self, server_id: str, connection_file: str, pid: int, display_name: str) -> None:
        km = self.kernel_manager_factory(
            connection_file=connection_file,
            parent=self,
            log=self.log,
            kernel_name="python3",
            owns_kernel=False,
        )
        km.load_connection_file(connection_file)
        km._kernel_spec = KernelSpec(
            argv=[], display_name=display_name, language="python", interrupt_mode="signal"
        )
        km.provisioner = AdoptedProvisioner(kernel_id=server_id, kernel_spec=km._kernel_spec, parent=km, pid=pid)
        km.kernel_id = server_id
        km._ready = _done_future()
        km.execution_state = "idle"
        km.reason = ""
        km.last_activity = utcnow()
        self._kernels[server_id] = km
        self._kernel_connections[server_id] = 0
        self._kernel_ports[server_id] = km.ports
        self.start_watching_activity(server_id)
        self.log.info("adopted ipykeep kernel %s (pid %d) as %s", display_name, pid, server_id)

    def adopted_pid(self, server_id: str) -> int | None:
        km = self._kernels.get(server_id)
        prov = getattr(km, "provisioner", None)
        return prov.pid if isinstance(prov, AdoptedProvisioner) else None

    def adopted_connection_file(self, server_id: str) -> str | None:
        km = self._kernels.get(server_id)
        return km.connection_file if km is not None else None

    def detach(self, server_id: str) -> None:
        """Forget a kernel without touching its process."""
        if server_id not in self._kernels:
            return
        self.stop_watching_activity(server_id)
        self.stop_buffering(server_id)
        self._kernels.pop(server_id, None)
        self._kernel_connections.pop(server_id, None)
        self._kernel_ports.pop(server_id, None)
        self.log.info("detached kernel %s", server_id)

    # -- what the browser may not do -------------------------------------------------------
    async def start_kernel(self, *, kernel_id: str | None = None, path: Any = None, **kwargs: Any) -> str:  # type: ignore[override]
        if kernel_id is not None and kernel_id in self:
            return kernel_id
        raise web.HTTPError(403, REFUSE_START)

    async def shutdown_kernel(self, kernel_id: str, now: bool = False, restart: bool = False) -> None:  # type: ignore[override]
        self._check_kernel_id(kernel_id)
        raise web.HTTPError(403, REFUSE_SHUTDOWN)

    async def restart_kernel(self, kernel_id: str, now: bool = False) -> None:  # type: ignore[override]
        self._check_kernel_id(kernel_id)
        raise web.HTTPError(403, REFUSE_RESTART)

    async def interrupt_kernel(self, kernel_id: str) -> None:  # type: ignore[override]
        self._check_kernel_id(kernel_id)
        await self._kernels[kernel_id].interrupt_kernel()
        self.log.info("interrupted kernel %s", kernel_id)

    async def shutdown_all(self, now: bool = False) -> None:  # type: ignore[override]
        """Server exit: disconnect from every kernel; the kernels stay with ipykeep."""
        for kid in list(self._kernels):
            self.detach(kid)


def ws_msg_type(channel_msg: Any, subprotocol: str | None) -> str | None:
    """The msg_type of a websocket frame from the browser (None when it cannot be read)."""
    try:
        if subprotocol == "v1.kernel.websocket.jupyter.org":
            from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1

            _channel, parts = deserialize_msg_from_ws_v1(channel_msg)
            return json.loads(bytes(parts[0]).decode())["msg_type"]
        if isinstance(channel_msg, bytes):
            from jupyter_server.services.kernels.connection.base import deserialize_binary_message

            return deserialize_binary_message(channel_msg)["header"]["msg_type"]
        return json.loads(channel_msg)["header"]["msg_type"]
    except Exception:
        return None


class GuardedChannelsConnection(ZMQChannelsWebsocketConnection):
    """The kernel websocket, minus shutdown requests (they would end ipykeep's kernel)."""

    def handle_incoming_message(self, incoming_msg: str) -> None:
        if ws_msg_type(incoming_msg, self.subprotocol) == "shutdown_request":
            self.log.warning("dropped a shutdown_request for kernel %s: ipykeep owns it", self.kernel_id)
            return
        super().handle_incoming_message(incoming_msg)
