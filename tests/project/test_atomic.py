"""The one atomic-write helper: modes, symlinks, clean-up."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ipykeep.project import atomic as fsutil
from ipykeep.project.atomic import TEMP_SUFFIX, atomic_write_bytes, atomic_write_text, current_umask


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.posix
def test_private_mode_on_new_and_existing_files(tmp_path: Path) -> None:
    new = tmp_path / "secret.json"
    atomic_write_text(new, "{}", mode=0o600)
    assert new.read_text() == "{}" and _mode(new) == 0o600
    old = tmp_path / "loose.json"
    old.write_text("x")
    old.chmod(0o644)
    atomic_write_text(old, "y", mode=0o600)
    assert old.read_text() == "y" and _mode(old) == 0o600


@pytest.mark.posix
def test_default_mode_keeps_the_target_or_follows_umask(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_text("a")
    kept.chmod(0o640)
    atomic_write_bytes(kept, b"b", fsync=True)
    assert kept.read_bytes() == b"b" and _mode(kept) == 0o640
    fresh = tmp_path / "fresh"
    atomic_write_bytes(fresh, b"c")
    assert _mode(fresh) == 0o666 & ~current_umask()


def test_umask_is_read_without_changing_it() -> None:
    before = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert current_umask() == 0o027
    finally:
        os.umask(before)


def test_symlinks_are_replaced_unless_asked_to_follow(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("old")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    atomic_write_text(link, "through", follow_symlinks=True)
    assert link.is_symlink() and real.read_text() == "through"
    atomic_write_text(link, "own file")
    assert not link.is_symlink() and link.read_text() == "own file"
    assert real.read_text() == "through"  # the link's target was not written


def test_a_failed_rename_leaves_the_target_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "nb.ipynb"
    target.write_text("original")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "replace", refuse)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "original"
    assert [p.name for p in tmp_path.iterdir()] == ["nb.ipynb"]


def test_temporary_files_are_hidden_and_unique(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    a = fsutil.write_temp_beside(target, b"1")
    b = fsutil.write_temp_beside(target, b"2")
    try:
        assert a != b
        for tmp in (a, b):
            name = os.path.basename(tmp)
            assert name.startswith(".state.json.") and name.endswith(TEMP_SUFFIX)
            assert os.path.dirname(tmp) == str(tmp_path)
    finally:
        os.unlink(a)
        os.unlink(b)
