"""Finds the Python environment a kernel runs in when no ``python`` setting names one.

The order (docs/environments.md says why): an explicit ``python`` setting; a ``.venv/`` or
``venv/`` at the project root; the active ``$VIRTUAL_ENV``; a uv project's environment
(``$UV_PROJECT_ENVIRONMENT`` or ``.venv``); an activated conda environment (``$CONDA_PREFIX``,
not ``base``); the interpreter running ipykeep. A discovered environment without ipykernel is
refused with the exact command that adds it, unless ``install_kernel = true``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ipykeep.api.errors import ConfigError, KernelStartError
from ipykeep.api.records import EnvironmentInfo
from ipykeep.platform import system
from ipykeep.project.config import Config, resolve_python

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - Python 3.10
    import tomlkit as _toml


#: where an environment keeps its packages, relative to its prefix (POSIX, then Windows)
SITE_PACKAGES = ("lib/python3*/site-packages", "Lib/site-packages")


def env_python(prefix: Path) -> Path:
    """The interpreter of the environment at ``prefix`` (venv and conda layouts)."""
    return prefix / "Scripts" / "python.exe" if system.IS_WINDOWS else prefix / "bin" / "python"


def _in_site_packages(prefix: Path, package: str) -> bool:
    return any(any(prefix.glob(f"{site}/{package}/__init__.py")) for site in SITE_PACKAGES)


def is_uv_project(root: Path) -> bool:
    """``uv.lock`` at the root, or a ``[tool.uv]`` table in its pyproject.toml."""
    if (root / "uv.lock").is_file():
        return True
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        data = _toml.loads(pyproject.read_text(encoding="utf-8"))
    except Exception as exc:
        raise ConfigError(f"{pyproject}: not valid TOML ({exc})", hint=f"fix {pyproject}") from exc
    tool = data.get("tool")
    return isinstance(tool, Mapping) and "uv" in tool


def _venv_at(path: Path) -> bool:
    return env_python(path).exists()


def _found(kind: str, prefix: Path, why: str, uv: bool) -> EnvironmentInfo:
    return EnvironmentInfo(
        kind=kind,  # type: ignore[arg-type]
        python=str(env_python(prefix)),
        prefix=str(prefix),
        why=why,
        uv_project=uv,
    )


def discover(
    root: Path, config: Config, environ: Mapping[str, str] | None = None
) -> EnvironmentInfo:
    """The environment a local kernel of the project at ``root`` runs in, and why."""
    env = os.environ if environ is None else environ
    uv = is_uv_project(root)
    if config.python is not None:
        python = resolve_python(config.python, root)
        prefix = Path(python).parent.parent
        return EnvironmentInfo(
            kind="setting",
            python=python,
            prefix=str(prefix) if (prefix / "pyvenv.cfg").is_file() else None,
            why=f"the python setting ({config.python})",
            uv_project=uv,
        )
    for name in (".venv", "venv"):
        if _venv_at(root / name):
            return _found("project_venv", root / name, f"project {name} at {root / name}", uv)
    active = env.get("VIRTUAL_ENV")
    if active and _venv_at(Path(active)):
        return _found("virtual_env", Path(active), f"the active VIRTUAL_ENV ({active})", uv)
    if uv:
        target = Path(env.get("UV_PROJECT_ENVIRONMENT") or ".venv")
        target = target if target.is_absolute() else root / target
        if _venv_at(target):
            return _found("uv_project", target, f"the uv project's environment {target}", uv)
        raise KernelStartError(
            f"{root} is a uv project but its environment {target} does not exist",
            hint=f"run `uv add --dev ipykernel` in {root} (creates it with ipykernel), "
            "or set python in ipykeep.toml",
        )
    conda = env.get("CONDA_PREFIX")
    if conda and env.get("CONDA_DEFAULT_ENV") != "base" and _venv_at(Path(conda)):
        return _found("conda", Path(conda), f"the active conda environment ({conda})", uv)
    return EnvironmentInfo(
        kind="ipykeep",
        python=sys.executable,
        prefix=sys.prefix,
        why="the interpreter running ipykeep (no project environment found)",
        uv_project=uv,
    )


def has_ipykernel(info: EnvironmentInfo) -> bool:
    """Whether the environment's site-packages holds ipykernel (a file check, no interpreter
    started; a venv that also sees system packages is not judged here: True)."""
    if info.prefix is None:
        return True
    prefix = Path(info.prefix)
    if _in_site_packages(prefix, "ipykernel"):
        return True
    cfg = prefix / "pyvenv.cfg"
    return cfg.is_file() and "include-system-site-packages = true" in cfg.read_text("utf-8")


def kernel_fix(info: EnvironmentInfo) -> str:
    """The command that adds ipykernel to the environment."""
    if info.uv_project and info.kind in ("project_venv", "uv_project"):
        return "uv add --dev ipykernel"
    prefix = Path(info.prefix or Path(info.python).parent.parent)
    if _in_site_packages(prefix, "pip"):
        return f"{info.python} -m pip install ipykernel"
    return f"uv pip install --python {info.python} ipykernel"


def missing_kernel_error(info: EnvironmentInfo) -> KernelStartError:
    return KernelStartError(
        f"the kernel's environment {info.prefix} ({info.why}) has no ipykernel",
        hint=f"run: {kernel_fix(info)}  (or set install_kernel = true in ipykeep.toml to let "
        "ipykeep install it, or python = ... to use another interpreter)",
        details={"fix": kernel_fix(info), "environment": info.prefix},
    )
