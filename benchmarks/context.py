"""What every scenario receives: the run's mode and a pool of shared, long-lived sides.

Starting a kernel costs seconds, so the MCP servers and raw kernels that several scenarios use
the same way (round trip, output volume, context cost) are started once, on first use, and
closed when the whole run ends. They are entered and left in the run's one task, in order,
as anyio's cancel scopes require.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.rawkernel import KernelKind, RawKernel, raw_kernel
from benchmarks.sessions import Mcp, make_project, mcp_server

#: Where another checkout to set beside this one is named (its sources first on PYTHONPATH).
BEFORE_VARIABLE = "IPYKEEP_BENCH_BEFORE"


def before_checkout() -> Path | None:
    """The other checkout named by ``IPYKEEP_BENCH_BEFORE``, if any."""
    value = os.environ.get(BEFORE_VARIABLE, "").strip()
    return Path(value).expanduser().resolve() if value else None


def variant_env(variant: str) -> dict[str, str]:
    """Server settings a scenario can compare side by side (``Pool.mcp(variant=…)``):
    ``""`` is this checkout, ``"before"`` the one ``IPYKEEP_BENCH_BEFORE`` names."""
    if variant == "":
        return {}
    before = before_checkout()
    if variant == "before" and before is not None:
        return {"PYTHONPATH": str(before)}
    raise ValueError(f"unknown server variant {variant!r} (or {BEFORE_VARIABLE} is not set)")


@dataclass
class McpSide:
    mcp: Mcp
    kernel_id: str
    root: Path


@dataclass
class Pool:
    tmp: Path
    log_dir: Path
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    _mcp: dict[str, McpSide] = field(default_factory=dict)
    _raw: dict[str, RawKernel] = field(default_factory=dict)

    async def mcp(self, dataflow: str = "ipyflow", variant: str = "") -> McpSide:
        """An MCP server whose daemon runs kernels in ``dataflow`` mode, with a scratch kernel.

        ``variant`` names a server started with other settings (``variant_env``), in a project
        of its own.
        """
        key = f"{dataflow}{'-' + variant if variant else ''}"
        if key not in self._mcp:
            root = make_project(self.tmp / f"pool-mcp-{key}")
            log = self.log_dir / f"mcp-{key}.log"
            mcp = await self.stack.enter_async_context(
                mcp_server(root, dataflow=dataflow, log=log, env=variant_env(variant))
            )
            created = await mcp.call("create_kernel", {})
            self._mcp[key] = McpSide(mcp, created.data["kernel_id"], root)
        return self._mcp[key]

    async def raw(self, kind: KernelKind, options: tuple[str, ...] = ()) -> RawKernel:
        """A raw kernel of ``kind``, started with ``options`` (``raw_kernel``)."""
        key = " ".join((kind, *options))
        if key not in self._raw:
            self._raw[key] = await self.stack.enter_async_context(raw_kernel(kind, options=options))
        return self._raw[key]

    async def close(self) -> None:
        await self.stack.aclose()


@dataclass
class RunContext:
    quick: bool
    out: Path
    tmp: Path
    pool: Pool
    #: The test suite's check that every scenario still runs: quick sizes, one repetition, no
    #: warm-up rounds, and only the sides a scenario cannot do without (``--smoke``).
    smoke: bool = False

    def reps(self, full: int, quick: int = 1) -> int:
        if self.smoke:
            return min(quick, 1)
        return quick if self.quick else full

    def size(self, full: Any, quick: Any, smoke: Any = None) -> Any:
        if self.smoke and smoke is not None:
            return smoke
        return quick if self.quick else full

    def workdir(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp))
        return path

    @property
    def log_dir(self) -> Path:
        return self.pool.log_dir
