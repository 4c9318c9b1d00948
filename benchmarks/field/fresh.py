"""Fresh top-to-bottom runs of notebook variants in a separate interpreter, cell by cell.

One interpreter imports the heavy libraries once, then forks a child per run: each child seeds
its generators from the OS (as a new process would), runs the cells in a new IPython shell
with the inline matplotlib backend on, as a kernel starts (``%matplotlib inline`` and the other
magics work), stops at the first error of a cell not
tagged ``raises-exception`` (as nbclient does), and reports per cell what it showed (stdout,
the value of its last expression, figures), the names it bound or changed and every global's
digest after it, then every global's digest at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.field.digest import DIGEST

_ORACLE = r"""
import hashlib, json, os, re, sys
os.environ["MPLBACKEND"] = "Agg"
for mod in ("numpy", "pandas", "scipy.stats", "matplotlib.pyplot", "statsmodels.api",
            "statsmodels.formula.api", "IPython.core.interactiveshell", "IPython.utils.capture",
            "matplotlib_inline.backend_inline"):
    try:
        __import__(mod)
    except ImportError:
        pass
DIGEST = sys.argv[1]
# what differs between two runs of the same cell: addresses, prompt numbers, the date and time
# a statsmodels summary prints
ADDR = re.compile(
    r"0x[0-9a-fA-F]+|(?:In|Out) ?\[\d+\]|^\s*$|\d\d:\d\d:\d\d|\w{3}, \d\d \w{3} \d{4}", re.M
)

def shown(cap):
    parts = [ADDR.sub("", cap.stdout)]
    for o in cap.outputs:
        for mime, data in sorted(o.data.items()):
            parts.append(mime + ":" + ADDR.sub("", data if isinstance(data, str) else repr(data)))
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:20]

def run(job):
    import random
    import numpy as np
    np.random.seed(None)
    random.seed()
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    os.chdir(job["cwd"])
    shell = InteractiveShell.instance()
    shell.enable_gui = lambda gui=None: None
    # a kernel's default (ipykernel sets the inline backend before the first cell): figures
    # are shown at the end of the cell that made them, with or without ``%matplotlib inline``
    shell.run_line_magic("matplotlib", "inline")
    shell.run_cell(DIGEST, store_history=False, silent=True)
    snap = shell.user_ns["_field_globals"]
    before = {}
    cells, failed = [], None
    for cid, src, tags in job["cells"]:
        with capture_output() as cap:
            res = shell.run_cell(src, store_history=True)
        now = snap()
        names = {n for n in now if before.get(n) != now[n]} | {n for n in before if n not in now}
        names |= set(job["writes"].get(cid, ()))
        cells.append({
            "id": cid,
            "ok": res.success,
            "shown": shown(cap),
            "changed": sorted(names),
            "values": {n: v[0] for n, v in now.items()},
            "bound": {n: now[n][1:] for n in sorted(names) if n in now},
        })
        before = now
        if not res.success and "raises-exception" not in tags:
            err = res.error_in_exec or res.error_before_exec
            failed = {"cell": cid, "error": f"{type(err).__name__}: {err}"[:300]}
            break
    final = {n: v[0] for n, v in before.items()}
    return {"cells": cells, "failed": failed, "final": final}

for line in sys.stdin:
    job = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = run(job)
        except BaseException as exc:
            out = {"cells": [], "failed": {"cell": None, "error": repr(exc)[:300]}, "final": {}}
        with os.fdopen(w, "w") as f:
            f.write(json.dumps(out))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    died = {"cells": [], "failed": {"cell": None, "error": "child died"}, "final": {}}
    sys.stdout.write("@@" + (text or json.dumps(died)) + "\n")
    sys.stdout.flush()
"""


class FreshRunner:
    """One oracle interpreter; ``run`` gives a fresh run's record for a list of cells."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _ORACLE,
            DIGEST,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "MPLBACKEND": "Agg"},
            limit=1 << 26,
        )

    async def run(
        self, cwd: Path, cells: list[tuple[str, str, tuple[str, ...]]], writes: dict[str, list[str]]
    ) -> dict[str, Any]:
        """``cells``: (id, source, tags); ``writes``: per cell, names its text binds or
        changes (always reported, even when their digest is unchanged)."""
        assert self._proc is not None and self._proc.stdin and self._proc.stdout
        job = {"cwd": str(cwd), "cells": cells, "writes": writes}
        self._proc.stdin.write((json.dumps(job) + "\n").encode())
        await self._proc.stdin.drain()
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                raise RuntimeError("the fresh-run interpreter exited")
            if line.startswith(b"@@"):
                return dict(json.loads(line[2:]))

    async def close(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            await self._proc.wait()
