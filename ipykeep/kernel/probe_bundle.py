"""All of an execution's probe expressions as one user expression, and its reply split back.

IPython formats every ``user_expressions`` value with each display formatter (~0.25 ms an
expression on a plain kernel), so three probes a cell cost three formattings. Sent bundled,
the kernel's ``probe_all`` (``_inkernel/kernel_setup.py``) evaluates each expression in the
user's namespace, catches each failure on its own, and returns one JSON text whose entries
have the shape of ``user_expressions`` reply entries; ``split`` hands them back per key, so
observers read ``Execution.expression_results`` as before.

When the bundle itself yields nothing (the cell failed, so the kernel evaluated no
expressions, or the bundle's own call failed) the keys are absent, which observers already
treat as "ask again" (``StalenessService._probe_result``) or "no evidence".
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Mapping
from typing import Any

from ipykeep.kernel.inkernel import KERNEL_SETUP

log = logging.getLogger("ipykeep.kernel")

BUNDLE_KEY = "ipykeep_probes"


def bundle(expressions: Mapping[str, str]) -> dict[str, str]:
    """The user expressions to send for ``expressions``: one bundle when there are several."""
    if len(expressions) < 2:
        return dict(expressions)
    sources = dict(expressions)
    # the user's namespaces are passed as expressions, so this is not ``KERNEL_SETUP.call``
    probe_all = f'__import__("sys").modules[{KERNEL_SETUP.name!r}].probe_all'
    return {BUNDLE_KEY: f"{probe_all}({sources!r}, globals(), locals())"}


def split(sent: Mapping[str, str], results: Mapping[str, Any]) -> dict[str, Any]:
    """Per-expression result entries from a reply to ``bundle(sent)``'s expressions."""
    if len(sent) < 2:  # sent as they are (see ``bundle``)
        return dict(results)
    entry = results.get(BUNDLE_KEY)
    if not entry:
        return {}
    if entry.get("status") != "ok":
        log.warning("probe bundle failed: %s: %s", entry.get("ename"), entry.get("evalue"))
        return {}
    try:
        decoded = json.loads(ast.literal_eval(entry["data"]["text/plain"]))
    except (KeyError, ValueError, SyntaxError, TypeError) as exc:
        log.warning("probe bundle reply is not JSON text: %s", exc)
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {key: value for key, value in decoded.items() if key in sent and isinstance(value, dict)}
