"""What the debugger service keeps per kernel, and how it calls the in-kernel debugger."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ipykeep.kernel.inkernel import DEBUG


def call(op: str, arg: Any = None, kind: str | None = None, **options: Any) -> str:
    """An expression running one command of the in-kernel debugger (``_inkernel/debug.py``)."""
    budget = float(options.get("budget_s", 5.0))
    summarizers = list(options.get("summarizers", ()))
    wait_s = float(options.get("wait_s", 10.0))
    return DEBUG.call("command_json", op, arg, kind, budget, summarizers, wait_s)


#: The expression registering the debugger's IPython hooks (once per kernel process).
INSTALL_HOOKS = DEBUG.call("install_hooks")


@dataclass
class KernelDebug:
    """Per kernel: the failure whose frames the kernel keeps, and whether anything is armed."""

    #: the handle of the latest failed execution (the kernel keeps only its frames)
    last_failed: str | None = None
    #: breakpoints or stop-on-raise are set: runs on the main shell are watched for pauses
    armed: bool = False
    #: the task that follows the running main-shell execution's pauses
    watcher: asyncio.Task[None] | None = None
    #: a replay's run in the background (the cell re-running under the debugger)
    replay: asyncio.Task[Any] | None = None
