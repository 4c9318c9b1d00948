"""The field test's edit generator (benchmarks/field/edits.py): every kind, on a small notebook.

Pure units: no kernel. Each kind must produce an edit that changes what it says and nothing
else, the same one for the same seed.
"""

from __future__ import annotations

import random

import pytest

from benchmarks.field.edits import KINDS, Bound, Cell, Edit, draw_edit

CELLS = [
    Cell("c0", "%matplotlib inline\nimport numpy as np\nimport pandas as pd"),
    Cell("c1", "def scale(v):\n    return v * 3\n\nxs = np.arange(10)\nlabel = 'xs'"),
    Cell("c2", "df = pd.DataFrame({'a': xs, 'b': scale(xs)})\nprint('rows:', len(df))"),
    Cell("c3", "total = df['b'].clip(upper=20).sum()\nitems = [1, 2]"),
    Cell("c4", "fit = np.polyfit(df['a'], df['b'], deg=1)"),
    Cell("c5", "import matplotlib.pyplot as plt\nplt.plot(xs, scale(xs), alpha=0.5, label='line')"),
    Cell("c6", "other = 7", ("raises-exception",)),
]
#: what a fresh run of CELLS binds per cell (the generator's input for frames and lists)
BOUND: Bound = {
    "c1": {"xs": ("ndarray", ()), "label": ("str", ())},
    "c2": {"df": ("DataFrame", ("a", "b"))},
    "c3": {"total": ("int64", ()), "items": ("list", ())},
}


def draw(kind: str, seed: int = 3) -> Edit:
    edit = draw_edit(random.Random(seed), CELLS, BOUND, kind)
    assert edit is not None, kind
    assert edit.kind == kind
    return edit


def changed(edit: Edit) -> dict[str, str]:
    before = {c.cell_id: c.source for c in CELLS}
    return {c.cell_id: c.source for c in edit.cells if before.get(c.cell_id) != c.source}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_drawn_the_same_for_a_seed(kind: str) -> None:
    assert draw(kind) == draw(kind)


@pytest.mark.parametrize(
    "kind", ["number", "number_in_function", "string", "fit_keyword", "plot_argument", "rename"]
)
def test_source_edits_change_only_the_cells_they_name(kind: str) -> None:
    edit = draw(kind)
    assert set(changed(edit)) == set(edit.edited)
    assert [c.cell_id for c in edit.cells] == [c.cell_id for c in CELLS]
    for c in edit.cells:  # tags stay with their cells
        assert c.tags == next(o.tags for o in CELLS if o.cell_id == c.cell_id)


def test_number_in_a_function_body_edits_the_body() -> None:
    edit = draw("number_in_function")
    assert changed(edit) == {"c1": CELLS[1].source.replace("v * 3", "v * 4")} or changed(edit) == {
        "c1": CELLS[1].source.replace("v * 3", "v * 5")
    }


def test_string_edit_changes_text_for_people_only() -> None:
    for seed in range(8):
        src = changed(draw("string", seed))
        assert src in (
            {"c2": CELLS[2].source.replace("'rows:'", "'rows: (edited)'")},
            {"c5": CELLS[5].source.replace("label='line'", "label='line (edited)'")},
        )


def test_fit_keyword_and_plot_argument() -> None:
    assert changed(draw("fit_keyword")) == {"c4": CELLS[4].source.replace("deg=1", "deg=2")} or (
        changed(draw("fit_keyword")) == {"c4": CELLS[4].source.replace("deg=1", "deg=3")}
    )
    plot = changed(draw("plot_argument"))
    assert list(plot) == ["c5"] and "scale(xs)" in plot["c5"]
    assert plot["c5"] != CELLS[5].source


def test_rename_reaches_every_reader_and_nothing_else() -> None:
    for seed in range(10):
        edit = draw("rename", seed)
        old, new = edit.what.split(" in ")[0].split(" -> ")
        assert new == f"{old}_renamed" and edit.renamed == (old, new)
        for c in edit.cells:
            orig = next(o for o in CELLS if o.cell_id == c.cell_id)
            assert c.source == orig.source.replace(old, new) or (
                old not in orig.source and c.source == orig.source
            ), (old, c.source)


def test_inserted_cells_follow_the_binding_cell() -> None:
    frame = draw("filter_frame")
    ids = [c.cell_id for c in frame.cells]
    assert ids[ids.index("c2") + 1] == "field-filter" and frame.edited == {"field-filter"}
    src = frame.cells[ids.index("field-filter")].source
    assert src.startswith("df = df[") or src == "df = df.iloc[: len(df) - 1]"
    inplace = draw("inplace")
    ids = [c.cell_id for c in inplace.cells]
    at = ids.index("field-inplace")
    assert inplace.cells[at].source in {
        "xs.flat[0] = xs.flat[-1]",
        "df.drop(df.index[-1], inplace=True)",
        "items.append(items[-1])",
    }
    assert ids[at - 1] in BOUND


def test_structural_edits_keep_every_other_cell() -> None:
    gone = draw("delete")
    assert len(gone.cells) == len(CELLS) - 1 and not gone.edited
    for kind in ("swap", "move"):
        edit = draw(kind)
        assert sorted(c.cell_id for c in edit.cells) == sorted(c.cell_id for c in CELLS)
        assert [c.cell_id for c in edit.cells] != [c.cell_id for c in CELLS]
        assert changed(edit) == {}


def test_swap_takes_only_independent_neighbours() -> None:
    for seed in range(10):
        edit = draw("swap", seed)
        ids = [c.cell_id for c in edit.cells]
        moved = [i for i, c in enumerate(CELLS) if ids[i] != c.cell_id]
        assert len(moved) == 2 and moved[1] == moved[0] + 1
        # c3 reads df from c2, c4 reads df: neither pair may be swapped
        assert {ids[moved[0]], ids[moved[1]]} not in ({"c2", "c3"}, {"c2", "c4"}, {"c1", "c2"})


def test_an_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown edit kind"):
        draw_edit(random.Random(0), CELLS, BOUND, "shuffle")


def test_a_renamed_name_is_as_unreproducible_as_the_old_one() -> None:
    from benchmarks.field.__main__ import Baseline, unreproducible

    base = Baseline({}, {}, {"sample", "other"}, {}, set())
    edit = Edit(
        "rename", "sample -> sample_renamed in c1", (), renamed=("sample", "sample_renamed")
    )
    assert unreproducible(base, edit) == {"sample", "other", "sample_renamed"}
    kept = Edit("rename", "xs -> xs_renamed in c1", (), renamed=("xs", "xs_renamed"))
    assert unreproducible(base, kept) == {"sample", "other"}
