"""Fixtures for init/doctor tests: a temp project, a temp HOME, and the CLI app."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ipykeep.cli.app import build_app

NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME (user-scope files) and no ipykeep settings from outside."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CODEX_HOME", raising=False)  # Codex's user config is under HOME too
    for key in ("GEMINI_CLI_TRUST_WORKSPACE", "GEMINI_CLI_TRUSTED_FOLDERS_PATH"):
        monkeypatch.delenv(key, raising=False)  # Gemini CLI's folder trust: from HOME alone
    for key in list(os.environ):
        if key.startswith("IPYKEEP_"):
            monkeypatch.delenv(key)
    # `ipykeep` on PATH the way pipx or `uv tool install` put it there: a link in a bin
    # directory outside the environment, so init writes the bare `ipykeep` (see launcher.py).
    bindir = home / ".local" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "ipykeep").symlink_to(Path(sys.executable).parent / "ipykeep")
    venv_bin = str(Path(sys.executable).parent)
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), *rest]))
    return home


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / "analysis.ipynb").write_text(json.dumps(NOTEBOOK))
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def app() -> typer.Typer:
    return build_app()


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def snapshot(*dirs: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``dirs`` (except .git): bytes, mtime_ns and mode."""
    out: dict[str, tuple[bytes, int, int]] = {}
    for base in dirs:
        for path in sorted(base.rglob("*")):
            if path.is_file() and ".git" not in path.relative_to(base).parts:
                st = path.stat()
                out[str(path)] = (path.read_bytes(), st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture(name="snapshot")
def snapshot_fixture():
    return snapshot
