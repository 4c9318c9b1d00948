"""The tree stays lint-clean and type-clean: ruff and mypy run as part of the suite.

Their configuration lives in ``pyproject.toml``; the import-layer contracts are checked by
``tests/test_layers.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tree_is_formatted() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(660)  # a cold mypy cache on a loaded 2-core machine takes minutes
def test_mypy_is_clean_on_the_package() -> None:
    done = _run("mypy", "--no-error-summary")
    assert done.returncode == 0, done.stdout + done.stderr
