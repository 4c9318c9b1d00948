"""Versioned cell edits of a notebook file: each action, stale versions refused, nothing lost."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from ipykeep.api.errors import StaleCellVersionError, UnknownCellError, UsageError
from ipykeep.project import cell_edits
from ipykeep.project.cell_edits import CellEdit, cell_version, edit_notebook_file


def _notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    a = nbformat.v4.new_code_cell("x = 1", id="a")
    a.outputs = [nbformat.v4.new_output("stream", name="stdout", text="kept\n")]
    nb.cells = [
        a,
        nbformat.v4.new_code_cell("y = x + 1", id="b"),
        nbformat.v4.new_code_cell("y", id="c"),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c.id, c.source) for c in nbformat.read(path, as_version=4).cells]


def test_replace_checks_the_version_and_keeps_other_cells(tmp_path: Path) -> None:
    path = _notebook(tmp_path)
    out = edit_notebook_file(
        path,
        CellEdit("replace", cell_id="b", version=cell_version("y = x + 1"), source="y = x + 2"),
    )
    assert (out.cell_id, out.index, out.version) == ("b", 1, cell_version("y = x + 2"))
    assert _cells(path) == [("a", "x = 1"), ("b", "y = x + 2"), ("c", "y")]
    assert nbformat.read(path, as_version=4).cells[0].outputs[0]["text"] == "kept\n"
    nbformat.validate(nbformat.read(path, as_version=4))


def test_a_stale_version_is_refused_with_the_current_source(tmp_path: Path) -> None:
    path = _notebook(tmp_path)
    before = path.read_bytes()
    with pytest.raises(StaleCellVersionError) as info:
        edit_notebook_file(
            path, CellEdit("replace", cell_id="b", version=cell_version("old"), source="z = 0")
        )
    err = info.value
    assert "y = x + 1" in err.message and err.retryable and err.exit_code == 4
    assert err.details == {"cell_id": "b", "version": cell_version("y = x + 1")}
    assert f"version={cell_version('y = x + 1')}" in err.hint
    assert path.read_bytes() == before  # nothing written
    with pytest.raises(StaleCellVersionError, match="gave no version"):
        edit_notebook_file(path, CellEdit("delete", cell_id="b"))


def test_insert_delete_and_move(tmp_path: Path) -> None:
    path = _notebook(tmp_path)
    made = edit_notebook_file(
        path, CellEdit("insert", source="# notes", cell_type="markdown", after="a")
    )
    assert made.index == 1 and made.version == cell_version("# notes")
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].cell_type == "markdown" and nb.cells[1].id == made.cell_id
    end = edit_notebook_file(path, CellEdit("insert", source="print(y)"))
    assert end.index == 4
    moved = edit_notebook_file(
        path, CellEdit("move", cell_id="c", version=cell_version("y"), before="a")
    )
    assert moved.index == 0
    gone = edit_notebook_file(
        path, CellEdit("delete", cell_id="b", version=cell_version("y = x + 1"))
    )
    assert gone.version is None and gone.index is None
    assert [i for i, _ in _cells(path)] == ["c", "a", made.cell_id, end.cell_id]


def test_a_save_between_read_and_replace_is_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone saves cell b after the edit read the file: the retry sees their version."""
    path = _notebook(tmp_path)
    real = cell_edits.apply_edit
    calls = []

    def racing(nb, edit, name):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:  # the person saves while the first attempt is under way
            other = nbformat.read(path, as_version=4)
            other.cells[1].source = "y = 'theirs'"
            nbformat.write(other, path)
        return real(nb, edit, name)

    monkeypatch.setattr(cell_edits, "apply_edit", racing)
    with pytest.raises(StaleCellVersionError, match="theirs"):
        edit_notebook_file(
            path, CellEdit("replace", cell_id="b", version=cell_version("y = x + 1"), source="mine")
        )
    assert len(calls) == 2 and ("b", "y = 'theirs'") in _cells(path)


def test_bad_edits_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="replace needs source"):
        CellEdit("replace", cell_id="a", version="v")
    with pytest.raises(UsageError, match="move needs after or before"):
        CellEdit("move", cell_id="a", version="v")
    with pytest.raises(UsageError, match="not both"):
        CellEdit("insert", source="", after="a", before="b")
    path = _notebook(tmp_path)
    with pytest.raises(UnknownCellError):
        edit_notebook_file(
            path, CellEdit("move", cell_id="a", version=cell_version("x = 1"), after="zz")
        )
    assert [i for i, _ in _cells(path)] == ["a", "b", "c"]
