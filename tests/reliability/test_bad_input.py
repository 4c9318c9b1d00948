"""Bad notebooks and hostile output, through the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import nbformat
import pytest

from ipykeep.project.notebook import read_notebook
from tests.conftest import make_project, run_cli, stop_daemon
from tests.reliability.helpers import STATIC, notebook_outputs, start_project, write_notebook


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        (
            {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {"a": 1}},
            "'cells' is a dict",
        ),
        (
            {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ["print(1)"]},
            "cell 0 is a str",
        ),
        (None, "nested too deeply"),
    ],
)
def test_malformed_shapes_exit_4_with_a_message(tmp_path: Path, shape, said) -> None:
    root = make_project(tmp_path / "p", example=False)
    text = (
        json.dumps(shape)
        if shape is not None
        else '{"nbformat": 4, "cells": ' + "[" * 100_000 + "]" * 100_000 + "}"
    )
    (root / "bad.ipynb").write_text(text)
    res = run_cli("start", "bad.ipynb", cwd=root, env=STATIC)
    assert res.returncode == 4, res.stderr
    assert said in res.stderr and "Traceback" not in res.stderr
    assert (root / "bad.ipynb").read_text() == text


def test_repaired_ids_never_collide_with_a_real_cell() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"v = {i}") for i in range(3)]
    data = json.loads(nbformat.writes(nb))
    for cell, cid in zip(data["cells"], ["X", "X", "cell-1"]):
        cell["id"] = cid
    path = Path(f"/tmp/ipykeep-ids-{uuid.uuid4().hex}.ipynb")
    try:
        path.write_text(json.dumps(data))
        ids = [c.cell_id for c in read_notebook(path).cells]
        assert ids[0] == "X" and ids[2] == "cell-1" and len(set(ids)) == 3
    finally:
        path.unlink()


def test_nbformat_3_is_upgraded_with_nbformat_s_converter(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", example=False)
    v3 = nbformat.v3.new_notebook(
        worksheets=[
            nbformat.v3.new_worksheet(
                cells=[nbformat.v3.new_code_cell(input="y = 6 * 7\nprint(y)")]
            )
        ]
    )
    (root / "old.ipynb").write_text(nbformat.writes(v3, version=3))
    try:
        res = run_cli("start", "old.ipynb", cwd=root, env=STATIC)
        assert res.returncode == 0, res.stderr
        data = json.loads((root / "old.ipynb").read_text())
        assert data["nbformat"] == 4 and data["cells"][0]["outputs"][0]["text"] == ["42\n"]
    finally:
        stop_daemon(root)


def test_a_2000_cell_notebook_runs_and_terminal_escapes_never_reach_the_terminal(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_project(root, example=False)
    write_notebook(root / "big.ipynb", [f"v{i} = {i}" for i in range(2000)])
    try:
        # Reading, planning and writing back a 2,000-cell notebook (running every cell would
        # only measure the kernel): start, status of every cell, a run writing into it.
        res = run_cli(
            "start", "big.ipynb", "--no-warm", "--json", cwd=root, env=STATIC, timeout=300
        )
        assert res.returncode == 0, res.stderr
        res = run_cli("status", "--json", cwd=root, env=STATIC)
        cells = json.loads(res.stdout)["kernels"][0]["cells"]
        assert len(cells) == 2000 and {c["state"] for c in cells} == {"never_run"}
        res = run_cli("run", *[f"c{i}" for i in range(1900, 2000)], cwd=root, env=STATIC)
        assert res.returncode == 0, res.stderr
        outs = notebook_outputs(root / "big.ipynb")
        assert (
            len(outs) == 2000 and len(json.loads((root / "big.ipynb").read_text())["cells"]) == 2000
        )
        res = run_cli(
            "exec",
            "print('\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;"
            "owned\\x1b\\\\\\x1bPq\\x1b\\\\\\x1b[31mred\\x1b[0m', v1999)",
            cwd=root,
            env=STATIC,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == "red 1999" and "\x1b" not in res.stdout
        res = run_cli("exec", "raise ValueError('\\x1b]0;title\\x07bad')", cwd=root, env=STATIC)
        assert res.returncode == 1 and "\x1b]" not in res.stderr and "bad" in res.stderr
    finally:
        stop_daemon(root)


def _mount_tmpfs(target: Path, size: str = "4m") -> str | None:
    """A small tmpfs (4 MiB) at ``target``; the reason when that is impossible."""
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs"
    if shutil.which("mount") is None:
        return "no mount command"
    target.mkdir(parents=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    return None if res.returncode == 0 else f"cannot mount a tmpfs here: {res.stderr.strip()}"


def test_a_full_disk_is_a_typed_write_error_and_results_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "full"
    why = _mount_tmpfs(root)
    if why:
        pytest.skip(why)
    try:
        client = start_project(root, ["x = 1"])
        write_notebook(root / "nb.ipynb", ["print('z' * 300_000)"])
        before = (root / "nb.ipynb").read_bytes()
        filler = root / "filler"
        try:  # fill what is left
            with open(filler, "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
        batch = client.call("run_cells", cells=["c0"])
        assert batch["results"][0]["state"] == "ok"
        assert (
            batch["write"]["written"] is False and "outputs not written" in batch["write"]["error"]
        )
        assert (root / "nb.ipynb").read_bytes() == before
        assert not list(root.glob(".nb.ipynb.*.ipykeep-tmp"))
        filler.unlink()
    finally:
        stop_daemon(root)
        subprocess.run(["umount", "-l", str(root)], capture_output=True)
