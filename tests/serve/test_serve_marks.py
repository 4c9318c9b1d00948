"""JupyterLab marks each cell with ipykeep's view of it, live, after the agent's edits and runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.serve.conftest import ARTIFACTS, Served, run_cli, serving
from tests.serve.test_serve_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)"
    ),
]

#: (cell id, source) of the code cells, after a markdown title (so cell N is code cell N-1)
CELLS = [
    ("load", "raw = [1, 2, 3]"),
    ("clean", "clean = [x * 2 for x in raw]"),
    ("total", "total = sum(clean)\nprint('total is', total)"),
    ("orphan", "print(defined_below)"),
    ("other", "defined_below = 1"),
]


def _write_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_markdown_cell("# marks")]
    for cell_id, source in CELLS:
        cell = nbformat.v4.new_code_cell(source)
        cell.id = cell_id
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory, _write_notebook) as served:
        yield served


#: Each code cell's mark in the page (the ipykeep-<state> class on its node) and its prompt's
#: hover text, in notebook order. The page matches marks to cells by JupyterLab's cell model id,
#: so ids that differed from the file's would leave the cells unmarked and fail here.
MARKS_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  return Array.from(panel.querySelectorAll('.jp-Notebook .jp-CodeCell'), (node) => {
    const mark = Array.from(node.classList).find((c) => c.startsWith('ipykeep-'));
    const prompt = node.querySelector('.jp-InputPrompt');
    return [mark ? mark.slice('ipykeep-'.length) : null, prompt && prompt.getAttribute('title')];
  });
}"""


def _wait_for_marks(page: Any, want: dict[str, str], what: str) -> dict[str, list[Any]]:
    """Wait until each named cell carries the wanted mark and a hover text (JupyterLab renders a
    cell's prompt lazily, and the next poll titles it); returns every cell's [state, title]."""
    order = [cell_id for cell_id, _ in CELLS]
    wanted = [[order.index(cell_id), state] for cell_id, state in want.items()]
    check = (
        f"(wanted) => {{ const m = ({MARKS_JS})();"
        " return !!m && wanted.every(([i, s]) => m[i] && m[i][0] === s && !!m[i][1]); }"
    )
    try:
        page.wait_for_function(check, arg=wanted, timeout=60_000)
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "serve-marks-failed.png"))
        raise AssertionError(f"{what}: marks {page.evaluate(MARKS_JS)}, wanted {want}") from None
    return dict(zip(order, page.evaluate(MARKS_JS), strict=True))


def test_an_agents_edit_marks_the_cell_and_its_readers_stale_until_run_stale(
    served: Served,
) -> None:
    from playwright.sync_api import sync_playwright

    res = run_cli("run-stale", "--execute", cwd=served.root)
    assert res.returncode == 0, res.stdout + res.stderr
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(served.url)
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
            marks = _wait_for_marks(
                page,
                {
                    "load": "fresh",
                    "clean": "fresh",
                    "total": "fresh",
                    "orphan": "blocked",
                    "other": "fresh",
                },
                "after the first run",
            )
            assert "defined_below" in marks["orphan"][1], marks

            # The agent edits cell "clean" with the versioned edit tool.
            cells = served.rpc("list_cells")["cells"]
            version = next(c["version"] for c in cells if c["cell_id"] == "clean")
            res = run_cli(
                "edit-cell",
                "clean",
                # slow enough for the page to see it running
                "import time\ntime.sleep(4)\nclean = [x * 3 for x in raw]",
                "--version",
                version,
                "--json",
                cwd=served.root,
            )
            assert res.returncode == 0, res.stdout + res.stderr
            assert "total" in json.dumps(json.loads(res.stdout)), res.stdout
            marks = _wait_for_marks(
                page,
                {"load": "fresh", "clean": "stale", "total": "stale", "other": "fresh"},
                "after the agent's edit",
            )
            assert marks["clean"][1].startswith("stale: ") and "edited" in marks["clean"][1]
            # The reader says what it uses and from where (cell 2: the markdown title is cell 0).
            assert "uses clean from cell 2 (edited)" in marks["total"][1], marks
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "serve-marks-stale.png"))

            with ThreadPoolExecutor(1) as pool:
                run = pool.submit(run_cli, "run-stale", "--execute", cwd=served.root)
                _wait_for_marks(page, {"clean": "running"}, "while run-stale runs the edit")
                res = run.result()
            assert res.returncode == 0, res.stdout + res.stderr
            _wait_for_marks(
                page,
                {"load": "fresh", "clean": "fresh", "total": "fresh", "other": "fresh"},
                "after run-stale --execute",
            )
        finally:
            browser.close()
