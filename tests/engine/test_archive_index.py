"""The archive's index of executions (handle -> offset of its record line): every archived
execution is found by handle, and the index costs a few bytes per execution, since it is kept
for the kernel's life."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from ipykeep.engine.archive import KernelArchive
from ipykeep.kernel.execution import Execution


def _archived(archive: KernelArchive, handle: str, code: str) -> None:
    ex = Execution(handle=handle, kernel_id="k1", code=code, kind="scratch", state="ok")
    archive.append_execution(ex)


def test_every_archived_execution_is_found_by_its_handle(tmp_path: Path) -> None:
    archive = KernelArchive(tmp_path / "k1", "k1")
    # in order, then one archived after a later one (a queued call cancelled), a handle of
    # another form, and one archived again (its latest entry is the one found)
    for handle, code in [
        ("c3", "a = 3"),
        ("c7", "a = 7"),
        ("c12", "a = 12"),
        ("c9", "a = 9"),
        ("x-1", "a = 'x'"),
        ("c7", "a = 77"),
        ("c13", "a = 13"),
    ]:
        _archived(archive, handle, code)
    found = {h: (archive.execution_entry(h) or {}).get("code") for h in archive_handles()}
    assert found == {
        "c3": "a = 3",
        "c7": "a = 77",
        "c9": "a = 9",
        "c12": "a = 12",
        "c13": "a = 13",
        "x-1": "a = 'x'",
        "c1": None,
        "c8": None,
        "c14": None,
        "c0": None,
        "c012": None,
        "x-2": None,
    }
    assert "c12" in archive.offsets and "c8" not in archive.offsets and "" not in archive.offsets


def archive_handles() -> list[str]:
    return ["c3", "c7", "c9", "c12", "c13", "x-1", "c1", "c8", "c14", "c0", "c012", "x-2"]


def test_the_index_costs_under_20_bytes_an_execution(tmp_path: Path) -> None:
    archive = KernelArchive(tmp_path / "k1", "k1")
    count = 20_000
    # handles as a project gives them: increasing, shared with other kernels (every third here);
    # one execution in ten finishes after the next one (a subshell's call overtook it)
    handles = [f"c{1_000 + 3 * i}" for i in range(count)]
    for i in range(0, count - 1, 10):
        handles[i], handles[i + 1] = handles[i + 1], handles[i]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, handle in enumerate(handles):
            archive.offsets[handle] = 150 * i
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / count < 20, f"{grown / count:.0f} bytes an execution"
    assert all(archive.offsets.get(h) == 150 * i for i, h in enumerate(handles))
