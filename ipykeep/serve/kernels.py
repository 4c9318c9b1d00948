"""Inside the Jupyter server: a kernel manager that hosts ipykeep's running kernels.

Runs only in the server process (imports jupyter_server). A kernel is *adopted* from its
connection file: the server connects to its sockets like any other client and never owns the
process. What the browser may do to an adopted kernel:

- **interrupt** is forwarded: SIGINT to the kernel's process group (ipykeep starts every kernel
  as its own session leader, so the group is the kernel and its children). A kernel on an SSH
  host has no local process: the server reaches it through the forwarded ports in a local
  connection file, and interrupts it by running the SSH provider's interrupt command (the same
  SIGINT, sent by the kernel's supervisor on the host, over ipykeep's multiplexed connection);
- **restart** (``POST /api/kernels/<id>/restart``) and **shutdown** (``DELETE /api/kernels/<id>``,
  and ``DELETE /api/sessions/<id>``, which shuts its kernel down) are refused with HTTP 403 and
  a message saying to use ipykeep; the kernel keeps its state;
- a ``shutdown_request`` sent over the kernel websocket is dropped (it would end the process
  behind ipykeep's back), with a warning in the server log;
- starting a new kernel is refused with 403: this server lists exactly ipykeep's kernels;
- auto-restart and culling are off, and stopping the server only disconnects.

Adoption goes through the server's ordinary start path: :class:`AdoptionKernelSpecManager`
knows one kernel spec per adopted kernel whose ``metadata.kernel_provisioner`` names
:class:`AdoptedProvisioner` (registered under the ``jupyter_client.kernel_provisioners`` entry
point group as ``ipykeep-adopted``) with the kernel's pid and connection file as its config; the
provisioner's "launch" hands back the running kernel's connection info instead of starting one.
"""

# jupyter_server ships type information but leaves much of its API unannotated.
# mypy: untyped-calls-exclude=jupyter_server

from __future__ import annotations

import asyncio
import json
import os
import signal
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.provisioning.factory import KernelProvisionerFactory
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from jupyter_server.services.kernels.kernelmanager import (
    AsyncMappingKernelManager,
    ServerKernelManager,
)
from tornado import web
from traitlets import Bool, Dict, Integer, List, Unicode, default

from ipykeep.platform.processes import interrupt_process_group, pid_alive

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
    "this Jupyter server only hosts kernels started by ipykeep; "
    "start one with `ipykeep start NOTEBOOK --serve`"
)


#: the provisioner's entry point name (pyproject.toml, ``jupyter_client.kernel_provisioners``)
PROVISIONER_NAME = "ipykeep-adopted"
#: what the server reports as an adopted kernel's name (front ends write it into the notebook)
REPORTED_KERNEL_NAME = "python3"


class AdoptedProvisioner(KernelProvisionerBase):
    """Stands for a kernel process somebody else started: it can signal it, never end it.

    Its config (from the adoption kernel spec) is the kernel's pid and connection file; "launching"
    loads that file into the kernel manager and returns it, and starts nothing. A remote kernel
    (pid 0) comes with ``interrupt_command`` instead; ipykeep un-adopts it when it ends.
    """

    pid = Integer(0, config=True)
    connection_file = Unicode("", config=True)
    interrupt_command = List(Unicode(), config=True)

    @property
    def has_process(self) -> bool:
        return self.pid > 0 or bool(self.interrupt_command)

    async def poll(self) -> int | None:
        if self.pid <= 0:
            return None if self.interrupt_command else 1
        return None if pid_alive(self.pid) else 1

    async def wait(self) -> int | None:
        while await self.poll() is None:
            await asyncio.sleep(0.5)
        return 1

    async def send_signal(self, signum: int) -> None:
        if signum not in (signal.SIGINT,):
            self.log.warning("refusing signal %s to ipykeep's kernel %s", signum, self.kernel_id)
            return
        await self.interrupt()

    async def interrupt(self) -> None:
        if self.interrupt_command:
            await interrupt_remote(list(self.interrupt_command))
        else:
            interrupt_group(self.pid)

    async def kill(self, restart: bool = False) -> None:
        self.log.warning(
            "not killing ipykeep's kernel %s: it belongs to the ipykeep daemon", self.kernel_id
        )

    async def terminate(self, restart: bool = False) -> None:
        await self.kill(restart)

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        kwargs = await super().pre_launch(**kwargs)
        kwargs["cmd"] = []  # nothing is launched
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        # A spec naming this provisioner without a running kernel behind it starts nothing.
        if (
            not self.has_process
            or not self.connection_file
            or not os.path.exists(self.connection_file)
        ):
            raise web.HTTPError(403, REFUSE_START)
        km = self.parent
        assert km is not None
        # The manager's connection file is the kernel's own: the start path then finds it with
        # the same contents and writes no copy of the key anywhere else.
        km.connection_file = self.connection_file
        km.load_connection_file(self.connection_file)
        info: KernelConnectionInfo = km.get_connection_info()
        return info

    async def cleanup(self, restart: bool = False) -> None:
        return None


#: seconds an interrupt over ssh may take (a new connection when the shared one is down)
REMOTE_INTERRUPT_TIMEOUT = 30.0


async def interrupt_remote(command: list[str]) -> None:
    """Run a remote kernel's interrupt command with ``INT`` on its stdin.

    Its stdout (the kernel's connection info, key included) is discarded, never logged.
    """
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _out, err = await asyncio.wait_for(proc.communicate(b"INT\n"), REMOTE_INTERRUPT_TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise web.HTTPError(
            504, f"interrupting the remote kernel took over {REMOTE_INTERRUPT_TIMEOUT:g} s"
        ) from None
    if proc.returncode != 0:
        last = (err.decode(errors="replace").strip().splitlines() or ["ssh failed"])[-1]
        raise web.HTTPError(502, f"could not interrupt the remote kernel: {last}")


def interrupt_group(pid: int) -> None:
    """SIGINT the kernel's process group (the kernel is its group's leader)."""
    try:
        interrupt_process_group(pid)
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
        # Only an adoption spec may be "started"; it hands over the running kernel.
        if not is_adoption_spec(self.kernel_spec):
            raise web.HTTPError(403, REFUSE_START)
        await super().start_kernel(*args, **kwargs)

    async def shutdown_kernel(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        raise web.HTTPError(403, REFUSE_SHUTDOWN)

    async def restart_kernel(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        raise web.HTTPError(403, REFUSE_RESTART)

    async def interrupt_kernel(self) -> None:  # type: ignore[override]
        prov = self.provisioner
        if isinstance(prov, AdoptedProvisioner):
            await prov.interrupt()


def is_adoption_spec(spec: KernelSpec | None) -> bool:
    meta = getattr(spec, "metadata", None) or {}
    name: object = meta.get("kernel_provisioner", {}).get("provisioner_name")
    return name == PROVISIONER_NAME


def adoption_spec_name(server_id: str) -> str:
    return f"ipykeep-adopted-{server_id}"


def adoption_spec(
    connection_file: str, pid: int, display_name: str, interrupt_command: tuple[str, ...] = ()
) -> KernelSpec:
    return KernelSpec(
        argv=[],
        display_name=display_name,
        language="python",
        interrupt_mode="signal",
        metadata={
            "kernel_provisioner": {
                "provisioner_name": PROVISIONER_NAME,
                "config": {
                    "pid": pid,
                    "connection_file": connection_file,
                    "interrupt_command": list(interrupt_command),
                },
            }
        },
    )


def ensure_provisioner_registered() -> None:
    """Make ``ipykeep-adopted`` resolvable where ipykeep's entry points are not installed (run
    from a source tree): ``provisioners`` is the factory's public cache of entry points."""
    if not entry_points(group=KernelProvisionerFactory.GROUP_NAME, name=PROVISIONER_NAME):
        KernelProvisionerFactory.provisioners.setdefault(
            PROVISIONER_NAME,
            EntryPoint(
                PROVISIONER_NAME,
                "ipykeep.serve.kernels:AdoptedProvisioner",
                KernelProvisionerFactory.GROUP_NAME,
            ),
        )


class AdoptionKernelSpecManager(KernelSpecManager):
    """The installed kernel specs, plus one unlisted adoption spec per adopted kernel."""

    adoption_specs = Dict()

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        spec = self.adoption_specs.get(kernel_name)
        return spec if spec is not None else super().get_kernel_spec(kernel_name)


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

    if TYPE_CHECKING:
        # jupyter_server leaves these unannotated; their types as ipykeep calls them.
        def _check_kernel_id(self, kernel_id: str) -> None: ...
        def stop_watching_activity(self, kernel_id: str) -> None: ...
        def stop_buffering(self, kernel_id: str) -> None: ...

    def _adoption_specs(self) -> dict[str, KernelSpec]:
        ksm = self.kernel_spec_manager
        if not isinstance(ksm, AdoptionKernelSpecManager):
            # A spec manager of another class (a user's configuration, or none given): adoption
            # needs one that knows the adoption specs; it only ever starts those.
            ksm = self.kernel_spec_manager = AdoptionKernelSpecManager(parent=self)
        specs: dict[str, KernelSpec] = ksm.adoption_specs
        return specs

    # -- adoption ----------------------------------------------------------------------------
    async def adopt(
        self,
        server_id: str,
        connection_file: str,
        pid: int,
        display_name: str,
        interrupt_command: tuple[str, ...] = (),
    ) -> None:
        """Host a running kernel under ``server_id``, through the ordinary start path."""
        ensure_provisioner_registered()
        name = adoption_spec_name(server_id)
        self._adoption_specs()[name] = adoption_spec(
            connection_file, pid, display_name, interrupt_command
        )
        try:
            await self.start_kernel(kernel_name=name, kernel_id=server_id)
        finally:
            # The spec served its purpose; the provisioner keeps its own copy.
            self._adoption_specs().pop(name, None)
        km = self.adopted(server_id)
        # Front ends write the kernel's name into the notebook's metadata: keep it the
        # notebook's usual one rather than the per-kernel adoption spec's.
        km.kernel_name = REPORTED_KERNEL_NAME
        # The kernel is running already (the start path says "starting" until it hears a status).
        km.execution_state = "idle"
        where = f"pid {pid}" if pid > 0 else "remote"
        self.log.info("adopted ipykeep kernel %s (%s) as %s", display_name, where, server_id)

    def adopted(self, server_id: str) -> AdoptedKernelManager:
        km = self.get_kernel(server_id)
        assert isinstance(km, AdoptedKernelManager), km
        return km

    def adopted_pid(self, server_id: str) -> int | None:
        if server_id not in self:
            return None
        prov = self.get_kernel(server_id).provisioner
        return prov.pid if isinstance(prov, AdoptedProvisioner) else None

    def adopted_connection_file(self, server_id: str) -> str | None:
        return self.get_kernel(server_id).connection_file if server_id in self else None

    async def detach(self, server_id: str) -> None:
        """Forget a kernel without touching its process."""
        if server_id not in self:
            return
        self.stop_watching_activity(server_id)
        self.stop_buffering(server_id)
        km = self.adopted(server_id)
        self.remove_kernel(server_id)
        # Closes the control socket the start path opened. The connection file stays: it is
        # ipykeep's, and the manager only removes files it wrote itself.
        await km.cleanup_resources()
        self.log.info("detached kernel %s", server_id)

    # -- what the browser may not do -------------------------------------------------------
    async def start_kernel(  # type: ignore[override]
        self, *, kernel_id: str | None = None, path: Any = None, **kwargs: Any
    ) -> str:
        if kernel_id is not None and kernel_id in self:
            return kernel_id
        # Only ``adopt`` starts kernels: with the adoption spec made for exactly this id.
        name = kwargs.get("kernel_name")
        if (
            kernel_id is None
            or name != adoption_spec_name(kernel_id)
            or name not in self._adoption_specs()
        ):
            raise web.HTTPError(403, REFUSE_START)
        return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)

    async def shutdown_kernel(  # type: ignore[override]
        self, kernel_id: str, now: bool = False, restart: bool = False
    ) -> None:
        self._check_kernel_id(kernel_id)
        raise web.HTTPError(403, REFUSE_SHUTDOWN)

    async def restart_kernel(self, kernel_id: str, now: bool = False) -> None:  # type: ignore[override]
        self._check_kernel_id(kernel_id)
        raise web.HTTPError(403, REFUSE_RESTART)

    async def interrupt_kernel(self, kernel_id: str) -> None:  # type: ignore[override]
        self._check_kernel_id(kernel_id)
        await self.adopted(kernel_id).interrupt_kernel()
        self.log.info("interrupted kernel %s", kernel_id)

    async def shutdown_all(self, now: bool = False) -> None:  # type: ignore[override]
        """Server exit: disconnect from every kernel; the kernels stay with ipykeep."""
        for kid in self.list_kernel_ids():
            await self.detach(kid)


def _msg_type(header: Any) -> str | None:
    msg_type = header["msg_type"]  # a header from the wire: anything JSON can hold
    return msg_type if isinstance(msg_type, str) else None


def ws_msg_type(channel_msg: Any, subprotocol: str | None) -> str | None:
    """The msg_type of a websocket frame from the browser (None when it cannot be read)."""
    try:
        if subprotocol == "v1.kernel.websocket.jupyter.org":
            from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1

            _channel, parts = deserialize_msg_from_ws_v1(channel_msg)
            return _msg_type(json.loads(bytes(parts[0]).decode()))
        if isinstance(channel_msg, bytes):
            from jupyter_server.services.kernels.connection.base import deserialize_binary_message

            return _msg_type(deserialize_binary_message(channel_msg)["header"])
        return _msg_type(json.loads(channel_msg)["header"])
    except Exception:
        return None


class GuardedChannelsConnection(ZMQChannelsWebsocketConnection):
    """The kernel websocket, minus shutdown requests (they would end ipykeep's kernel)."""

    def handle_incoming_message(self, incoming_msg: str) -> None:
        if ws_msg_type(incoming_msg, self.subprotocol) == "shutdown_request":
            self.log.warning(
                "dropped a shutdown_request for kernel %s: ipykeep owns it", self.kernel_id
            )
            return
        super().handle_incoming_message(incoming_msg)
