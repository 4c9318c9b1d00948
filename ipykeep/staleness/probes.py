"""Host side of the staleness probes: the calls sent into kernels and how to read the replies.

A probe is a module from ``_inkernel/``, declared in the in-kernel registry
(``ipykeep.kernel.inkernel``: ``FILETRACK``, ``STATEMON`` and the helpers it requires), which
installs it once per kernel (silent, no history). The engine then evaluates the expressions
built here as ``user_expressions`` of silent executions. A reply's
``user_expressions[key]["data"]["text/plain"]`` is the repr of the JSON string the probe
returned; ``decode_expression_value`` turns it back into Python data.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ipykeep.kernel.inkernel import FILETRACK, STATEMON
from ipykeep.staleness.analysis_model import is_kernel_name
from ipykeep.staleness.errors import ProbeError
from ipykeep.staleness.models import FileStamp, Observed, captured_names
from ipykeep.staleness.process_state import is_pseudo_name


def decode_expression_value(entry: Mapping[str, Any]) -> Any:
    """Python data from one ``user_expressions`` entry whose expression returned JSON text."""
    status = entry.get("status")
    if status != "ok":
        ename = entry.get("ename", "error")
        evalue = entry.get("evalue", "")
        raise ProbeError(
            f"an in-kernel probe failed: {ename}: {evalue}",
            hint="the probe module may not be installed in this kernel; install it again",
        )
    try:
        text = ast.literal_eval(entry["data"]["text/plain"])
        return json.loads(text)
    except (KeyError, ValueError, SyntaxError, TypeError) as exc:
        raise ProbeError(
            f"an in-kernel probe returned something that is not JSON text: {exc}",
            hint="the kernel may run an incompatible probe version; restart the kernel",
        ) from exc


def check_protocol(payload: Mapping[str, Any], expected: int, what: str) -> None:
    got = payload.get("protocol")
    if got != expected:
        raise ProbeError(
            f"the {what} probe in the kernel speaks protocol {got}, expected {expected}",
            hint="install the probe again (the kernel holds an older copy)",
        )


# ----------------------------------------------------------------------------- filetrack


def filetrack_install_expr(root: str) -> str:
    return FILETRACK.call("install", root)


def filetrack_begin_expr() -> str:
    return FILETRACK.call("begin")


def filetrack_end_expr() -> str:
    return FILETRACK.call("end")


def filetrack_collect_expr() -> str:
    """Files touched since the last collect, collection going on (see ``filetrack.collect``)."""
    return FILETRACK.call("collect")


def parse_filetrack_end(payload: Mapping[str, Any]) -> tuple[FileStamp, ...]:
    """The files a cell read, from the decoded reply of ``end()``."""
    check_protocol(payload, FILETRACK.protocol, "file tracking")
    files: Iterable[Mapping[str, Any]] = payload.get("files", [])
    return tuple(FileStamp(str(f["path"]), f.get("mtime_ns"), f.get("size")) for f in files)


def parse_filetrack_written(payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The paths a cell opened for writing, from the decoded reply of ``end()``."""
    check_protocol(payload, FILETRACK.protocol, "file tracking")
    return tuple(str(p) for p in payload.get("written", []))


def filetrack_stat_expr(paths: Iterable[str]) -> str:
    """Stamps of ``paths`` as the kernel sees them (see ``filetrack.stat_many``)."""
    return FILETRACK.call("stat_many", list(paths))


def parse_filetrack_stamps(payload: Mapping[str, Any]) -> tuple[FileStamp, ...]:
    """The stamps of ``stat_many``, in the order asked (missing files have no mtime)."""
    check_protocol(payload, FILETRACK.protocol, "file tracking")
    stamps: Iterable[Mapping[str, Any]] = payload.get("stamps", [])
    return tuple(FileStamp(str(f["path"]), f.get("mtime_ns"), f.get("size")) for f in stamps)


# ----------------------------------------------------------------------------- statemon


def statemon_install_expr() -> str:
    return STATEMON.call("install")


def statemon_collect_expr() -> str:
    """What the last execution did to the namespace (see ``statemon.collect``)."""
    return STATEMON.call("collect")


def parse_statemon(payload: Mapping[str, Any]) -> Observed | None:
    """Runtime evidence from the decoded reply of ``collect()``; None when there is none."""
    check_protocol(payload, STATEMON.protocol, "namespace observation")
    if not payload.get("available") or payload.get("truncated"):
        return None  # a partial diff would pass for proof that the rest did not change

    def names(key: str) -> frozenset[str]:
        return frozenset(n for n in map(str, payload.get(key, [])) if not is_kernel_name(n))

    return Observed(
        bound=names("bound"),
        mutated=names("mutated"),
        deleted=names("deleted"),
        opaque=names("opaque"),
        states={str(k): str(v) for k, v in (payload.get("states") or {}).items()},
        read=frozenset(n for n in map(str, payload.get("read", [])) if is_pseudo_name(n)),
        uncompared=names("uncompared"),
        captured=(
            None
            if (held := captured_names(payload.get("captured", {}))) is None
            else {k: v for k, v in held.items() if not is_kernel_name(k)}
        ),
    )


def forget_modules_expr(paths: Iterable[str]) -> str:
    """An expression dropping from ``sys.modules`` the modules loaded from ``paths`` (absolute);
    returns their names as JSON."""
    wanted = sorted(set(paths))
    return (
        "(lambda sys, os, json: json.dumps([n for n, m in list(sys.modules.items()) "
        "if isinstance(getattr(m, '__file__', None), str) "
        f"and os.path.normpath(os.path.abspath(m.__file__)) in {wanted!r} "
        "and sys.modules.pop(n, None) is not None]))"
        "(__import__('sys'), __import__('os'), __import__('json'))"
    )
