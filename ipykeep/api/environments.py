"""Environments: adding packages to the environment a kernel runs in."""

from __future__ import annotations

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.records import Record
from ipykeep.api.spec import KernelParams, Method


class AddPackagesParams(KernelParams):
    packages: list[str] = Field(
        min_length=1, description="requirements, e.g. 'pandas>=2' (at least one)"
    )
    record: bool = Field(
        default=False,
        description="add to pyproject.toml too (default false)",
    )
    index_url: str | None = Field(default=None, description="default: the installer's")


class PackageChange(Record):
    name: str
    #: the version installed before (None: it was not installed)
    before: str | None = None
    #: the version installed after it (None: it was removed)
    after: str | None = None


class AddPackagesResult(Record):
    kernel_id: str
    #: "uv" (``uv pip install --python``) or "pip" (``python -m pip install``)
    installer: str
    python: str
    changed: list[PackageChange] = Field(default_factory=list)
    #: importable packages that were already imported and changed version: the kernel holds
    #: the old code until it is restarted
    restart_needed: list[str] = Field(default_factory=list)
    #: notebook cells that imported one of ``restart_needed`` (they ran with the old version)
    stale_cells: list[str] = Field(default_factory=list)
    #: where the requirements were recorded ("pyproject.toml"), or None
    recorded: str | None = None
    message: str
    #: the installer's full output (an artifact path)
    log: str | None = None


ADD_PACKAGES: Method[AddPackagesParams, AddPackagesResult] = Method(
    names.ADD_PACKAGES,
    AddPackagesParams,
    AddPackagesResult,
    KERNEL_LOOKUP + (e.INSTALL_FAILED, e.NOT_SUPPORTED, e.KERNEL_DIED, e.KERNEL_BUSY),
    "Install packages into the kernel's environment, importable without a restart.",
)
