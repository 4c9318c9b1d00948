"""What the engine sends into a kernel to inspect variables, and how it reads the answers.

Protocol, for the engine:

1. Once per kernel (and again after a restart), install the in-kernel module, declared as
   ``ipykeep.kernel.inkernel.INSPECT``, silently through ``user_expressions``. The install
   executes its source into a fresh module stored as ``sys.modules[INSPECT.name]`` (keeping
   summarizers registered in an older copy). It is an expression, so no name is bound in the
   user's globals; it does nothing when the same source is already installed.
2. Evaluate :func:`inspect_expression` or :func:`namespace_expression` the same way
   (``silent=True, store_history=False``, code ``""``), take the ``user_expressions`` entry of
   the reply and pass it to :func:`decode_user_expression`, then to :func:`parse_inspect_reply`
   or :func:`parse_namespace_reply`.
3. When :func:`needs_install` says the answer came from a kernel without the module (restarted
   kernel), install and ask again.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ipykeep.api.summaries import NamespaceListing, Summary
from ipykeep.inspection.errors import BadPathError, InspectionError, UnknownVariableError
from ipykeep.kernel.inkernel import INSPECT, PROTOCOL_ATTR

_NOT_INSTALLED = "not_installed"


def _call(function: str, args: str) -> str:
    # Yields a recognisable JSON answer, not a KeyError, when the module is missing or stale.
    missing = json.dumps(
        {
            "protocol": INSPECT.protocol,
            "ok": False,
            "error": {
                "code": _NOT_INSTALLED,
                "message": "the inspection module is not installed in this kernel",
            },
        }
    )
    return (
        f"(lambda m: m.{function}({args}) "
        f"if getattr(m, {PROTOCOL_ATTR!r}, None) == {INSPECT.protocol} else {missing!r})"
        f"(__import__('sys').modules.get({INSPECT.name!r}))"
    )


def inspect_expression(
    name: str,
    budget_s: float = 5.0,
    summarizers: list[str] | None = None,
    cell_of: dict[str, str] | None = None,
) -> str:
    """Expression summarizing ``name`` (a variable or a safe path like ``df["col"]``)."""
    args = f"{name!r}, {float(budget_s)!r}, {list(summarizers or [])!r}, {dict(cell_of or {})!r}"
    return _call("inspect_json", args)


def namespace_expression(budget_s: float = 5.0, cell_of: dict[str, str] | None = None) -> str:
    """Expression listing the kernel's user variables."""
    return _call("namespace_json", f"{float(budget_s)!r}, {dict(cell_of or {})!r}")


def decode_user_expression(entry: dict[str, Any]) -> str:
    """The JSON text from one ``user_expressions`` reply entry (``{"status", "data"}``)."""
    if entry.get("status") != "ok":
        raise InspectionError(
            "inspection call failed in the kernel: "
            f"{entry.get('ename', '?')}: {entry.get('evalue', '')}",
            hint="re-install the inspection module and retry",
        )
    text = entry.get("data", {}).get("text/plain")
    if not isinstance(text, str):
        raise InspectionError(
            "inspection reply has no text/plain value", hint="retry the inspection"
        )
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise InspectionError("inspection reply is not a string", hint="retry the inspection")
    return value


def needs_install(json_text: str) -> bool:
    """True when the answer says the module is missing (fresh or restarted kernel)."""
    try:
        payload = json.loads(json_text)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("error", {}).get("code") == _NOT_INSTALLED


def _payload(json_text: str) -> dict[str, Any]:
    try:
        payload = json.loads(json_text)
    except ValueError as exc:
        raise InspectionError(
            f"inspection reply is not JSON: {exc}", hint="retry the inspection"
        ) from None
    if not isinstance(payload, dict):
        raise InspectionError("inspection reply is not a JSON object", hint="retry the inspection")
    if payload.get("protocol") != INSPECT.protocol:
        raise InspectionError(
            f"inspection protocol mismatch: kernel speaks {payload.get('protocol')!r}, "
            f"ipykeep expects {INSPECT.protocol}",
            hint="re-install the inspection module",
        )
    if payload.get("ok"):
        return payload
    error = payload.get("error") or {}
    code, message = error.get("code"), str(error.get("message", "inspection failed"))
    matches = [str(m) for m in error.get("matches") or []]
    if code == "unknown_name":
        hint = (
            f"did you mean: {', '.join(matches)}?"
            if matches
            else "list variables with namespace (`ipykeep namespace`)"
        )
        raise UnknownVariableError(
            message, hint=hint, details={"name": error.get("name"), "matches": matches}
        )
    if code == "bad_expression":
        raise BadPathError(
            message, hint='use a name, attributes and constant keys, e.g. df["col"] or model.coef_'
        )
    if code == _NOT_INSTALLED:
        raise InspectionError(
            message,
            hint="install it and retry",
            details={"reason": _NOT_INSTALLED},
        )
    raise InspectionError(
        message, hint="this is a bug in ipykeep's inspection; the kernel is unaffected"
    )


def parse_inspect_reply(json_text: str) -> Summary:
    """The summary, or the error it carries (UnknownVariableError with close matches,
    BadPathError)."""
    return Summary.model_validate(_payload(json_text)["summary"])


def parse_namespace_reply(json_text: str) -> NamespaceListing:
    return NamespaceListing.model_validate(_payload(json_text)["namespace"])
