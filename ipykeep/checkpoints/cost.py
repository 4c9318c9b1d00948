"""Store or recompute: whether a cell's values are worth checkpointing (pure logic).

Pickling a cell's values holds the kernel (buffers are copied before the writer thread takes
them), so checkpointing every cell makes cheap cells several times slower. As in
ElasticNotebook, a value is saved only when recomputing it would cost more: a cell is *cheap*
when re-running it together with the cheap cells it reads from (transitively; they are not
checkpointed either) takes less than ``checkpoint_min_cell_s``, or less than saving its values
took the last time they were saved (the time the kernel was held pickling them). A cheap cell
gets a manifest without values and re-runs on restore, before the checkpointed values are
loaded.

A cell that only imports modules is cheap whatever its run time, and counts for nothing in
its readers' chains: loading a saved module reference imports the module again, so restore pays
that time either way.

A cell that reads a name whose writer was checkpointed (or is unknown: a restored cell) can be
cheap too: its chain starts at the saved value, which restore loads before re-running it (see
``planning.rerun_after_loads``). Without that, every cell below the first saved one in a chain of
fast cells (``v2 = v1 + 1``…) was saved, so executing a long notebook took a snapshot per cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CheapCell:
    """A cell not checkpointed on purpose: its own run time and the cheap cells it reads from."""

    duration: float
    chain: frozenset[str]


@dataclass(frozen=True)
class Decision:
    cheap: bool
    #: seconds to re-run the cell with its cheap upstream chain
    recompute_s: float
    chain: frozenset[str]


def decide(
    cell_id: str,
    duration: float,
    writers: Iterable[str | None],
    cheap: Mapping[str, CheapCell],
    min_cell_s: float,
    snapshot_s: float | None = None,
    imports_only: bool = False,
) -> Decision:
    """``writers``: for each name the cell read, the cell whose write it saw (None: none, or
    scratch code, whose values are not checkpointed either way). ``snapshot_s``: what saving
    this cell's values cost the last time (None: never saved in this kernel)."""
    upstream = {w for w in writers if w is not None and w != cell_id}
    chain: set[str] = set()
    for w in upstream:
        if (info := cheap.get(w)) is not None:  # a saved writer's value is loaded, not re-made
            chain |= {w} | info.chain
    chain.discard(cell_id)
    recompute = duration + sum(cheap[c].duration for c in chain if c in cheap)
    cheaper = (
        imports_only
        or recompute < min_cell_s
        or (snapshot_s is not None and recompute < snapshot_s)
    )
    is_cheap = min_cell_s > 0 and cheaper
    return Decision(cheap=is_cheap, recompute_s=round(recompute, 6), chain=frozenset(chain))
