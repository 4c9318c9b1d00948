"""The copy of a kernel's notebook that ``publish`` shows, with the named cells highlighted.

The user's notebook is never touched: ``publish`` renders a copy under
``.ipykeep/publish/<kernel_id>/`` (the bound notebook as it is on disk, or for a scratch kernel
its archival record). Each highlighted cell gets

- a Markdown caption cell inserted just above it (``**▶ caption**``, tagged
  ``ipykeep-caption``), which every front end shows without any extension, and
- the tag ``ipykeep-highlight`` plus ``metadata.ipykeep.caption`` on the cell itself, for
  tools that read notebook metadata.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ipykeep.api.errors import UnknownCellError
from ipykeep.project.atomic import atomic_write_text
from ipykeep.project.layout import private_dir
from ipykeep.project.notebook import new_markdown_cell, read_notebook_node, writes
from ipykeep.serve.adoption import write_private_json

CAPTION_TAG = "ipykeep-caption"
HIGHLIGHT_TAG = "ipykeep-highlight"


def _resolve(nb: Any, ref: str, handles: list[str | None]) -> int:
    """Index of the cell named by ``ref``: cell id, execution handle (records), or 0-based index."""
    for i, cell in enumerate(nb.cells):
        if cell.get("id") == ref:
            return i
    if ref in handles:
        return handles.index(ref)
    if ref.isdigit() and int(ref) < len(nb.cells):
        return int(ref)
    raise UnknownCellError(
        f"no cell {ref!r} to highlight (the view has {len(nb.cells)} cells)",
        hint="name cells by id or 0-based index (`ipykeep status`); "
        "for a scratch kernel by handle (c3)",
    )


def highlight(nb: Any, captions: dict[str, str], handles: list[str | None] | None = None) -> Any:
    """A copy of ``nb`` with a caption cell above each named cell (names resolved first)."""
    nb = copy.deepcopy(nb)
    handles = handles or [None] * len(nb.cells)
    targets = sorted(
        ((_resolve(nb, ref, handles), text) for ref, text in captions.items()), reverse=True
    )
    for index, text in targets:
        cell = nb.cells[index]
        tags = list(cell.metadata.get("tags", []))
        if HIGHLIGHT_TAG not in tags:
            tags.append(HIGHLIGHT_TAG)
        cell.metadata["tags"] = tags
        cell.metadata["ipykeep"] = {"caption": text}
        caption = new_markdown_cell(f"**▶ {text}**")
        caption.metadata["tags"] = [CAPTION_TAG]
        nb.cells.insert(index, caption)
    return nb


def notebook_view(path: Path) -> Any:
    return read_notebook_node(path)


def write_view(target: Path, nb: Any) -> bool:
    """Write the view if it differs from what is there; True when written."""
    text = writes(nb)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return False
    private_dir(target.parent)  # under .ipykeep/: the owner's, like the rest of the state
    atomic_write_text(target, text, mode=0o600)
    return True


__all__ = [
    "highlight",
    "notebook_view",
    "write_view",
    "write_private_json",
    "CAPTION_TAG",
    "HIGHLIGHT_TAG",
]
