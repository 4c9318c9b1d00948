"""Kernels on a host reached over OpenSSH: ``ssh://[user@]host[:port]/path``.

Everything goes through the user's own ``ssh`` (their ``~/.ssh/config``, agent, jump hosts,
known hosts; ``ssh_config`` in ipykeep's configuration names another config file). One master
connection per kernel (ControlMaster, its socket in a private runtime directory) carries every
channel: the launcher (``ssh_launcher.py``, run by the host's Python), and ``ssh -O forward``
tunnels from local loopback ports to the kernel's ports on the host's loopback. No port is
opened on the host beyond its loopback, and none locally beyond ours.

Interrupts are SIGINT to the kernel's process group on the host (a line to the launcher).
The kernel outlives the connection: its supervisor on the host is detached from the SSH session.
When the link drops, ``is_alive`` opens a new master, re-attaches to the same kernel and
forwards the same local ports to its same ports, so the client's sockets reconnect by
themselves; it tries again with backoff for ``remote_reconnect_s`` (``link.py``) before the
kernel counts as lost. If the kernel ended meanwhile, it is reported dead as any kernel would
be. A kernel nobody re-attaches to within ``orphan_timeout`` seconds is stopped by its
supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import shlex
import shutil
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import zmq

from ipykeep.api.errors import KernelStartError, RemoteAuthError, RemoteUnreachableError, UsageError
from ipykeep.kernel.providers.base import (
    KernelChannels,
    LaunchSpec,
    ProviderKind,
    kernel_module,
    kernel_options,
)
from ipykeep.kernel.providers.link import RemoteLink, Stop
from ipykeep.kernel.providers.local import short_runtime_dir
from ipykeep.kernel.providers.session import KernelClient, UndatedSession
from ipykeep.project.atomic import atomic_write_text

log = logging.getLogger("ipykeep.ssh")

LAUNCHER = (Path(__file__).parent / "ssh_launcher.py").read_text()
#: Seconds the master connection may take (DNS, TCP, key exchange, authentication).
CONNECT_TIMEOUT = 20.0
#: Seconds the client's sockets may take to reconnect through a re-established tunnel.
HANDSHAKE_TIMEOUT = 15.0
PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


@dataclass(frozen=True)
class SshTarget:
    host: str
    user: str | None = None
    port: int | None = None
    path: str = "~"

    @classmethod
    def parse(cls, url: str) -> SshTarget:
        parts = urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname:
            raise UsageError(
                f"not an ssh URL: {url!r}",
                hint="use ssh://[user@]host[:port]/path (or ssh://host/~/path)",
            )
        if parts.password:
            raise UsageError(
                "ssh URLs must not carry a password",
                hint="use your ssh agent or a key in ~/.ssh/config",
            )
        path = unquote(parts.path) or "/~"
        # ssh://host/~/proj is relative to the home directory, ssh://host/abs/path is absolute.
        path = "~" + path[2:] if path.startswith("/~") else path
        try:
            port = parts.port
        except ValueError:
            raise UsageError(f"bad port in {url!r}", hint="use ssh://host:2222/path") from None
        return cls(host=parts.hostname, user=parts.username, port=port, path=path)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        port = f":{self.port}" if self.port else ""
        path = self.path if self.path.startswith("/") else "/" + self.path
        return f"ssh://{self.destination}{port}{path}"


def free_local_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def classify_ssh_failure(stderr: str, target: SshTarget) -> KernelStartError:
    text = stderr.strip().splitlines()
    last = text[-1] if text else "ssh exited"
    low = stderr.lower()
    if (
        "permission denied" in low
        or "too many authentication failures" in low
        or "host key verification failed" in low
    ):
        return RemoteAuthError(
            f"ssh to {target.destination} failed authentication: {last}",
            hint="check `ssh "
            + target.destination
            + "` works without a prompt (key in your agent or ~/.ssh/config; host key known)",
        )
    return RemoteUnreachableError(
        f"cannot reach {target.destination} over ssh: {last}",
        hint="check the host name, port and network; `ssh "
        + target.destination
        + " true` should succeed",
    )


def write_tunnel_connection_file(runtime_dir: Path, conn: dict[str, Any]) -> str:
    """The kernel's connection info as seen from here (the forwarded loopback ports), as a
    connection file (0600, in the kernel's private 0700 runtime directory) so that another local
    client, such as the ``--serve`` Jupyter server, can attach through the tunnel."""
    path = runtime_dir / "kernel.json"
    atomic_write_text(path, json.dumps(conn), mode=0o600)
    return str(path)


class SshProvider:
    """One kernel on an SSH host, driven through forwarded loopback ports."""

    kind: ProviderKind = "ssh"
    remote: bool = True
    pid = None
    #: a local connection file for the forwarded ports while the kernel runs (for --serve)
    connection_file: str | None = None
    kernel_cwd: str | None = None  # the launcher starts the kernel in the right directory
    preinstalled: frozenset[str] = frozenset()

    def __init__(
        self,
        spec: LaunchSpec,
        target: SshTarget,
        *,
        python: str = "python3",
        ssh_config: str | None = None,
        orphan_timeout: float = 600.0,
        reconnect_for: float = 120.0,
    ) -> None:
        self.spec = spec
        self.orphan_timeout = orphan_timeout
        #: the kernel's private directory on the host (its supervisor's address)
        self.remote_runtime: str | None = None
        self.local_ports: list[int] = []
        self.remote_info: dict[str, Any] = {}
        # zmq drops what the kernel sends while no client is connected (iopub's PUB, shell's
        # ROUTER to an absent peer): output during a drop is gone, the kernel's state is not.
        self.link = RemoteLink(
            f"the ssh connection to {target.destination}",
            reconnect_for,
            replays="output the kernel sent meanwhile was not received",
        )
        self.target = target
        self.python = python
        self.ssh_config = ssh_config
        self.location = str(target)
        self.lost_reason: str | None = None
        self.runtime_dir: Path | None = None
        self.master: asyncio.subprocess.Process | None = None
        self.launcher: asyncio.subprocess.Process | None = None
        self.remote_pid: int | None = None
        self.kc: Any = None

    # -- ssh commands --------------------------------------------------------------------------
    def _base(self, *, master: bool = False) -> list[str]:
        assert self.runtime_dir is not None
        cmd = ["ssh"]
        if self.ssh_config:
            cmd += ["-F", self.ssh_config]
        if self.target.port:
            cmd += ["-p", str(self.target.port)]
        cmd += [
            "-o",
            f"ControlPath={self.runtime_dir / 'cm'}",
            "-o",
            "ControlMaster=" + ("yes" if master else "no"),
            "-o",
            "BatchMode=yes",  # never hang on a password or host-key prompt
            "-o",
            f"ConnectTimeout={int(CONNECT_TIMEOUT)}",
            "-o",
            "ServerAliveInterval=10",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            "ExitOnForwardFailure=yes",
        ]
        return cmd

    async def _run(self, *args: str, timeout: float = CONNECT_TIMEOUT) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            *self._base(),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            return 255, "timed out"
        return proc.returncode or 0, (out + err).decode(errors="replace")

    async def _open_master(self) -> None:
        self.master = await asyncio.create_subprocess_exec(
            *self._base(master=True),
            "-N",
            self.target.destination,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_TIMEOUT + 5
        while loop.time() < deadline:
            if self.master.returncode is not None or (await self._wait_exit(self.master, 0.1)):
                err = (
                    (await self.master.stderr.read()).decode(errors="replace")
                    if self.master.stderr
                    else ""
                )
                raise classify_ssh_failure(err, self.target)
            code, _ = await self._run("-O", "check", self.target.destination, timeout=5)
            if code == 0:
                return
        raise RemoteUnreachableError(
            f"ssh to {self.target.destination} did not connect within {CONNECT_TIMEOUT:g} s",
            hint=f"check `ssh {self.target.destination} true` works",
        )

    @staticmethod
    async def _wait_exit(proc: asyncio.subprocess.Process, timeout: float) -> bool:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float) -> KernelChannels:
        if shutil.which("ssh") is None:
            raise KernelStartError(
                "no `ssh` client on PATH", hint="install OpenSSH (Debian: openssh-client)"
            )
        self.lost_reason = None
        self.runtime_dir = short_runtime_dir()
        try:
            await self._open_master()
            info = await self._launch(timeout)
            local = free_local_ports(len(PORT_NAMES))
            self.local_ports, self.remote_info = local, info
            await self._forward()
            conn = {k: v for k, v in info.items() if k in ("key", "signature_scheme", "transport")}
            conn.update(dict(zip(PORT_NAMES, local)), ip="127.0.0.1")
            self.connection_file = write_tunnel_connection_file(self.runtime_dir, conn)
            kc = KernelClient(session=UndatedSession())
            kc.load_connection_info(cast(Any, conn))
            # No heartbeat channel: jupyter_client's wait_for_ready takes a heartbeat not yet
            # beating over the tunnel for a dead kernel; the launcher's exit is the real signal.
            kc.start_channels(hb=False)
            self.kc = kc
            try:
                await self._wait_ready(kc, timeout)
            except Exception as exc:
                raise KernelStartError(
                    f"the kernel on {self.target.destination} did not become ready: {exc}",
                    hint=f"check `{self.python} -m {kernel_module(self.spec.dataflow)}` "
                    "works on the host "
                    "(remote_python in the configuration names the host's Python)",
                ) from None
        except BaseException:
            await self.kill()
            raise
        return kc

    async def _forward(self) -> None:
        """Tunnel the local ports to the kernel's ports on the host's loopback."""
        forwards: list[str] = []
        for name, port in zip(PORT_NAMES, self.local_ports):
            forwards += ["-L", f"127.0.0.1:{port}:127.0.0.1:{self.remote_info[name]}"]
        code, out = await self._run("-O", "forward", *forwards, self.target.destination)
        if code != 0:
            raise KernelStartError(
                f"ssh to {self.target.destination} could not forward the kernel's ports: "
                f"{out.strip()}",
                hint="the host's sshd must allow TCP forwarding (AllowTcpForwarding yes)",
            )

    async def _wait_ready(self, kc: Any, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msg_id = kc.kernel_info()
            with contextlib.suppress(queue.Empty):
                while True:
                    reply = await kc.get_shell_msg(timeout=1)
                    if reply.get("parent_header", {}).get("msg_id") == msg_id:
                        with contextlib.suppress(queue.Empty):
                            while True:  # start-up chatter, so routing starts clean
                                await kc.get_iopub_msg(timeout=0.2)
                        return
            if self.launcher is None or self.launcher.returncode is not None:
                raise RuntimeError(f"the kernel exited before answering{await self._last_words()}")
            if loop.time() > deadline:
                raise TimeoutError(f"no answer within {timeout:g} s")

    async def _launcher_stderr(self, timeout: float) -> list[str]:
        """The lines the launcher wrote on stderr (up to 4,000 bytes), for an error message."""
        err = b""
        if self.launcher is not None and self.launcher.stderr is not None:
            with contextlib.suppress(asyncio.TimeoutError, OSError):
                err = await asyncio.wait_for(self.launcher.stderr.read(4000), timeout)
        return err.decode(errors="replace").strip().splitlines()

    async def _last_words(self) -> str:
        """The launcher's exit status and the tail of what it wrote, for an error message."""
        if self.launcher is None:
            return ""
        tail = (await self._launcher_stderr(1))[-3:]
        return f" (launcher exit status {self.launcher.returncode}" + (
            f": {' / '.join(tail)})" if tail else ")"
        )

    async def _launch(self, timeout: float, *, attach: bool = False) -> dict[str, Any]:
        """Start the kernel (or re-attach to it); its connection info, ``{"gone": True}`` when
        the kernel to re-attach to has ended."""
        if attach:
            assert self.remote_runtime is not None
            args: tuple[str, ...] = ("attach", self.remote_runtime)
        else:
            args = (
                "start",
                self.target.path,
                str(self.orphan_timeout),
                kernel_module(self.spec.dataflow),
                *kernel_options(self.spec.ipython_history),
            )
        remote = " ".join(shlex.quote(a) for a in (self.python, "-c", LAUNCHER, *args))
        self.launcher = await asyncio.create_subprocess_exec(
            *self._base(),
            self.target.destination,
            remote,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.launcher.stdout is not None
        try:
            line = await asyncio.wait_for(self.launcher.stdout.readline(), timeout)
        except asyncio.TimeoutError:
            line = b""
        try:
            info = json.loads(line)
        except ValueError:
            raise KernelStartError(
                f"could not start a kernel on {self.target.destination} with {self.python}: "
                + ((await self._launcher_stderr(2)) or ["no answer"])[-1],
                hint="remote_python in the configuration must name a Python 3 on the host "
                "with ipykernel",
            ) from None
        if attach and info.get("gone"):
            return dict(info)
        if "error" in info:
            raise KernelStartError(
                f"could not start a kernel on {self.target.destination}: {info['error']}",
                hint="fix the path in the ssh:// URL "
                "(ssh://host/~/dir is relative to the home directory)",
            )
        self.remote_pid = int(info["pid"])
        self.remote_runtime = str(info["runtime"])
        return dict(info)

    async def is_alive(self) -> bool:
        if self.master is None or self.launcher is None:
            return False
        # ssh exits 255 when its connection ends; the launcher's own exit (0) means the kernel's
        if self.master.returncode is not None or self.launcher.returncode == 255:
            self.link.dropped()
            return await self._reconnect()
        if self.launcher.returncode is not None:
            return False  # the kernel exited on the host (the launcher relays its end)
        return True

    async def _reconnect(self) -> bool:
        """A new master and launcher attached to the same kernel, the same ports forwarded;
        tried again with backoff until the link's time is up."""
        gone = False

        async def attempt() -> str | Stop | None:
            nonlocal gone
            await self._drop_link()
            try:
                await self._open_master()
                info = await self._launch(CONNECT_TIMEOUT, attach=True)
                if info.get("gone"):
                    gone = True
                    return Stop("the kernel on the host has ended")
                with self._handshakes() as connected:
                    await self._forward()
                    await connected()
            except RemoteAuthError as exc:
                return Stop(exc.message)  # a refused key stays refused
            except KernelStartError as exc:
                return exc.message
            return None

        failed = await self.link.retry(attempt)
        if failed is None:
            self.link.restored()
            return True
        if gone:
            self.lost_reason = None  # the kernel itself ended: reported as a dead kernel
            self.link.down_since = None
        else:
            self.lost_reason = self.link.given_up(failed)
        return False

    @contextlib.contextmanager
    def _handshakes(self) -> Iterator[Callable[[], Awaitable[None]]]:
        """Watch the client's sockets reconnect through the tunnel; the function yielded waits
        until each has completed zmq's handshake with the kernel. Until the shell socket has,
        the kernel's shell socket drops replies addressed to us (a cell's reply sent just after
        the link came back would be lost), and iopub drops output."""
        sockets = (
            [
                ch.socket
                for ch in (self.kc.shell_channel, self.kc.control_channel, self.kc.iopub_channel)
                if ch is not None and ch.socket is not None
            ]
            if self.kc is not None
            else []
        )
        monitors = [s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED) for s in sockets]

        async def connected() -> None:
            waits = [monitor.recv_multipart() for monitor in monitors]
            try:
                await asyncio.wait_for(asyncio.gather(*waits), HANDSHAKE_TIMEOUT)
            except asyncio.TimeoutError:
                log.warning("%s: the kernel's sockets did not reconnect", self.spec.name)

        try:
            yield connected
        finally:
            for sock in sockets:
                with contextlib.suppress(zmq.ZMQError):
                    sock.disable_monitor()
            for monitor in monitors:
                monitor.close(linger=0)

    async def _drop_link(self) -> None:
        for proc in (self.launcher, self.master):
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await self._wait_exit(proc, 2)
        if self.runtime_dir is not None:
            # a master killed outright leaves its socket behind; a new one would not bind to it
            with contextlib.suppress(OSError):
                (self.runtime_dir / "cm").unlink()

    def _tell(self, word: str) -> None:
        if (
            self.launcher is not None
            and self.launcher.stdin is not None
            and self.launcher.returncode is None
        ):
            with contextlib.suppress(Exception):
                self.launcher.stdin.write(word.encode() + b"\n")

    def interrupt_command(self) -> list[str]:
        """A command another local process (the ``--serve`` Jupyter server) runs with ``INT``
        on its stdin to interrupt this kernel as ``interrupt`` does: a relay to the kernel's
        supervisor, over this kernel's multiplexed connection. Its stdout carries the kernel's
        connection info (key included): discard it."""
        if self.remote_runtime is None or self.runtime_dir is None:
            raise KernelStartError(f"the kernel on {self.target.destination} is not running")
        remote = " ".join(
            shlex.quote(a) for a in (self.python, "-c", LAUNCHER, "attach", self.remote_runtime)
        )
        return [*self._base(), self.target.destination, remote]

    async def interrupt(self) -> None:
        self._tell("INT")
        if self.launcher is not None and self.launcher.stdin is not None:
            with contextlib.suppress(Exception):
                await self.launcher.stdin.drain()

    async def shutdown(self, *, now: bool = False) -> None:
        if (
            not now
            and self.kc is not None
            and self.launcher is not None
            and self.launcher.returncode is None
        ):
            with contextlib.suppress(Exception):
                self.kc.shutdown()
                await self._wait_exit(self.launcher, 5)
        await self.kill()

    async def kill(self) -> None:
        if self.kc is not None:
            with contextlib.suppress(Exception):
                self.kc.stop_channels()
            self.kc = None
        self._tell("KILL")
        if self.launcher is not None:
            if self.launcher.stdin is not None:
                with contextlib.suppress(Exception):
                    self.launcher.stdin.close()
            if not await self._wait_exit(self.launcher, 3):
                with contextlib.suppress(ProcessLookupError):
                    self.launcher.kill()
                await self._wait_exit(self.launcher, 1)
        if self.master is not None and self.master.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.master.terminate()
            if not await self._wait_exit(self.master, 3):
                with contextlib.suppress(ProcessLookupError):
                    self.master.kill()
        if self.runtime_dir is not None:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            self.runtime_dir = None
        self.connection_file = None
        self.launcher = self.master = None
