"""The environment service: picks each local kernel's environment, gives kernels
``import_path``, and serves ``add_packages`` (install into the kernel's own environment).

Installing runs inside the kernel (``_inkernel/envtools.py``), so it targets exactly the
interpreter the kernel runs, on the host it runs on (an SSH kernel installs on its host); a
gateway kernel is refused (the gateway owns its image). Every install is an event in the
kernel's record; packages that were imported and changed version are reported with the cells
that imported them, since the kernel keeps their old code until it restarts.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipykeep.api import environments as environments_api
from ipykeep.api.environments import AddPackagesResult, PackageChange
from ipykeep.api.errors import InstallError, KernelBusyError, RemoteNotSupportedError
from ipykeep.api.records import EnvironmentInfo
from ipykeep.api.spec import Bindings, bind
from ipykeep.engine.engine import Engine
from ipykeep.engine.observer import SessionObserver
from ipykeep.engine.readonly import is_read_only
from ipykeep.engine.session import KernelSession
from ipykeep.environments import discovery, installer
from ipykeep.kernel.inkernel import ENVTOOLS, InKernelModule
from ipykeep.kernel.providers.base import DataflowMode
from ipykeep.project.config import Config

log = logging.getLogger("ipykeep.environments")

#: seconds one install may take inside a kernel
INSTALL_TIMEOUT_S = 900.0

#: why nothing is installed into a gateway kernel (also what its ``import_path`` says)
GATEWAY_REFUSAL = "the kernel runs behind a Jupyter gateway, whose image owns its environment"

ImportingCells = Callable[[KernelSession, frozenset[str]], list[str]]
#: told when packages were installed into a kernel's environment (failed cells may succeed now)
PackagesInstalled = Callable[[KernelSession], None]


class EnvironmentService(SessionObserver):
    def __init__(
        self,
        engine: Engine,
        importing_cells: ImportingCells,
        packages_installed: PackagesInstalled | None = None,
    ) -> None:
        self.engine = engine
        self.importing_cells = importing_cells
        self.packages_installed = packages_installed

    # -- choosing the environment (the engine asks before it starts a local kernel) ----------
    async def environment_for(self, config: Config) -> EnvironmentInfo:
        info = discovery.discover(self.engine.paths.root, config)
        if info.kind in ("setting", "ipykeep") or discovery.has_ipykernel(info):
            return info
        if not config.install_kernel:
            raise discovery.missing_kernel_error(info)
        logs = self.engine.paths.root / ".ipykeep" / "installs"
        result = await installer.install_with(info.python, ["ipykernel"], logs)
        if not result.get("ok"):
            raise installer.failure(result, f"installing ipykernel into {info.prefix} failed")
        log.info("installed ipykernel into %s (install_kernel = true)", info.prefix)
        return info

    # -- observer events ---------------------------------------------------------------------
    def kernel_helpers(self, dataflow: DataflowMode) -> tuple[InKernelModule, ...]:
        return (ENVTOOLS,)

    async def kernel_started(self, session: KernelSession) -> None:
        await self._install_helper(session)

    async def kernel_restarted(self, session: KernelSession) -> None:
        await self._install_helper(session)

    async def _install_helper(self, session: KernelSession) -> None:
        proc = session.process
        await proc.install(*self.kernel_helpers(proc.dataflow))
        local = proc.provider.kind == "local"
        logs = str(self._log_dir(session)) if local else None
        refused = GATEWAY_REFUSAL if proc.provider.kind == "gateway" else None
        configure = ENVTOOLS.call(
            "configure", installer.find_uv() if local else None, logs, refused
        )
        # one request: both calls answer JSON text, evaluated left to right
        await proc.eval_silent(
            f"__import__('json').dumps([{configure}, {ENVTOOLS.call('expose')}])", decode=False
        )

    def cell_expressions(self, session: KernelSession, cell: Any) -> dict[str, str]:
        return {"ipykeep_env": ENVTOOLS.call("take_events")}

    def scratch_expressions(self, session: KernelSession, code: str) -> dict[str, str]:
        # code that calls nothing cannot reach import_path: no install to collect
        return {} if is_read_only(code) else {"ipykeep_env": ENVTOOLS.call("take_events")}

    async def after_cell(self, session: KernelSession, cell: Any, ex: Any) -> None:
        self._record_kernel_installs(session, ex)

    async def after_scratch(self, session: KernelSession, ex: Any, origin: str = "scratch") -> None:
        self._record_kernel_installs(session, ex)

    def _record_kernel_installs(self, session: KernelSession, ex: Any) -> None:
        """Installs ``import_path`` did during the execution, into the kernel's record."""
        raw = (ex.expression_results or {}).get("ipykeep_env")
        if not raw or raw.get("status") != "ok":
            return  # the code failed: the kernel evaluated no expression
        try:
            events = json.loads(ast.literal_eval(raw["data"]["text/plain"]))
        except (KeyError, ValueError, SyntaxError, TypeError):
            return
        for event in events or ():
            session.archive.append_event("packages_installed", by=ex.handle, **event)
        if events and self.packages_installed is not None:
            self.packages_installed(session)

    # -- add_packages ------------------------------------------------------------------------
    def _log_dir(self, session: KernelSession) -> Path:
        return session.archive.dir / "installs"

    async def add_packages(
        self,
        packages: list[str],
        record: bool = False,
        index_url: str | None = None,
        kernel_id: str | None = None,
        notebook: str | None = None,
    ) -> AddPackagesResult:
        session = self.engine.live(kernel_id, notebook)
        kind = session.process.provider.kind
        if kind == "gateway":
            raise RemoteNotSupportedError(
                f"kernel {session.kernel_id}: {GATEWAY_REFUSAL}; ipykeep does not install into it",
                hint="add the packages to the gateway's kernel image, or use a local or SSH kernel",
            )
        bad = [p for p in packages if not p.strip() or p.strip().startswith("-")]
        if bad:
            raise InstallError(
                f"not a requirement: {bad[0]!r}",
                hint="name packages as requirements (six, 'iniconfig>=2'), not options",
            )
        uv_project = kind == "local" and discovery.is_uv_project(self.engine.paths.root)
        if record and uv_project and installer.find_uv() is None:
            raise InstallError(
                "record=true needs uv to run `uv add`, and uv is not installed",
                hint="install uv (`pip install uv`), or add without record",
            )
        if session.scheduler.main_lock.locked():
            # installing under a running cell would change its environment mid-run
            raise KernelBusyError(
                f"kernel {session.kernel_id} is running notebook cells",
                hint="add the packages when they finish (list_kernels shows what runs)",
            )
        async with session.scheduler.main_lock:
            raw = await session.process.eval_silent(
                ENVTOOLS.call("install", packages, index_url, INSTALL_TIMEOUT_S),
                timeout=INSTALL_TIMEOUT_S + 30,
            )
        result: dict[str, Any] = raw if isinstance(raw, dict) else json.loads(raw)
        if not result.get("ok"):
            if result.get("error") == "refused":
                raise InstallError(
                    f"refused to install into kernel {session.kernel_id}'s interpreter: "
                    f"{result.get('message')}",
                    hint="run the kernel in a virtual environment (a project .venv, or the "
                    "python setting), see docs/environments.md",
                )
            raise installer.failure(result, f"installing {', '.join(packages)} failed")
        changed = [PackageChange.model_validate(c) for c in result.get("changed", [])]
        if changed and self.packages_installed is not None:
            self.packages_installed(session)
        restart = list(result.get("restart_needed", []))
        stale = (
            self.importing_cells(session, frozenset(result.get("modules", []))) if restart else []
        )
        recorded = None
        try:
            if record and uv_project:
                await installer.record_with_uv(
                    self.engine.paths.root, packages, Path(result["log"]), index_url
                )
                recorded = "pyproject.toml"
        finally:  # installed is installed, recorded or not: the kernel's record says so
            session.archive.append_event(
                "packages_installed",
                requirements=packages,
                changed=[c.dump() for c in changed],
                restart_needed=restart,
                recorded=recorded,
            )
        if restart:
            session.notices.append(
                f"{', '.join(restart)} changed version while imported: the kernel holds the old "
                "code until `ipykeep restart` (then run-stale re-runs what is needed)"
                + (f"; cells that imported it: {', '.join(stale)}" if stale else "")
            )
        return AddPackagesResult(
            kernel_id=session.kernel_id,
            installer=str(result.get("installer")),
            python=str(result.get("python")),
            changed=changed,
            restart_needed=restart,
            stale_cells=stale,
            recorded=recorded,
            message=_summary(changed, restart, record, recorded),
            log=result.get("log"),
        )

    def bindings(self) -> Bindings:
        return (bind(environments_api.ADD_PACKAGES, self.add_packages),)


def _summary(
    changed: list[PackageChange], restart: list[str], record: bool, recorded: str | None
) -> str:
    parts = [
        ", ".join(
            f"{c.name} {c.before or '(new)'} -> {c.after}" if c.before else f"{c.name} {c.after}"
            for c in changed
        )
        or "nothing changed (already installed)"
    ]
    parts.append(
        f"restart the kernel to use the new {', '.join(restart)}"
        if restart
        else "importable now, no restart needed"
    )
    if record:
        parts.append(
            f"recorded in {recorded}"
            if recorded
            else "recorded nowhere: the project is not a uv project (add them to its "
            "requirements yourself)"
        )
    return "; ".join(parts)
