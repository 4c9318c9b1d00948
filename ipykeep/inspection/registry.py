"""``summarizer`` for notebooks whose kernel can import ipykeep.

Custom summarizers live in the in-kernel module ``_ipykeep_inspect`` (see
``_inkernel/summarize.py``), because the kernel may run in an environment without ipykeep.
Two spellings register into that one registry:

* ``from _ipykeep_inspect import summarizer`` works in any kernel ipykeep drives, once the
  engine has installed the module (it does so before the first inspection);
* ``from ipykeep.inspection import summarizer`` works when ipykeep is importable in the kernel,
  and installs the module itself when the engine has not done so yet. The engine's later install
  sees the same source and keeps it, or adopts the registrations when the source differs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from ipykeep.kernel.inkernel import INSPECT, install_expression


def inkernel_module() -> types.ModuleType:
    """The in-kernel module of this process, installed from ipykeep's copy when missing."""
    module = sys.modules.get(INSPECT.name)
    if module is not None and hasattr(module, "summarizer"):
        return module  # the engine's copy, even from another ipykeep version: register into it
    eval(install_expression(INSPECT), {})  # the same install the engine sends
    return sys.modules[INSPECT.name]


def summarizer(
    match: Any, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(obj) -> dict | None`` as the summary of objects selected by ``match``.

    ``match`` is a type, a tuple of types, a dotted type name or a predicate. The function's
    dict goes into the summary's ``custom`` field (a ``"kind"`` key sets the summary's kind);
    returning None passes to the next summarizer.
    """
    register: Callable[[Callable[..., Any]], Callable[..., Any]]
    register = inkernel_module().summarizer(match, name)
    return register
