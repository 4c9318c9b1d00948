import json
import os

import nbformat
import pytest

from ipykeep.api.errors import NotebookInvalidError, UnknownCellError
from ipykeep.project.notebook import CellOutputs, _read_snapshot, read_notebook, write_outputs


def _nb(path, sources, minor=5, ids=True):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(s)
        if not s.startswith("#md")
        else nbformat.v4.new_markdown_cell(s)
        for s in sources
    ]
    nb.nbformat_minor = minor
    data = json.loads(nbformat.writes(nb))
    if not ids:
        for c in data["cells"]:
            c.pop("id", None)
    path.write_text(json.dumps(data, indent=1))
    return path


def _out(text):
    return [{"output_type": "stream", "name": "stdout", "text": text}]


def test_missing_not_json_not_notebook_invalid(tmp_path):
    with pytest.raises(NotebookInvalidError, match="not found"):
        read_notebook(tmp_path / "nope.ipynb")
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [\n oops')
    with pytest.raises(NotebookInvalidError, match=r"not valid JSON \(line 2"):
        read_notebook(bad)
    other = tmp_path / "other.ipynb"
    other.write_text('{"a": 1}')
    with pytest.raises(NotebookInvalidError, match="not a notebook"):
        read_notebook(other)
    invalid = tmp_path / "invalid.ipynb"
    invalid.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [{"cell_type": "code", "id": "a", "source": 3}],
            }
        )
    )
    with pytest.raises(NotebookInvalidError, match="not a valid notebook"):
        read_notebook(invalid)


def test_resolve_by_id_then_index(tmp_path):
    snap = read_notebook(_nb(tmp_path / "n.ipynb", ["a = 1", "#md", "b = 2"]))
    assert snap.resolve("1").cell_type == "markdown"
    assert snap.resolve(snap.cells[2].cell_id).index == 2
    with pytest.raises(UnknownCellError, match="out of range"):
        snap.resolve("3")
    with pytest.raises(UnknownCellError, match="no cell with id"):
        snap.resolve("zzz")


def test_old_notebook_gets_stable_ids_and_is_repaired_on_first_write(tmp_path):
    path = _nb(tmp_path / "old.ipynb", ["a = 1", "b = 2"], minor=4, ids=False)
    snap1, snap2 = read_notebook(path), read_notebook(path)
    assert (
        [c.cell_id for c in snap1.cells] == [c.cell_id for c in snap2.cells] == ["cell-0", "cell-1"]
    )
    assert snap1.needs_repair
    rep = write_outputs(path, {"cell-1": CellOutputs("b = 2", _out("x\n"), 1)})
    assert rep.written and rep.repairs and rep.updated == ["cell-1"]
    data = json.loads(path.read_text())
    assert data["nbformat_minor"] == 5 and [c["id"] for c in data["cells"]] == ["cell-0", "cell-1"]
    assert "".join(data["cells"][1]["outputs"][0]["text"]) == "x\n"


def test_duplicate_ids_repaired(tmp_path):
    path = _nb(tmp_path / "dup.ipynb", ["a = 1", "b = 2"])
    data = json.loads(path.read_text())
    data["cells"][1]["id"] = data["cells"][0]["id"]
    path.write_text(json.dumps(data))
    snap = read_notebook(path)
    assert len({c.cell_id for c in snap.cells}) == 2 and snap.needs_repair


def test_merge_keeps_concurrent_edits(tmp_path):
    path = _nb(tmp_path / "n.ipynb", ["a = 1", "b = 2", "c = 3"])
    snap = read_notebook(path)
    a, b, c = (cell.cell_id for cell in snap.cells)
    # someone edits cell b and inserts a new cell while a and b ran
    data = json.loads(path.read_text())
    data["cells"][1]["source"] = "b = 20  # edited"
    data["cells"].insert(
        0, {"cell_type": "markdown", "id": "new", "metadata": {}, "source": "added"}
    )
    path.write_text(json.dumps(data))
    rep = write_outputs(
        path, {a: CellOutputs("a = 1", _out("A\n"), 1), b: CellOutputs("b = 2", _out("B\n"), 2)}
    )
    assert rep.updated == [a] and rep.skipped_edited == [b]
    after = json.loads(path.read_text())
    assert [c["id"] for c in after["cells"]] == ["new", a, b, c]
    assert (
        "".join(after["cells"][2]["source"]) == "b = 20  # edited"
        and after["cells"][2]["outputs"] == []
    )
    assert "".join(after["cells"][1]["outputs"][0]["text"]) == "A\n"


@pytest.mark.posix
def test_deleted_cell_gets_nothing_and_file_mode_kept(tmp_path):
    path = _nb(tmp_path / "n.ipynb", ["a = 1"])
    path.chmod(0o640)
    rep = write_outputs(path, {"gone": CellOutputs("x", _out("x"), 1)})
    assert not rep.written and rep.skipped_missing == ["gone"]
    a = read_notebook(path).cells[0].cell_id
    write_outputs(path, {a: CellOutputs("a = 1", _out("x"), 1)})
    assert path.stat().st_mode & 0o777 == 0o640
    assert not list(tmp_path.glob("*.ipykeep-tmp"))


def test_invalid_notebook_is_never_written(tmp_path):
    path = tmp_path / "bad.ipynb"
    path.write_text("{not json")
    with pytest.raises(NotebookInvalidError):
        write_outputs(path, {"a": CellOutputs("a", [], 1)})
    assert path.read_text() == "{not json"


def test_unchanged_bytes_give_the_same_snapshot_and_any_change_a_new_one(tmp_path):
    path = _nb(tmp_path / "n.ipynb", ["a = 1", "b = a"])
    first = read_notebook(path)
    assert read_notebook(path) is first  # the same bytes are not parsed and validated again
    data = json.loads(path.read_text())
    data["cells"][1]["source"] = "b = a + 1"
    stat = path.stat()
    path.write_text(json.dumps(data, indent=1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime: the bytes decide
    changed = read_notebook(path)
    assert changed is not first and changed.cells[1].source == "b = a + 1"
    path.write_text('{"cells": [')  # a broken file is an error, whatever was read before
    with pytest.raises(NotebookInvalidError):
        read_notebook(path)


def test_a_write_gives_the_snapshot_of_what_it_wrote(tmp_path):
    path = _nb(tmp_path / "n.ipynb", ["a = 1", "#md text"], minor=4, ids=False)
    before = read_notebook(path)
    assert before.needs_repair
    cid = before.cells[0].cell_id
    rep = write_outputs(path, {cid: CellOutputs("a = 1", _out("1\n"), 1)})
    after = read_notebook(path)
    assert rep.written and after.content_hash == rep.content_hash and not after.needs_repair
    assert [(c.cell_id, c.cell_type, c.source) for c in after.cells] == [
        (c.cell_id, c.cell_type, c.source) for c in before.cells
    ]
    assert after == _read_snapshot(path)  # what parsing the file afresh gives
