"""Project environments for the tests: real virtual environments made with uv (from PyPI)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ipykeep.environments.installer import find_uv


def uv() -> str:
    found = find_uv()
    if found is None:  # the dev extra installs uv
        pytest.fail("uv is not installed: pip install -e '.[dev]'")
    return found


def make_venv(prefix: Path, *packages: str) -> Path:
    """A virtual environment at ``prefix`` with ``packages`` installed (uv's cache keeps the
    second one quick)."""
    subprocess.run([uv(), "venv", "-q", str(prefix)], check=True)
    if packages:
        subprocess.run(
            [uv(), "pip", "install", "-q", "--python", str(prefix / "bin" / "python"), *packages],
            check=True,
        )
    return prefix
