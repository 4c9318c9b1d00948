"""``ipykeep checkpoint [NAME]``, ``ipykeep restore NAME``, ``ipykeep checkpoints``, ``ipykeep
fork`` and ``ipykeep fork-diff``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipykeep.api import names
from ipykeep.api.checkpoints import than_rerunning

# Imported for its side effect: it registers the checkpoint error codes that RPC replies carry.
from ipykeep.checkpoints import store as _store  # noqa: F401
from ipykeep.cli.output import echo, kernel_target
from ipykeep.client import checkpoint_words
from ipykeep.client.connection import connect
from ipykeep.client.summaries import human_bytes
from ipykeep.client.views import view


def _call(method: str, **params: object) -> dict[str, Any]:
    result: dict[str, Any] = connect(Path.cwd()).call(method, **params)
    return result


def _compact(res: dict[str, Any]) -> str:
    return json.dumps(res, separators=(",", ":"))


def render_listing(res: dict[str, Any]) -> str:
    if not res.get("enabled"):
        return f"checkpoints are off in {res['kernel_id']}: {res.get('reason') or 'not set up'}"
    cells = view(res.get("cells", []))
    lines = [
        f"kernel {res['kernel_id']}: checkpoint store {human_bytes(res.get('store_bytes', 0))}"
    ]
    if cells:
        lines.append(f"  {checkpoint_words.summary(cells)}")
    for c in cells:
        state = checkpoint_words.cell_state(c)
        if state == checkpoint_words.CHECKPOINTED:
            # (``values`` by key: as an attribute a dict's method answers)
            state += f", {human_bytes(c.bytes or 0)}: {', '.join(c.get('values') or []) or '-'}"
        why = "; ".join(f"{n}: {w}" for n, w in sorted((c.failed or {}).items()))
        lines.append(f"  cell {c.index} ({c.cell_id}): {state}" + (f" — {why}" if why else ""))
    for n in res.get("named", []):
        lines.append(f"  named {n['name']}: {n['values']} value(s), {human_bytes(n['bytes'])}")
    for m in res.get("memo", []):
        runs = m.get("runs", [])
        head = (
            f"  memo: cell {m['index']} ({m['cell_id']}): {len(runs)} stored run(s) of this source"
        )
        if m.get("not_memoized"):
            head += f"; its last run here is not memoized: {m['not_memoized']}"
        lines.append(head)
        for r in runs[:5]:
            at = time.strftime("%H:%M:%S", time.localtime(r["ran_at"])) if r.get("ran_at") else "?"
            what = human_bytes(r["bytes"]) if r.get("loadable") else "keys its readers only"
            now = ", matches now" if r.get("matches_now") else ""
            lines.append(
                f"    {at} ({r.get('kernel_id') or '?'}) key {r['key'][:12]}: "
                f"ran {r['run_s']:.2f} s, {what}{now}"
            )
    last = res.get("last_restore")
    if last:
        lines.append(
            f"  last restore: {len(last.get('restored', []))} cell(s) restored in "
            f"{last.get('restore_s', 0):.2f} s, {len(last.get('rerun', []))} re-run, "
            f"{than_rerunning(float(last.get('saved_s', 0)))} them"
        )
    return "\n".join(lines)


def _show(
    res: dict[str, Any], as_json: bool, headline: Callable[[], str], left: str, said: str
) -> None:
    """``res`` as JSON, or its ``headline`` then a line per name ``res[left]`` gives a reason
    for (the values the call could not handle), each introduced by ``said``."""
    if as_json:
        echo(_compact(res))
        return
    echo(headline())
    for n, why in sorted((res.get(left) or {}).items()):
        echo(f"  {said}: {n}: {why}")


def checkpoint(name: str | None, notebook: str | None, as_json: bool) -> int:
    res = _call(names.CHECKPOINT, name=name, **kernel_target(notebook))
    _show(
        res,
        as_json,
        lambda: (
            f"checkpoint {res['name']}: {len(res.get('values', []))} value(s), "
            f"{human_bytes(res.get('bytes', 0))} in {res.get('seconds', 0):.2f} s"
        ),
        "failed",
        "not saved",
    )
    return 0


def restore(name: str, notebook: str | None, as_json: bool) -> int:
    res = _call(names.RESTORE, name=name, **kernel_target(notebook))
    _show(
        res,
        as_json,
        lambda: (
            f"restored {len(res.get('restored', []))} value(s) from {res['name']} "
            f"in {res.get('seconds', 0):.2f} s"
            + (f"; deleted {', '.join(res['deleted'])}" if res.get("deleted") else "")
        ),
        "not_rolled_back",
        "not rolled back",
    )
    if res.get("still_lost") and not as_json:
        echo(f"  {res['still_lost']}")
    return 0


def checkpoints(notebook: str | None, as_json: bool) -> int:
    res = _call(names.CHECKPOINTS, **kernel_target(notebook))
    echo(_compact(res) if as_json else render_listing(res))
    return 0


def fork(name: str | None, notebook: str | None, as_json: bool) -> int:
    res = _call(names.FORK_KERNEL, name=name, **kernel_target(notebook))
    _show(
        res,
        as_json,
        lambda: (
            f"fork {res['kernel_id']} of {res['parent_kernel_id']}: {res['notebook']}, "
            f"{len(res.get('values', []))} variable(s) in {res.get('seconds', 0):.2f} s"
            + _fork_how(res)
        ),
        "not_copied",
        "not copied",
    )
    return 0


def _fork_how(res: dict[str, Any]) -> str:
    if res.get("how") == "process":
        return " (the kernel's process forked)"
    reason = res.get("fallback_reason")
    return " (through a checkpoint" + (f": {reason}" if reason else "") + ")"


def fork_diff(notebook: str | None, as_json: bool) -> int:
    res = _call(names.DIFF_FORK, **kernel_target(notebook))
    if as_json:
        echo(_compact(res))
        return 0
    echo(f"fork {res['kernel_id']} against its parent {res['parent_kernel_id']}:")
    for c in res.get("cells", []):
        echo(f"  cell {c['index']} ({c['cell_id']}): {c['change'].replace('_', ' ')}")
    for n in res.get("names", []):
        echo(f"  {n['name']}: {n['change'].replace('_', ' ')}")
    if not res.get("cells") and not res.get("names"):
        echo("  no difference")
    return 0
