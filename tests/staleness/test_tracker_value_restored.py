"""``StalenessTracker.value_restored``: a value loaded back from its writer's checkpoint is that
writer's output again (the debugger's replay tells the tracker so)."""

from __future__ import annotations

from ipykeep.staleness.models import FileStamp, NotebookCell
from ipykeep.staleness.tracker import StalenessTracker

CELLS = [NotebookCell("a", 0, "code", "x = 1\ny = 2"), NotebookCell("b", 1, "code", "z = x + y")]


def _stat(path: str) -> FileStamp | None:
    return None


def _clobbered() -> StalenessTracker:
    tracker = StalenessTracker()
    for cell in CELLS:
        tracker.record_cell_run(cell.cell_id, cell.index, cell.source, "ok")
    tracker.record_scratch("x = 5")
    plan = tracker.plan(CELLS, _stat)
    assert "a" in plan.cell_ids and {"restores"} <= plan.stale[0].kinds, plan
    return tracker


def test_a_restored_value_needs_no_restoring_run() -> None:
    tracker = _clobbered()
    assert tracker.value_restored("x", "a", CELLS[0].source)
    assert tracker.plan(CELLS, _stat).cell_ids == ()


def test_a_checkpoint_of_another_run_of_the_writer_does_not_count() -> None:
    tracker = _clobbered()
    assert not tracker.value_restored("x", "a", "x = 1\ny = 3")  # not the source that ran
    assert not tracker.value_restored("x", "b", CELLS[1].source)  # b did not write x
    assert "a" in tracker.plan(CELLS, _stat).cell_ids
    tracker.record_cell_run("a", 0, CELLS[0].source, "failed")
    assert not tracker.value_restored("x", "a", CELLS[0].source)  # its last run failed
