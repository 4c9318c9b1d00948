"""Inspection: bounded summaries of live variables, and the namespace listing."""

from __future__ import annotations

from pydantic import Field

from ipykeep.api import error_codes as e
from ipykeep.api import names
from ipykeep.api.kernels import KERNEL_LOOKUP
from ipykeep.api.spec import KernelParams, Method
from ipykeep.api.summaries import NamespaceListing, Summary


class InspectParams(KernelParams):
    name: str = Field(description='a variable, or a safe path like model.coef_ or df["col"]')


_PROBES = KERNEL_LOOKUP + (e.KERNEL_BUSY, e.KERNEL_DIED, e.TIMEOUT, e.EXECUTION_LOST)

INSPECT: Method[InspectParams, Summary] = Method(
    names.INSPECT,
    InspectParams,
    Summary,
    _PROBES + (e.UNKNOWN_NAME,),
    "Summary of a variable: type, shape, dtypes, stats, preview.",
)
NAMESPACE: Method[KernelParams, NamespaceListing] = Method(
    names.NAMESPACE,
    KernelParams,
    NamespaceListing,
    _PROBES,
    "Variables with type, size and defining cell.",
)
