"""The list of kernels the Jupyter server must host, shared by the daemon and the server.

The daemon writes it (0600, atomically) and asks the server to re-read it; the server adopts
what is new, re-adopts what changed (a kernel restarted by ipykeep has a new connection file)
and lets go of what is gone. Standard library only: both processes import it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ipykeep.project.atomic import atomic_write_text


@dataclass(frozen=True)
class AdoptedKernel:
    #: the id Jupyter knows the kernel by (a UUID: Jupyter's URLs only route UUIDs)
    server_id: str
    #: ipykeep's id (``k1``), shown as the kernel's display name
    kernel_id: str
    connection_file: str
    #: the local kernel process (0 for a kernel on an SSH host: see ``interrupt_command``)
    pid: int
    #: notebook paths relative to the server's root dir that get a session bound to this kernel
    session_paths: tuple[str, ...] = ()
    #: how a remote kernel is interrupted: a command run with ``INT`` on its stdin
    interrupt_command: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["session_paths"] = list(self.session_paths)
        data["interrupt_command"] = list(self.interrupt_command)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AdoptedKernel:
        return cls(
            server_id=str(data["server_id"]),
            kernel_id=str(data["kernel_id"]),
            connection_file=str(data["connection_file"]),
            pid=int(data["pid"]),
            session_paths=tuple(str(p) for p in data.get("session_paths", ())),
            interrupt_command=tuple(str(a) for a in data.get("interrupt_command", ())),
        )


@dataclass(frozen=True)
class AdoptionSpec:
    daemon_pid: int
    kernels: tuple[AdoptedKernel, ...] = field(default_factory=tuple)
    #: an extra browser origin allowed on the websocket (a tunnel's public URL), if any
    origin: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "daemon_pid": self.daemon_pid,
            "kernels": [k.to_json() for k in self.kernels],
            "origin": self.origin,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AdoptionSpec:
        return cls(
            daemon_pid=int(data["daemon_pid"]),
            kernels=tuple(AdoptedKernel.from_json(k) for k in data.get("kernels", [])),
            origin=data.get("origin"),
        )


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only."""
    atomic_write_text(path, json.dumps(data), mode=0o600)


def write_spec(path: Path, spec: AdoptionSpec) -> None:
    write_private_json(path, spec.to_json())


def read_spec(path: Path) -> AdoptionSpec:
    return AdoptionSpec.from_json(json.loads(path.read_text(encoding="utf-8")))
