"""Serving pieces that need no server: the extra check, captions, the adoption list."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

from ipykeep.api.errors import MissingExtraError, UnknownCellError, UsageError
from ipykeep.api.records import CellState
from ipykeep.cli.serve import parse_captions
from ipykeep.serve.adoption import AdoptedKernel, AdoptionSpec, read_spec, write_spec
from ipykeep.serve.publish import CAPTION_TAG, HIGHLIGHT_TAG, highlight
from ipykeep.serve.service import require_serve_extra


def test_missing_serve_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jupyterlab" else real(name, *a),
    )
    with pytest.raises(MissingExtraError) as info:
        require_serve_extra("lab")
    assert "pip install 'ipykeep[serve]'" in info.value.hint
    require_serve_extra("notebook")  # notebook 7 is still there


def test_core_modules_do_not_import_jupyter_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ipykeep.cli.app, ipykeep.serve.service, ipykeep.cli.serve; "
        "print('jupyter_server' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_captions_go_above_the_named_cells_in_a_copy() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_code_cell("b = 2"),
        nbformat.v4.new_code_cell("c"),
    ]
    ids = [c.id for c in nb.cells]
    out = highlight(nb, {ids[2]: "third", "0": "first"})
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "code", "markdown", "code"]
    assert out.cells[0].source == "**▶ first**" and out.cells[0].metadata["tags"] == [CAPTION_TAG]
    assert out.cells[4].id == ids[2] and HIGHLIGHT_TAG in out.cells[4].metadata["tags"]
    assert out.cells[4].metadata["ipykeep"] == {"caption": "third"}
    assert len(nb.cells) == 3  # the original is untouched
    with pytest.raises(UnknownCellError):
        highlight(nb, {"missing": "x"})


def test_records_are_captioned_by_handle() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("x")]
    out = highlight(nb, {"c7": "the value"}, ["c3", "c7"])
    assert out.cells[1].source == "**▶ the value**" and out.cells[2].source == "x"


def test_cell_options_parse() -> None:
    assert parse_captions(["abc=the fit", "3=a=b", "x"]) == {"abc": "the fit", "3": "a=b", "x": ""}
    with pytest.raises(UsageError):
        parse_captions(["=caption"])


@pytest.mark.posix
def test_adoption_list_is_private_and_round_trips(tmp_path: Path) -> None:
    spec = AdoptionSpec(
        daemon_pid=42,
        kernels=(AdoptedKernel("u-u-u-u-u", "k1", "/x/kernel.json", 7, ("a.ipynb",)),),
    )
    path = tmp_path / "adopt.json"
    write_spec(path, spec)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert read_spec(path) == spec


def _cell(state: str, reasons: list[dict[str, str]] | None = None, **kw: str) -> CellState:
    return CellState(
        cell_id=kw.pop("cell_id", "c"),
        index=1,
        cell_type="code",
        state=state,
        reasons=reasons,
        **kw,
    )


def test_cell_marks_say_each_state_and_why() -> None:
    from ipykeep.serve.marks import cell_marks

    upstream = {"kind": "upstream", "message": "uses clean from cell 2 (edited)"}
    missing = {"kind": "missing_producer", "message": "uses y, which only cell 5 below it defines"}
    marks = cell_marks(
        [
            _cell("ok", cell_id="a"),
            _cell("stale", [upstream], cell_id="b"),
            _cell("stale", [missing], cell_id="c"),
            _cell("running", cell_id="d"),
            _cell("running", cell_id="e", paused="line 3"),
            _cell("never_run", cell_id="f"),
            _cell(
                "failed",
                [{"kind": "failed", "message": "its last run raised an error"}, missing],
                cell_id="g",
            ),
            CellState(cell_id="m", index=0, cell_type="markdown", state="markdown"),
        ]
    )
    got = {m.id: (m.state, m.title) for m in marks}
    assert "m" not in got  # only code cells are marked
    assert got["a"][0] == "fresh"
    assert got["b"] == ("stale", "stale: uses clean from cell 2 (edited)")
    assert got["c"][0] == "blocked" and "only cell 5 below" in got["c"][1]
    assert got["d"] == ("running", "running")
    assert got["e"][0] == "paused" and "line 3" in got["e"][1]
    assert got["f"] == ("stale", "stale: never run")
    # A failed cell that a fresh run could not run either is blocked, with both reasons.
    assert got["g"][0] == "blocked" and "raised" in got["g"][1] and "below" in got["g"][1]
