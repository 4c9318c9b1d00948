"""Runs the one installer (``_inkernel/envtools.py``) outside a kernel, and ``uv add``.

Before a kernel exists (``install_kernel = true``), the installer's own file runs under the
environment's interpreter, so what installs into a kernel and what installs ipykernel are the
same code. Recording goes through ``uv add --no-sync`` after the install succeeded; if it fails,
``pyproject.toml`` (and ``uv.lock``) are put back byte for byte, so nothing is half-recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ipykeep.api.errors import InstallError
from ipykeep.kernel.inkernel import ENVTOOLS
from ipykeep.platform.files import open_private
from ipykeep.project.atomic import atomic_write_bytes
from ipykeep.project.layout import private_dir

#: characters of an installer's output put in an error (the whole output is in its log)
TAIL_CHARS = 2000


def find_uv() -> str | None:
    """uv on PATH, or the one installed beside ipykeep's interpreter (the ``uv`` package)."""
    beside = Path(sys.executable).parent / "uv"
    return shutil.which("uv") or (str(beside) if beside.is_file() else None)


def failure(result: dict[str, Any], what: str) -> InstallError:
    """The error for an installer result that is not ok."""
    tail = str(result.get("tail") or "").strip()
    last = "\n".join(tail.splitlines()[-12:])
    log = result.get("log")
    return InstallError(
        f"{what}: {result.get('message', 'failed')}" + (f"\n{last}" if last else ""),
        hint=(f"the installer's full output is in {log}; " if log else "")
        + "check the package names and the index (--index-url), then try again",
        details={k: v for k, v in result.items() if k in ("error", "installer", "log")},
    )


async def install_with(
    python: str, requirements: list[str], log_dir: Path, index_url: str | None = None
) -> dict[str, Any]:
    """Install into the environment of ``python`` (no kernel needed): the installer's result."""
    private_dir(log_dir)  # under .ipykeep/: the logs are the owner's
    request = json.dumps(
        {
            "requirements": requirements,
            "index_url": index_url,
            "uv": find_uv(),
            "log_dir": str(log_dir),
        }
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            ENVTOOLS.source,
            request,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        return {"ok": False, "error": "broken", "message": f"{python} cannot be run ({exc})"}
    out, err = await proc.communicate()
    try:
        result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        text = err.decode(errors="replace")
        return {"ok": False, "error": "failed", "message": f"{python} failed", "tail": text}
    return result


async def record_with_uv(
    root: Path, requirements: list[str], log: Path, index_url: str | None = None
) -> None:
    """``uv add --no-sync`` the requirements into the project at ``root``; on failure the
    project files are restored and ``InstallError`` says why."""
    uv = find_uv()
    if uv is None:
        raise InstallError(
            "cannot record the requirements: uv is not installed",
            hint="install uv (`pip install uv`), or add them to pyproject.toml yourself",
        )
    kept = {p: p.read_bytes() for p in (root / "pyproject.toml", root / "uv.lock") if p.is_file()}
    cmd = [
        uv,
        "add",
        "--no-sync",
        *(["--index-url", index_url] if index_url else []),
        *requirements,
    ]
    private_dir(log.parent)
    with os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=root, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL
        )
        code = await proc.wait()
    if code == 0:
        return
    for path, data in kept.items():
        if not path.is_file() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
    if root / "uv.lock" not in kept:
        (root / "uv.lock").unlink(missing_ok=True)
    text = log.read_text(encoding="utf-8", errors="replace")
    raise failure(
        {"message": f"`uv add` exited with {code}", "tail": text[-TAIL_CHARS:], "log": str(log)},
        "the packages were installed but could not be recorded in pyproject.toml (left unchanged)",
    )
