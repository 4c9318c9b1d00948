"""Notebooks the scenarios run, the edits they make, and the nbclient run-all baseline."""

from __future__ import annotations

import shutil
import time
from collections.abc import Collection
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    """Write code cells given as ``(id, source)``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(src, id=cid) for cid, src in cells]
    nbformat.write(nb, path)
    return path


def set_source(path: Path, cell_id: str, source: str) -> None:
    """Edit one cell the way an agent's file tools would: rewrite the .ipynb on disk."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            cell.source = source
            break
    else:
        raise KeyError(f"no cell {cell_id} in {path}")
    nbformat.write(nb, path)


def write_csv(path: Path, rows: int) -> Path:
    """A real CSV with numeric and text columns, some missing values."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2020-01-01", periods=rows, freq="min").astype(str),
            "region": rng.choice(["north", "south", "east", "west"], rows),
            "product": rng.choice([f"p{i}" for i in range(40)], rows),
            "units": rng.integers(1, 50, rows),
            "unit_price": rng.random(rows) * 100,
            **{f"v{i}": rng.normal(size=rows) for i in range(5)},
        }
    )
    frame.loc[frame.sample(frac=0.01, random_state=0).index, "unit_price"] = None
    frame.to_csv(path, index=False)
    return path


def analysis_notebook(
    path: Path, *, load_sleep: float, cheap_cells: int = 20
) -> tuple[Path, str, str]:
    """A slow load (sleep + CSV parse) then ``cheap_cells`` analysis cells and a summary.

    Returns the path, the id of the downstream cell the scenario edits, and a source template
    for it (``{k}`` is the edit number).
    """
    cells = [
        ("imports", "import time\nimport pandas as pd"),
        ("load", f"time.sleep({load_sleep})\nraw = pd.read_csv('data.csv')\nprint(len(raw))"),
        (
            "clean",
            "clean = raw.dropna(subset=['unit_price']).copy()\n"
            "clean['revenue'] = clean['units'] * clean['unit_price']",
        ),
    ]
    for i in range(cheap_cells):
        col = f"v{i % 5}"
        kind = ("mean", "std", "median", "max")[i % 4]
        cells.append((f"stat{i}", f"stat{i} = float(clean[{col!r}].{kind}()) + {i}"))
    edited = f"stat{cheap_cells // 2}"
    template = f"stat{cheap_cells // 2} = float(clean['v0'].quantile(0.{{k:02d}}))"
    cells.append(
        (
            "summary",
            "summary = {'best': clean.groupby('region')['revenue'].sum().idxmax(), 'edited': "
            f"{edited}}}\nsummary",
        )
    )
    write_notebook(path, cells)
    return path, edited, template


def chain_notebook(path: Path, cells: int) -> Path:
    """``cells`` cheap cells with a realistic web of dependencies (each reads a few earlier
    names)."""
    sources = [("c0", "import math\nx0 = 1")]
    for i in range(1, cells):
        deps = sorted({i - 1, i // 2, i // 3})
        expr = " + ".join(f"x{d}" for d in deps)
        sources.append((f"c{i}", f"x{i} = ({expr}) % 1000 + math.sqrt({i})"))
    return write_notebook(path, sources)


def copy_example(dest: Path, name: str = "01_eda.ipynb") -> Path:
    """The repository's example notebook and its data, copied into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / name, dest / name)
    for data in EXAMPLES.glob("*.csv"):
        shutil.copy(data, dest / data.name)
    return dest / name


async def nbclient_run_all(path: Path, kernel_name: str = "python3") -> int:
    """Execute the whole notebook with nbclient in a fresh kernel; the number of code cells run."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name=kernel_name, resources={"metadata": {"path": str(path.parent)}}
    )
    await client.async_execute()
    return sum(1 for c in nb.cells if c.cell_type == "code")


async def nbclient_cells(path: Path, timed_ids: Collection[str]) -> tuple[float, int]:
    """Execute the whole notebook with nbclient in a fresh kernel, cell by cell; the seconds
    spent in the cells of ``timed_ids`` (each cell's ``async_execute_cell``) and their count.
    The other cells run too, untimed, so the timed ones find the state they need."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    seconds, count = 0.0, 0
    async with client.async_setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            start = time.perf_counter()
            await client.async_execute_cell(cell, index)
            if cell.get("id") in timed_ids:
                seconds += time.perf_counter() - start
                count += 1
    return seconds, count
