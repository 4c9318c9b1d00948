"""A file write merged into an open notebook's shared document, cell by cell.

The three-way merge as a pure function, then jupyter-collaboration's own room (``DocumentRoom``,
its ``FileLoader`` and the served server's contents manager on a real notebook file) with ipykeep's
out-of-band handler installed: a file written the way file tools write it (nbformat, atomic
replace) while the live document holds unsaved typing.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

pytest.importorskip("jupyter_server_ydoc")

from ipykeep.serve import file_merge
from ipykeep.serve.cell_merge import SAVED, merge_notebooks
from ipykeep.serve.contents import ReplacingFileManager

NAME = "nb.ipynb"


def _nb(*cells: tuple[str, str]) -> dict[str, Any]:
    return {
        "cells": [
            {"id": cid, "cell_type": "code", "source": src, "metadata": {}, "outputs": []}
            for cid, src in cells
        ],
        "metadata": {},
    }


def _sources(cells: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["id"], c["source"]) for c in cells]


# -- the merge ---------------------------------------------------------------------------------


def test_each_side_keeps_its_own_change_of_a_different_cell() -> None:
    base = _nb(("a", "a = 0"), ("b", "b = 0"))
    theirs = _nb(("a", "a = 0"), ("b", "b = 1"))
    ours = _nb(("a", "a = 0  # person"), ("b", "b = 0"))
    merged = merge_notebooks(base, theirs, ours)
    assert _sources(merged.cells) == [("a", "a = 0  # person"), ("b", "b = 1")]
    assert merged.conflicts == []


def test_the_files_outputs_come_with_its_source() -> None:
    base = _nb(("a", "a = 0"))
    theirs = _nb(("a", "a = 1"))
    theirs["cells"][0].update(
        outputs=[{"output_type": "stream", "name": "stdout", "text": ["1\n"]}], execution_count=3
    )
    merged = merge_notebooks(base, theirs, _nb(("a", "a = 0")))
    assert merged.cells[0]["outputs"][0]["text"] == ["1\n"]
    assert merged.cells[0]["execution_count"] == 3


def test_cells_inserted_deleted_and_moved_in_the_file_are_applied() -> None:
    base = _nb(("a", "1"), ("b", "2"), ("c", "3"))
    theirs = _nb(("c", "3"), ("a", "1"), ("n", "new"))  # c moved up, b deleted, n inserted
    ours = _nb(("a", "1"), ("p", "person's"), ("b", "2"), ("c", "3"))  # p inserted after a
    merged = merge_notebooks(base, theirs, ours)
    assert [c["id"] for c in merged.cells] == ["c", "a", "p", "n"]
    assert merged.conflicts == []


def test_a_cell_both_sides_changed_keeps_the_persons_text_and_notes_the_files() -> None:
    base = _nb(("a", "a = 0"), ("b", "b = 0"))
    theirs = _nb(("a", "a = 0"), ("b", "b = 'agent'"))
    ours = _nb(("a", "a = 0"), ("b", "b = 'person'"))
    merged = merge_notebooks(base, theirs, ours)
    (conflict,) = merged.conflicts
    assert (conflict.cell_id, conflict.kind) == ("b", "both_changed")
    ids = [c["id"] for c in merged.cells]
    assert ids == ["a", conflict.note_id, "b"]
    note = merged.cells[1]
    assert note["cell_type"] == "markdown" and "b = 'agent'" in note["source"]
    assert note["metadata"]["ipykeep"]["conflict"]["file_source"] == "b = 'agent'"
    assert merged.cells[2]["source"] == "b = 'person'"


def test_a_deletion_against_an_edit_is_noted_either_way() -> None:
    base = _nb(("a", "a = 0"), ("b", "b = 0"))
    # The file deletes b, the person edited it: b stays, with a note.
    merged = merge_notebooks(base, _nb(("a", "a = 0")), _nb(("a", "a = 0"), ("b", "b = 9")))
    assert [c.kind for c in merged.conflicts] == ["deleted_in_file"]
    assert merged.cells[-1]["source"] == "b = 9"
    # The person deleted b, the file changed it: b stays deleted, its text in the note.
    merged = merge_notebooks(base, _nb(("a", "a = 0"), ("b", "b = 7")), _nb(("a", "a = 0")))
    assert [c.kind for c in merged.conflicts] == ["deleted_in_document"]
    assert [c["id"] for c in merged.cells][0] == "a"
    assert "b = 7" in merged.cells[-1]["source"]


def test_a_file_tool_writing_back_a_copy_older_than_the_last_save_changes_only_its_cell() -> None:
    # The tool read the file, the server then saved the person's typing in a and a new cell p,
    # and the tool wrote back its copy with only b changed.
    read = _nb(("a", "a = 0"), ("b", "b = 0"))
    saved = _nb(("a", "a = 0  # person"), ("p", "p = 1"), ("b", "b = 0"))
    theirs = _nb(("a", "a = 0"), ("b", "b = 1"))
    merged = merge_notebooks(saved, theirs, saved, earlier=[read])
    assert _sources(merged.cells) == [("a", "a = 0  # person"), ("p", "p = 1"), ("b", "b = 1")]
    assert merged.conflicts == []
    # Without the earlier version the old copy of a would count as the file's change.
    assert merge_notebooks(saved, theirs, saved).cells[0]["source"] == "a = 0"


def test_a_rewrite_of_a_cell_read_before_the_persons_saved_change_is_a_conflict() -> None:
    read = _nb(("b", "b = 0"))
    saved = {**_nb(("b", "b = 0\n# mine")), SAVED: True}
    stale = merge_notebooks(saved, _nb(("b", "b = 5")), saved, earlier=[read])
    assert [c.kind for c in stale.conflicts] == ["both_changed"]
    assert stale.cells[-1]["source"] == "b = 0\n# mine"
    # Read after the save, the rewrite keeps the person's line: it is the file's change.
    fresh = merge_notebooks(saved, _nb(("b", "b = 5\n# mine")), saved, earlier=[read])
    assert fresh.conflicts == [] and fresh.cells[0]["source"] == "b = 5\n# mine"


# -- the room ----------------------------------------------------------------------------------


def test_the_upstream_names_the_merge_replaces_are_there() -> None:
    """Fails when a jupyter-collaboration release renames what ``file_merge`` patches."""
    assert file_merge.missing_upstream() == []


def _write_like_a_file_tool(root: Path, change: Any) -> None:
    nb = nbformat.read(str(root / NAME), as_version=4)
    change(nb)
    tmp = root / f".{NAME}.tmp"
    nbformat.write(nb, str(tmp))
    os.replace(tmp, root / NAME)


def _file_sources(root: Path) -> list[str]:
    return [c.source for c in nbformat.read(str(root / NAME), as_version=4).cells]


@pytest.fixture
async def room(tmp_path: Path) -> AsyncIterator[Any]:
    from jupyter_server_ydoc.loaders import FileLoader
    from jupyter_server_ydoc.rooms import DocumentRoom
    from jupyter_server_ydoc.test_utils import FakeEventLogger, FakeFileIDManager

    assert file_merge.install()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 0", id="cellA"),
        nbformat.v4.new_code_cell("b = 0", id="cellB"),
    ]
    nbformat.write(nb, str(tmp_path / NAME))
    contents = ReplacingFileManager(root_dir=str(tmp_path))  # the served server's
    # No poll: the test calls the watcher's check itself, so it controls when it runs.
    loader = FileLoader("fid", FakeFileIDManager({"fid": NAME}), contents, poll_interval=None)
    log = logging.getLogger("room")
    made = DocumentRoom(
        "json:notebook:fid", "json", "notebook", loader, FakeEventLogger(), None, log, 0.2
    )
    await made.initialize()
    try:
        yield made
    finally:
        await made.stop()


def _live(room: Any) -> list[str]:
    return [str(c["source"]) for c in room._document.get()["cells"]]


async def _until(check: Any, what: str) -> None:
    for _ in range(100):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_file_write_seen_by_the_watcher_keeps_the_unsaved_typing(
    room: Any, tmp_path: Path
) -> None:
    room._document.set_cell(0, source="a = 0\n# person")  # typed, not saved
    _write_like_a_file_tool(tmp_path, lambda nb: setattr(nb.cells[1], "source", "b = 1"))
    await room._file.maybe_notify()
    assert _live(room) == ["a = 0\n# person", "b = 1"]
    # The merge kept typing the file lacks: the file gets it.
    await _until(lambda: _file_sources(tmp_path) == _live(room), "the merged document saved")


async def test_a_save_that_finds_the_file_changed_merges_instead_of_reloading(
    room: Any, tmp_path: Path
) -> None:
    room._document.set_cell(0, source="a = 0\n# person")
    _write_like_a_file_tool(tmp_path, lambda nb: setattr(nb.cells[1], "source", "b = 2"))
    task = room._save_to_disc()
    if task is not None:
        await task
    await _until(lambda: _live(room) == ["a = 0\n# person", "b = 2"], "the merge")
    await _until(lambda: _file_sources(tmp_path) == _live(room), "the merged document saved")


async def test_a_file_tool_that_read_before_the_last_save_loses_no_saved_typing(
    room: Any, tmp_path: Path
) -> None:
    read = nbformat.read(str(tmp_path / NAME), as_version=4)  # the tool reads ...
    room._document.set_cell(0, source="a = 0\n# person")
    task = room._save_to_disc()  # ... the server saves the person's typing ...
    assert task is not None
    await task
    assert _file_sources(tmp_path)[0] == "a = 0\n# person"
    # ... and the tool writes back its copy with its one change.
    _write_like_a_file_tool(tmp_path, lambda nb: nb.update(read, cells=read.cells))
    _write_like_a_file_tool(tmp_path, lambda nb: setattr(nb.cells[1], "source", "b = 3"))
    await room._file.maybe_notify()
    assert _live(room) == ["a = 0\n# person", "b = 3"]
    await _until(lambda: _file_sources(tmp_path) == _live(room), "the merged document saved")


async def test_a_conflict_keeps_both_texts(room: Any, tmp_path: Path) -> None:
    room._document.set_cell(1, source="b = 'person'")
    _write_like_a_file_tool(tmp_path, lambda nb: setattr(nb.cells[1], "source", "b = 'agent'"))
    await room._file.maybe_notify()
    live = room._document.get()["cells"]
    assert [c["cell_type"] for c in live] == ["code", "markdown", "code"]
    assert live[2]["source"] == "b = 'person'"
    assert "b = 'agent'" in live[1]["source"]
    await _until(lambda: "b = 'person'" in _file_sources(tmp_path), "the document saved")
    assert any("b = 'agent'" in s for s in _file_sources(tmp_path))


async def test_a_file_write_with_no_typing_leaves_the_file_as_written(
    room: Any, tmp_path: Path
) -> None:
    _write_like_a_file_tool(tmp_path, lambda nb: nb.cells.insert(0, nbformat.v4.new_code_cell("x")))
    written = (tmp_path / NAME).read_bytes()
    await room._file.maybe_notify()
    assert _live(room) == ["x", "a = 0", "b = 0"]
    await asyncio.sleep(0.5)  # past the autosave delay: nothing to save
    assert (tmp_path / NAME).read_bytes() == written


async def test_cells_the_file_inserts_moves_and_deletes_change_places_in_the_live_document(
    room: Any, tmp_path: Path
) -> None:
    room._document.set_cell(0, source="a = 0\n# person")

    def move_and_insert(nb: Any) -> None:
        a, b = nb.cells
        nb.cells = [b, a, nbformat.v4.new_markdown_cell("# new", id="cellN")]

    _write_like_a_file_tool(tmp_path, move_and_insert)
    await room._file.maybe_notify()
    live = [(c["id"], c["source"]) for c in room._document.get()["cells"]]
    assert live == [("cellB", "b = 0"), ("cellA", "a = 0\n# person"), ("cellN", "# new")]

    _write_like_a_file_tool(tmp_path, lambda nb: nb.cells.pop(0))  # delete b
    await room._file.maybe_notify()
    assert [c["id"] for c in room._document.get()["cells"]] == ["cellA", "cellN"]
    assert _live(room)[0] == "a = 0\n# person"


async def test_the_files_outputs_and_notebook_metadata_reach_the_live_document(
    room: Any, tmp_path: Path
) -> None:
    room._document.set_cell(0, source="a = 0\n# person")

    def run_b(nb: Any) -> None:
        b = nb.cells[1]
        b.source, b.execution_count = "b = 1\nb", 4
        b.outputs = [
            nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=4)
        ]
        nb.metadata["agent"] = {"ran": "b"}

    _write_like_a_file_tool(tmp_path, run_b)
    await room._file.maybe_notify()
    live = room._document.get()
    a, b = live["cells"]
    assert a["source"] == "a = 0\n# person"
    assert (b["execution_count"], b["outputs"][0]["data"]) == (4, {"text/plain": "1"})
    assert live["metadata"]["agent"] == {"ran": "b"}
