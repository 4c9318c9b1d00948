"""The public surface: what ``ipykeep`` and ``ipykeep.api`` export, pinned (a change is on
purpose, and shows in this file's diff)."""

from __future__ import annotations

import importlib
import pkgutil

import ipykeep
import ipykeep.api


def test_ipykeep_exports() -> None:
    assert ipykeep.__all__ == ["__version__"]
    assert all(hasattr(ipykeep, name) for name in ipykeep.__all__)


def test_api_exports_its_modules() -> None:
    assert ipykeep.api.__all__ == [
        "bounding",
        "checkpoints",
        "debugger",
        "editing",
        "environments",
        "error_codes",
        "errors",
        "execution",
        "inspection",
        "kernels",
        "methods",
        "names",
        "records",
        "serve",
        "spec",
        "staleness",
        "summaries",
    ]
    modules = sorted(m.name for m in pkgutil.iter_modules(ipykeep.api.__path__))
    assert ipykeep.api.__all__ == modules  # every module of the contract is public, no other name
    for name in ipykeep.api.__all__:
        importlib.import_module(f"ipykeep.api.{name}")
