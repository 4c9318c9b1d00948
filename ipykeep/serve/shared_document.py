"""Inside the Jupyter server: ipykeep's reads and writes of a notebook's shared Y document.

With jupyter-collaboration, the server keeps one Y document per open notebook (a
``jupyter_server_ydoc`` room); the browsers edit it and the room saves it to the file. The
daemon reaches it through ``POST /ipykeep/document/<action>`` (token required), JSON in and out:

- ``read``: the live cells (id, type, source), unsaved typing included;
- ``edit``: one ``CellEdit``, version-checked against the live cell and applied to it; a
  stale version answers 409 with the refusal's message, hint and details;
- ``outputs``: cell id -> {source, outputs, execution_count}; a cell whose live source is
  no longer the one that ran keeps its source and gets no output (as on disk).

Each change is applied in one Y transaction on the server's event loop, so no browser update
lands between the version check and the edit, then saved at once (the room's own save).
"""

# jupyter_server leaves much of its API unannotated.
# mypy: untyped-calls-exclude=jupyter_server

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from pycrdt import Array, Map, Text
from tornado import web

from ipykeep.api.errors import IpykeepError
from ipykeep.project.cell_edits import CellEdit, apply_edit, cell_version

#: Where the room keeps a notebook: JSON file format, notebook content type.
FILE_FORMAT = "json"
CONTENT_TYPE = "notebook"


async def live_notebook(serverapp: Any, path: str) -> tuple[Any, Any]:
    """The room's live YNotebook for ``path`` (the room is created when nobody has it open)."""
    from jupyter_server_ydoc.utils import encode_file_path, room_id_from_encoded_path

    ext = serverapp.web_app.settings["jupyter_server_ydoc"]
    ydoc = await ext.get_document(
        path=path, content_type=CONTENT_TYPE, file_format=FILE_FORMAT, copy=False, create=True
    )
    file_id = serverapp.web_app.settings["file_id_manager"].index(path)
    room_id = room_id_from_encoded_path(encode_file_path(FILE_FORMAT, CONTENT_TYPE, file_id))
    room = await ext.ywebsocket_server.get_room(room_id)
    return ydoc, room


def _source(ycell: Any) -> str:
    return str(ycell["source"])


def _tags(ycell: Any) -> list[str]:
    meta = ycell.get("metadata")
    plain: dict[str, Any] = (meta.to_py() if isinstance(meta, Map) else meta) or {}
    tags = plain.get("tags") or []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def read_cells(ynb: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": str(c.get("id")),
            "cell_type": str(c.get("cell_type")),
            "source": _source(c),
            "tags": _tags(c),
        }
        for c in ynb.ycells
    ]


def _index_of(ynb: Any, cell_id: str) -> int | None:
    for i, c in enumerate(ynb.ycells):
        if c.get("id") == cell_id:
            return i
    return None


def apply_cell_edit(ynb: Any, edit: CellEdit, name: str) -> dict[str, Any]:
    """Check and apply ``edit`` against the live cells; only the cells it changes are touched,
    so a person typing in another cell keeps every keystroke."""
    # The one rule (versions, places, refusals) runs on a plain copy of the live cells ...
    node = _Node(read_cells(ynb))
    before = [c["id"] for c in node.cells]
    outcome = apply_edit(node, edit, name)
    # ... and the Y document gets the same change, in one transaction.
    with ynb.ydoc.transaction():
        if edit.action == "replace":
            pos = _index_of(ynb, outcome.cell_id)
            assert pos is not None and edit.source is not None
            ynb.set_cell(pos, source=edit.source)
        elif edit.action == "insert":
            made = next(c for c in node.cells if c["id"] == outcome.cell_id)
            value = {"id": made["id"], "cell_type": made["cell_type"], "source": made["source"]}
            value["metadata"] = {}
            if made["cell_type"] == "code":
                value.update(outputs=[], execution_count=None)
            ynb.ycells.insert(outcome.index, ynb.create_ycell(value))
        elif edit.action == "delete":
            pos = before.index(outcome.cell_id)
            del ynb.ycells[pos]
        else:  # move: a Y array moves by removing and inserting the cell's content
            pos = before.index(outcome.cell_id)
            cell = ynb.get_cell(pos)
            del ynb.ycells[pos]
            ynb.ycells.insert(outcome.index, ynb.create_ycell(cell))
    return {"cell_id": outcome.cell_id, "version": outcome.version, "index": outcome.index}


class _Node:
    """Just enough of an nbformat node for ``apply_edit``: ``.cells``, cells as dicts."""

    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self.cells = cells


def write_outputs(ynb: Any, updates: dict[str, Any]) -> dict[str, list[str]]:
    updated: list[str] = []
    skipped: list[str] = []
    with ynb.ydoc.transaction():
        for cell_id, out in updates.items():
            pos = _index_of(ynb, cell_id)
            if pos is None:
                continue
            ycell = ynb.ycells[pos]
            if cell_version(_source(ycell)) != cell_version(out["source"]):
                skipped.append(cell_id)
                continue
            # The browsers observe the cell's own outputs array: it is emptied and refilled,
            # never replaced by a new one.
            outputs = ycell.get("outputs")
            if not isinstance(outputs, Array):
                outputs = ycell["outputs"] = Array()
            outputs.clear()
            for o in out["outputs"]:
                o = dict(o)
                if o.get("output_type") == "stream":
                    text = o.get("text", "")
                    o["text"] = Text("".join(text) if isinstance(text, list) else text)
                outputs.append(Map(o))
            ycell["execution_count"] = out.get("execution_count")
            updated.append(cell_id)
    return {"updated": updated, "skipped_edited": skipped}


async def save_now(room: Any) -> None:
    """The room's own save, now rather than after its debounce delay."""
    task = room._save_to_disc()
    if task is not None:
        await task


class DocumentHandler(APIHandler):
    """POST /ipykeep/document/(read|edit|outputs): see the module docstring."""

    @web.authenticated
    async def post(self, action: str) -> None:
        body = json.loads(self.request.body or b"{}")
        path = str(body["path"])
        ynb, room = await live_notebook(self.settings["ipykeep_serverapp"], path)
        if action == "read":
            self.finish(json.dumps({"cells": read_cells(ynb)}))
            return
        if action == "edit":
            try:
                reply = apply_cell_edit(ynb, CellEdit(**body["edit"]), path.rsplit("/", 1)[-1])
            except IpykeepError as exc:
                self.set_status(409)
                self.finish(json.dumps({"error": exc.envelope()}))
                return
        elif action == "outputs":
            reply = write_outputs(ynb, body["updates"])
        else:
            raise web.HTTPError(404, f"no document action {action!r}")
        await save_now(room)
        self.finish(json.dumps(reply))
