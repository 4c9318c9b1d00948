"""Serving pieces that need no server: the extra check, captions, the adoption list."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

from ipykeep.api.errors import MissingExtraError, UnknownCellError, UsageError
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
