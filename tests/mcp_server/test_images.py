"""Image capping (no kernels)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ipykeep.mcp_server.images import ImageLimits, prepare_image

Image = pytest.importorskip("PIL.Image")


def _png(path: Path, size: tuple[int, int], noisy: bool = False) -> Path:
    if noisy:
        import os

        img = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    else:
        img = Image.new("RGB", size, (200, 30, 30))
    img.save(path, format="PNG")
    return path


def test_small_image_passes_unchanged(tmp_path: Path) -> None:
    path = _png(tmp_path / "a.png", (100, 50))
    out = prepare_image(path, "image/png", ImageLimits(1024, 200_000))
    assert out.data == path.read_bytes() and out.note is None


def test_large_image_is_downscaled_within_caps(tmp_path: Path) -> None:
    path = _png(tmp_path / "big.png", (3000, 1500))
    out = prepare_image(path, "image/png", ImageLimits(800, 200_000))
    assert out.data is not None
    img = Image.open(io.BytesIO(out.data))
    assert max(img.size) <= 800 and img.size[0] == 2 * img.size[1]
    assert out.note and str(path) in out.note


def test_heavy_image_fits_byte_cap(tmp_path: Path) -> None:
    path = _png(tmp_path / "noise.png", (600, 600), noisy=True)
    limits = ImageLimits(1024, 60_000)
    out = prepare_image(path, "image/png", limits)
    assert out.data is not None and len(out.data) <= limits.max_bytes


def test_unsendable_image_is_named_by_path(tmp_path: Path) -> None:
    svg = tmp_path / "x.svg"
    svg.write_text("<svg/>")
    out = prepare_image(svg, "image/svg+xml", ImageLimits(1024, 200_000))
    assert out.data is None and str(svg) in (out.note or "")
    missing = prepare_image(tmp_path / "gone.png", "image/png", ImageLimits(1024, 200_000))
    assert missing.data is None and "gone.png" in (missing.note or "")
