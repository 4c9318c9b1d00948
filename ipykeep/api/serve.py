"""Serving: hosting a kernel in the project's Jupyter server, publishing a live view, and
attaching a terminal console to the kernel."""

from __future__ import annotations

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import KernelRecord, Record
from ipykeep.api.spec import KernelParams, Method


class PublishParams(KernelParams):
    #: cell id or 0-based index -> caption to highlight
    cells: dict[str, str] | None = Field(default=None, description="cell id or index -> caption")
    tunnel: bool = Field(
        default=False,
        description="public URL through a cloudflared tunnel (default false)",
    )


class ConsoleParams(KernelParams):
    history: int = Field(
        default=10, ge=0, le=200, description="recent executions to return (default 10)"
    )


class ConsoleEntry(Record):
    """One recent execution: its code and (bounded) output."""

    handle: str
    kind: str
    state: str
    code: str
    output: str = ""
    cell_id: str | None = None


class ConsoleInfo(Record):
    """Where a console attaches to the kernel (its connection file), and what ran lately."""

    kernel_id: str
    connection_file: str
    notebook: str | None = None
    history: list[ConsoleEntry] = Field(default_factory=list)


class PublishResult(Record):
    url: str
    kernel_id: str
    path: str


_HOSTING = KERNEL_LOOKUP + (e.MISSING_EXTRA, e.SERVE_FAILED)

SERVE: Method[KernelParams, KernelRecord] = Method(
    names.SERVE,
    KernelParams,
    KernelRecord,
    _HOSTING,
    "Host the kernel in the project's Jupyter server.",
)
UNSERVE: Method[KernelParams, KernelRecord] = Method(
    names.UNSERVE,
    KernelParams,
    KernelRecord,
    KERNEL_LOOKUP + (e.SERVE_FAILED,),
    "Detach the kernel from the Jupyter server.",
)
PUBLISH: Method[PublishParams, PublishResult] = Method(
    names.PUBLISH,
    PublishParams,
    PublishResult,
    _HOSTING + (e.TUNNEL_FAILED, e.UNKNOWN_CELL, e.NOTEBOOK_INVALID),
    "URL of a read-only JupyterLab view of the notebook for a person.",
)
CONSOLE: Method[ConsoleParams, ConsoleInfo] = Method(
    names.CONSOLE,
    ConsoleParams,
    ConsoleInfo,
    KERNEL_LOOKUP + (e.NOT_SUPPORTED,),
    "The kernel's connection file for a terminal console on the same kernel, and its recent"
    " executions (code and bounded output).",
)
