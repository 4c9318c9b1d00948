"""Fresh runs in a separate interpreter, each one run once per test session.

The oracle of the third-party and tutorial tests is a fresh top-to-bottom run of the notebook's
sources; both dataflow modes (and the checkpoint tests on the same notebooks) ask for the same
runs. The same script and input give the same output, so a run's output is kept, keyed by both,
for the other tests of the session: the workers of one xdist run share it on disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path


def _store() -> Path:
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    store = Path(tempfile.gettempdir()) / f"ipykeep-fresh-runs-{uid}" / session
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    return store


async def fresh_output(script: str, stdin: str, cwd: Path) -> str:
    """The stdout of ``python -c script`` fed ``stdin`` in ``cwd`` (which must hold no input of
    the run other than the script's own), run once per session."""
    key = hashlib.sha256(f"{sys.executable}\0{script}\0{stdin}".encode()).hexdigest()
    kept = _store() / f"{key}.out"
    if kept.exists():
        return kept.read_text()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        cwd=str(cwd),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    out, err = await proc.communicate(stdin.encode())
    assert proc.returncode == 0, err.decode()[-2000:]
    text = out.decode()
    partial = kept.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(text)
    partial.replace(kept)  # whole or absent for a worker reading it at the same time
    return text
