"""The notebook view's data: one kernel's cells, plan, latest outputs and state, as plain JSON.

Both front ends of the view build it here: the MCP App (``ui://ipykeep/notebook``, fetched by
the view through the app-only ``notebook_view`` tool) and ``ipykeep view`` (the same page
written with this snapshot embedded). The daemon is reached through ``call(method name,
params)``, so each front end passes its own client. Everything is bounded: a cell's output text
as the model sees it, a handful of images, a listing of the most recent outputs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ipykeep.api import names

#: ``(method name, params) -> the method's JSON result``.
Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

#: Whose read cursor the view's reads move (each read asks from offset 0, so it shows the
#: whole bounded output, and the agent's own cursor is never touched).
VIEW_READER = "notebook-view"
#: Cells whose output a snapshot carries (the most recently run ones).
MAX_OUTPUT_CELLS = 40
#: Images a snapshot embeds, and the largest one (bytes, base64) it embeds.
MAX_IMAGES = 8
MAX_IMAGE_B64 = 2_000_000
#: Characters of a cell's output text the view shows (the daemon bounds it for the model
#: already; this only keeps a listing of many cells small).
MAX_TEXT = 6000
#: Characters of an error's traceback the view shows under the failing line.
MAX_TRACEBACK = 3000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: IPython marks the failing line of each frame with an arrow: ``----> 3 x = 1 / 0``.
_ARROW = re.compile(r"^\s*-+>\s*(\d+)\s?(.*)$")


def failing_line(traceback: str) -> str | None:
    """The line the error was raised at (the last frame's arrow), e.g. ``3: x = 1 / 0``."""
    found = None
    for line in _ANSI.sub("", traceback).splitlines():
        match = _ARROW.match(line)
        if match:
            found = f"{match.group(1)}: {match.group(2).strip()}"
    return found


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    return text[:head] + "\n…\n" + text[-(limit - head) :], True


def _cell(raw: dict[str, Any]) -> dict[str, Any]:
    cell = {
        key: raw[key]
        for key in ("cell_id", "index", "cell_type", "state", "handle", "execution_count", "paused")
        if raw.get(key) is not None
    }
    cell["first_line"] = raw.get("first_line") or ""
    cell["reasons"] = [_reason(r) for r in raw.get("reasons") or []]
    return cell


def _reason(reason: dict[str, Any]) -> dict[str, str]:
    return {"kind": str(reason.get("kind", "")), "message": str(reason.get("message", ""))}


def _plan(raw: dict[str, Any]) -> dict[str, Any]:
    def entries(key: str) -> list[dict[str, Any]]:
        return [
            {
                "cell_id": e["cell_id"],
                "index": e["index"],
                "reasons": [_reason(r) for r in e.get("reasons") or []],
                "last_duration_s": e.get("last_duration_s"),
                **({"condition": e["condition"]} if e.get("condition") else {}),
            }
            for e in raw.get(key) or []
        ]

    return {
        "order": entries("stale"),
        "conditional": entries("conditional"),
        "blocked": entries("blocked"),
        "cost": raw.get("cost"),
        "reads": raw.get("reads"),
    }


async def _output(call: Call, kernel_id: str, handle: str, images: list[int]) -> dict[str, Any]:
    rec = await call(
        names.READ_EXECUTION,
        {"kernel_id": kernel_id, "handle": handle, "cursor": 0, "reader": VIEW_READER},
    )
    out = rec.get("output") or {}
    text, cut = _cut(out.get("text") or "", MAX_TEXT)
    result: dict[str, Any] = {
        "handle": handle,
        "state": rec.get("state"),
        "text": text,
        "truncated": bool(out.get("truncated")) or cut,
        "images": [],
    }
    for key in ("execution_count", "duration_s", "paused"):
        if rec.get(key) is not None:
            result[key] = rec[key]
    if out.get("uri"):
        result["uri"] = out["uri"]
    error = rec.get("error")
    if error:
        traceback = error.get("traceback") or ""
        result["error"] = {
            "ename": error.get("ename", ""),
            "evalue": (error.get("evalue") or "")[:500],
            "line": failing_line(traceback),
            "traceback": _cut(_ANSI.sub("", traceback), MAX_TRACEBACK)[0],
        }
    for ref in out.get("images") or []:
        if images[0] >= MAX_IMAGES:
            result["images"].append({"uri": ref["uri"], "mime": ref.get("mime")})
            continue
        art = await call(names.READ_ARTIFACT, {"uri": ref["uri"]})
        blob = art.get("blob")
        if blob and len(blob) <= MAX_IMAGE_B64:
            images[0] += 1
            result["images"].append({"uri": ref["uri"], "mime": art.get("mime"), "data": blob})
        else:
            result["images"].append({"uri": ref["uri"], "mime": ref.get("mime")})
    return result


async def collect(
    call: Call, target: dict[str, Any], cells: Iterable[str] | None = None
) -> dict[str, Any]:
    """The view's snapshot of the kernel ``target`` names (``{"kernel_id": ...}`` or
    ``{"notebook": ...}``), with the outputs of ``cells`` (default: the latest run ones).

    While the kernel runs something, the plan is not asked for (working it out waits for the
    kernel); the snapshot carries the running plan's progress instead.
    """
    listing = await call(names.LIST_CELLS, dict(target))
    kernel_id = listing["kernel_id"]
    kernels = await call(names.LIST_KERNELS, {})
    kernel: dict[str, Any] = next((k for k in kernels if k.get("kernel_id") == kernel_id), {})
    busy = bool(kernel.get("running")) or kernel.get("state") in ("busy", "starting", "warming")
    snapshot: dict[str, Any] = {
        "taken_at": time.time(),
        "kernel": {
            key: kernel[key]
            for key in ("kernel_id", "state", "notebook", "running", "python", "dataflow")
            if key in kernel
        },
        "notebook": listing.get("notebook"),
        "cells": [_cell(c) for c in listing.get("cells") or []],
        "plan": None,
        "progress": None,
        "outputs": {},
    }
    snapshot["kernel"].setdefault("kernel_id", kernel_id)
    if busy:
        progress = await call(names.PLAN_PROGRESS, {"kernel_id": kernel_id})
        if not progress.get("finished", True):
            snapshot["progress"] = progress
    else:
        snapshot["plan"] = _plan(
            await call(names.RUN_STALE, {"kernel_id": kernel_id, "execute": False})
        )
    wanted = set(cells) if cells is not None else None
    ran = [
        c
        for c in snapshot["cells"]
        if c.get("handle") and (wanted is None or c["cell_id"] in wanted)
    ]
    # the most recent runs first: handles are numbered in order (c12 after c9)
    ran.sort(key=lambda c: int(re.sub(r"\D", "", c["handle"]) or 0), reverse=True)
    images = [0]
    for cell in ran[:MAX_OUTPUT_CELLS]:
        snapshot["outputs"][cell["cell_id"]] = await _output(
            call, kernel_id, cell["handle"], images
        )
    return snapshot
