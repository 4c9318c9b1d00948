"""What a project's kernels left on disk, read without a daemon: artifacts by URI, and what
became of a kernel id."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from ipykeep.api.errors import UnknownKernelError, UsageError
from ipykeep.project.layout import ProjectPaths

ARTIFACT_URI_PREFIX = "ipykeep://artifacts/"

#: The one MIME table: the suffix an artifact of each type is stored under. Reading maps the
#: suffix back (``ARTIFACT_MIME``), so whatever is stored is served with its type; anything
#: else is stored as ``.bin`` and served as application/octet-stream.
MIME_SUFFIX = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "text/html": ".html",
    "text/markdown": ".md",
    "text/latex": ".tex",
    "text/plain": ".txt",
    "application/json": ".json",
}
#: Suffix -> MIME type for reading (``.jpeg`` too: a name someone typed by hand).
ARTIFACT_MIME = {suffix: mime for mime, suffix in MIME_SUFFIX.items()} | {".jpeg": "image/jpeg"}
#: Suffixes returned as text (everything not an image, and SVG, which is XML).
TEXT_SUFFIXES = tuple(
    s for s, m in ARTIFACT_MIME.items() if not m.startswith("image/") or m == "image/svg+xml"
)


def resolve_artifact_uri(state_dir: Path, uri: str) -> Path:
    """Map ``ipykeep://artifacts/<kid>/<name>`` to its file, refusing anything outside."""
    if not uri.startswith(ARTIFACT_URI_PREFIX):
        raise ValueError(f"not an artifact URI: {uri}")
    rest = uri[len(ARTIFACT_URI_PREFIX) :]
    parts = rest.split("/")
    if len(parts) != 2 or any(p in ("", ".", "..") or "/" in p or "\x00" in p for p in parts):
        raise ValueError(f"malformed artifact URI: {uri}")
    kernels = state_dir.resolve() / "kernels"
    chain = [
        kernels,
        kernels / parts[0],
        kernels / parts[0] / "artifacts",
        kernels / parts[0] / "artifacts" / parts[1],
    ]
    # Artifacts are regular files ipykeep wrote in directories it made; a symlink planted
    # anywhere on that path (the kernel's directory, artifacts/, the file) must not serve a
    # file from elsewhere.
    if any(p.is_symlink() for p in chain):
        raise ValueError(f"artifact {uri} is not a file ipykeep stored")
    return chain[-1]


def read_artifact(state_dir: Path, uri: str) -> dict[str, Any]:
    """The artifact ``uri`` names: ``{"uri", "path", "text" or base64 "blob", "mime"}``."""
    try:
        path = resolve_artifact_uri(state_dir, uri)
    except ValueError as exc:
        raise UsageError(
            str(exc), hint="artifact URIs look like ipykeep://artifacts/k1/<name>"
        ) from None
    try:
        # O_NONBLOCK: a FIFO planted here must not hold the daemon (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        raise UsageError(
            f"no artifact at {uri}",
            hint="the URI comes from a truncated output's marker or an image",
        ) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        # ipykeep writes each artifact once, by rename: a second name for the same file (a hard
        # link planted from elsewhere) or anything but a regular file is not one of them.
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise UsageError(
                f"artifact {uri} is not a file ipykeep stored",
                hint="the URI comes from a truncated output's marker or an image",
            )
        data = fh.read()
    if path.suffix in TEXT_SUFFIXES:
        text = data.decode("utf-8", "replace")
        return {
            "uri": uri,
            "path": str(path),
            "text": text,
            "mime": ARTIFACT_MIME.get(path.suffix, "text/plain"),
        }
    mime = ARTIFACT_MIME.get(path.suffix, "application/octet-stream")
    return {"uri": uri, "path": str(path), "blob": base64.b64encode(data).decode(), "mime": mime}


def unknown_kernel_error(
    paths: ProjectPaths, kernel_id: str, live: list[str]
) -> UnknownKernelError:
    """Say what became of a kernel id, from what earlier daemons left in ``.ipykeep/kernels``."""
    running = ", ".join(live) or "none"
    kdir = paths.kernel_dir(kernel_id)
    closed = kdir / "closed.json"
    hint = (
        "start a new kernel (create_kernel / `ipykeep start`); "
        f"its record stays in {kdir / 'record.jsonl'}"
    )
    if closed.is_file():
        with contextlib.suppress(ValueError, OSError):
            info = json.loads(closed.read_text())
            return UnknownKernelError(
                f"kernel {kernel_id} was closed: {info.get('reason', 'closed')} "
                f"(running now: {running})",
                hint=hint,
            )
    if kdir.is_dir():
        return UnknownKernelError(
            f"kernel {kernel_id} belonged to a daemon that is no longer running; "
            f"its state is gone (running now: {running})",
            hint=hint,
        )
    return UnknownKernelError(
        f"no kernel {kernel_id!r} (running: {running})",
        hint="list kernels with `ipykeep status` or the list_kernels tool",
    )
