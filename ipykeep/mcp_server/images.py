"""Images for agents: within a pixel cap (largest side) and a byte cap, or skipped with a note.

Pillow is optional: with it, an oversized image is downscaled (PNG, then JPEG when PNG stays
too heavy); without it, an image is passed through only when it already fits (PNG sizes are
read from the header) and is otherwise skipped, naming the file that holds it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Raster formats MCP hosts display; anything else (SVG, PDF) is pointed to by path.
RASTER = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class ImageLimits:
    max_pixels: int
    max_bytes: int


@dataclass(frozen=True)
class PreparedImage:
    """Bytes to send (``data``) or, when the image cannot be sent, a note saying why."""

    data: bytes | None
    mime: str
    note: str | None = None


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    return None


def prepare_image(path: Path, mime: str, limits: ImageLimits) -> PreparedImage:
    """Load ``path`` and bring it within ``limits``."""
    if mime not in RASTER:
        return PreparedImage(None, mime, f"{mime} image not inlined; file: {path}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        return PreparedImage(None, mime, f"image unreadable ({exc.strerror}): {path}")
    try:
        from PIL import Image
    except ImportError:
        size = _png_size(data) if mime == "image/png" else None
        if len(data) <= limits.max_bytes and (size is None or max(size) <= limits.max_pixels):
            return PreparedImage(data, mime)
        return PreparedImage(
            None,
            mime,
            f"image over the size caps and Pillow is not installed to shrink it; file: {path}",
        )
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as exc:  # any decoder failure: point to the file instead
        return PreparedImage(
            None, mime, f"image not decodable ({type(exc).__name__}); file: {path}"
        )
    if max(img.size) <= limits.max_pixels and len(data) <= limits.max_bytes:
        return PreparedImage(data, mime)
    return _shrink(img, path, limits)


def _shrink(img: Any, path: Path, limits: ImageLimits) -> PreparedImage:
    """Halve the side until a PNG (or, failing that, a JPEG) fits the byte cap."""
    from PIL import Image

    original = img.size
    side = limits.max_pixels
    while side >= 64:
        work = img.copy()
        work.thumbnail((side, side), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        work.save(buf, format="PNG", optimize=True)
        if buf.tell() <= limits.max_bytes:
            return PreparedImage(
                buf.getvalue(), "image/png", _scaled_note(original, work.size, path)
            )
        rgb = work.convert("RGB")
        for quality in (85, 70, 50):
            buf = io.BytesIO()
            rgb.save(buf, format="JPEG", quality=quality, optimize=True)
            if buf.tell() <= limits.max_bytes:
                return PreparedImage(
                    buf.getvalue(), "image/jpeg", _scaled_note(original, work.size, path)
                )
        side //= 2
    return PreparedImage(
        None,
        "image/png",
        f"image too large to send within {limits.max_bytes:,} bytes; file: {path}",
    )


def _scaled_note(original: tuple[int, int], now: tuple[int, int], path: Path) -> str | None:
    if original == now:
        return None
    return f"image scaled from {original[0]}x{original[1]} to {now[0]}x{now[1]}; full size: {path}"
