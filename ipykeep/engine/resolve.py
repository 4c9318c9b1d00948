"""Resolving what callers name: notebook and working-directory paths, where a kernel runs, and
unknown kernel ids."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from ipykeep.api.errors import RemoteNotSupportedError, UsageError
from ipykeep.kernel.driver import KernelProcess
from ipykeep.kernel.prestart import KernelPool
from ipykeep.kernel.providers import KernelProvider, LaunchSpec, make_provider
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths


def notebook_path(notebook: str) -> Path:
    """An absolute, resolved path from what a caller typed (relative to the daemon's cwd)."""
    if "\0" in notebook:
        raise UsageError(f"not a path: {notebook!r}", hint="pass the path of a file or directory")
    path = Path(notebook).expanduser()
    if not path.is_absolute():
        path = Path(os.getcwd()) / path
    return path.resolve()


def resolve_cwd(paths: ProjectPaths, cwd: str | None, notebook: Path | None) -> Path:
    """A kernel's working directory: the notebook's, or ``cwd`` inside the project."""
    if notebook is not None:
        return notebook.parent
    if cwd is None:
        return paths.root
    if "://" in cwd:
        raise RemoteNotSupportedError(
            f"remote working directories are not supported: {cwd}",
            hint="use ssh://user@host/path for a kernel over SSH, "
            "or gateway=URL for a Jupyter server",
        )
    path = notebook_path(cwd)
    root = paths.root.resolve()
    if path != root and root not in path.parents:
        raise UsageError(
            f"cwd {path} is outside the project {root}",
            hint="use a directory inside the project, or start ipykeep from the other project",
        )
    if not path.is_dir():
        raise UsageError(f"cwd {path} is not a directory", hint="create it first or pick another")
    return path


def kernel_process(
    kernel_id: str,
    config: Config,
    work_dir: Path,
    remote: str | None,
    pool: KernelPool | None = None,
    launch_with: Callable[[LaunchSpec], KernelProvider] | None = None,
) -> KernelProcess:
    """The (not yet started) kernel process, on the provider the config and location name;
    a local kernel starts from ``pool``'s spares when it has any. ``launch_with`` makes the
    provider instead (a fork of another kernel's process)."""
    python = config.python or sys.executable  # the engine has resolved it by now
    launch = LaunchSpec(
        name=kernel_id,
        python=python,
        dataflow=config.dataflow,
        cwd=work_dir,
        ipython_history=config.ipython_history,
    )
    provider: KernelProvider
    if launch_with is not None:
        provider = launch_with(launch)
    elif (
        pool is not None and pool.size > 0 and remote is None and config.kernel_provider == "local"
    ):
        provider = pool.provider(launch)
    else:
        provider = make_provider(launch, config, location=remote)
    return KernelProcess(
        python=python,
        dataflow=config.dataflow,
        cwd=work_dir,
        name=kernel_id,
        provider=provider,
    )
