"""Whether a planned cell still has to run after cells above it re-ran, answered from its own
record in time independent of the notebook's size (executing a plan asks before every cell)."""

from __future__ import annotations

from collections.abc import Iterable

from ipykeep.staleness.models import Reason
from ipykeep.staleness.tracker_state import TrackerState


def input_rewritten(
    state: TrackerState, cell_id: str, reasons: Iterable[Reason], since: int
) -> bool:
    """True when a re-plan now would certainly keep ``cell_id`` (planned with ``reasons``
    for what other cells do): a name it reads from a producer its plan entry names
    (``upstream``) was rewritten by that producer's re-run after ``since`` (a tracker ``seq``),
    to a value other than the one the cell's last run read. A full plan then finds the same
    thing (``tracker_reasons.read_reason``: "changed by re-running"), whatever the rest of the
    notebook holds. False means "not known here": the caller re-plans."""
    run = state.runs.get(cell_id)
    if run is None or run.epoch != state.epoch:
        return False
    for reason in reasons:
        if reason.kind != "upstream" or len(reason.cells) != 1 or reason.path is not None:
            continue
        producer = reason.cells[0]
        p_run = state.runs.get(producer)
        if p_run is None or p_run.epoch != state.epoch or p_run.outcome != "ok":
            continue
        for name in reason.symbols:
            if not name.isidentifier():
                continue  # hidden generator state: seeding rules apply (a full plan decides)
            latest = state.writers.get(name)
            seen = run.reads.get(name)
            if (
                latest is not None
                and latest.origin == "cell"
                and latest.cell_id == producer
                and latest.seq > since
                and seen is not None
                and seen.origin == "cell"
                and seen.cell_id == producer
                and seen.version != p_run.version_of(name)
            ):
                return True
    return False
