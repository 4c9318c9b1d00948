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
import os
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server_ydoc.handlers import DocSessionHandler
from pycrdt import Array, Map, Text
from tornado import web

from ipykeep.api.errors import IpykeepError
from ipykeep.project.cell_edits import CellEdit, apply_edit, cell_version
from ipykeep.serve.cell_merge import NOTE_KEY, Merged, canonical
from ipykeep.serve.contents import reachable

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


def _metadata(ycell: Any) -> dict[str, Any]:
    meta = ycell.get("metadata")
    plain = (meta.to_py() if isinstance(meta, Map) else meta) or {}
    return plain if isinstance(plain, dict) else {}


def _tags(ycell: Any) -> list[str]:
    tags = _metadata(ycell).get("tags") or []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def read_cells(ynb: Any) -> list[dict[str, Any]]:
    cells = []
    for c in ynb.ycells:
        cell: dict[str, Any] = {
            "id": str(c.get("id")),
            "cell_type": str(c.get("cell_type")),
            "source": _source(c),
            "tags": _tags(c),
        }
        # A merge's note of a file write it could not apply (``cell_merge``): the daemon
        # tells the agent about it.
        conflict = (_metadata(c).get(NOTE_KEY) or {}).get("conflict")
        if isinstance(conflict, dict):
            cell["conflict"] = conflict
        cells.append(cell)
    return cells


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
            _set_outputs(ycell, out["outputs"], out.get("execution_count"))
            updated.append(cell_id)
    return {"updated": updated, "skipped_edited": skipped}


def _set_outputs(ycell: Any, outputs: list[dict[str, Any]], execution_count: Any) -> None:
    # The browsers observe the cell's own outputs array: it is emptied and refilled, never
    # replaced by a new one.
    youtputs = ycell.get("outputs")
    if not isinstance(youtputs, Array):
        youtputs = ycell["outputs"] = Array()
    youtputs.clear()
    for o in outputs:
        o = dict(o)
        if o.get("output_type") == "stream":
            text = o.get("text", "")
            o["text"] = Text("".join(text) if isinstance(text, list) else text)
        youtputs.append(Map(o))
    ycell["execution_count"] = execution_count


def apply_merged_cells(ynb: Any, merged: Merged) -> None:
    """Make the live cells ``merged.cells`` (``cell_merge``), in one transaction, touching only
    what differs: a cell the merge left as it is keeps its Y text (and the person's cursor)."""
    target = [str(c["id"]) for c in merged.cells]
    wanted = set(target)
    with ynb.ydoc.transaction():
        for i in reversed(range(len(ynb.ycells))):
            if ynb.ycells[i].get("id") not in wanted:
                del ynb.ycells[i]
        for i, cell in enumerate(merged.cells):
            live = [c.get("id") for c in ynb.ycells]
            if i < len(live) and live[i] == cell["id"]:
                _update_cell(ynb, i, cell)
                continue
            if cell["id"] in live[i:]:  # moved: a Y array moves by removing and inserting
                del ynb.ycells[live.index(cell["id"], i)]
            ynb.ycells.insert(i, ynb.create_ycell(_with_defaults(cell)))
        meta = ynb.ydoc.get("meta", type=Map)
        live = meta.get("metadata")
        if canonical(live.to_py() if isinstance(live, Map) else live) != canonical(merged.metadata):
            meta["metadata"] = Map(merged.metadata)


def _update_cell(ynb: Any, index: int, cell: dict[str, Any]) -> None:
    live = ynb.get_cell(index)
    if live.get("cell_type") != cell.get("cell_type"):
        ynb.set_cell(index, _with_defaults(cell))
        return
    ycell = ynb.ycells[index]
    if canonical(live.get("source")) != canonical(cell.get("source")):
        ynb.set_cell(index, source=str(canonical(cell.get("source")) or ""))
    if cell.get("cell_type") == "code" and (
        canonical(live.get("outputs")) != canonical(cell.get("outputs"))
        or live.get("execution_count") != cell.get("execution_count")
    ):
        _set_outputs(ycell, list(cell.get("outputs") or []), cell.get("execution_count"))
    if canonical(live.get("metadata")) != canonical(cell.get("metadata")):
        ycell["metadata"] = Map(dict(cell.get("metadata") or {}))
    if "attachments" in cell and canonical(live.get("attachments")) != canonical(
        cell["attachments"]
    ):
        ycell["attachments"] = cell["attachments"]


def _with_defaults(cell: dict[str, Any]) -> dict[str, Any]:
    value = {"metadata": {}, **cell}
    if value.get("cell_type") == "code":
        value.setdefault("outputs", [])
        value.setdefault("execution_count", None)
    return value


async def save_now(room: Any) -> None:
    """The room's own save, now rather than after its debounce delay."""
    task = room._save_to_disc()
    if task is not None:
        await task


class DocumentSessionHandler(DocSessionHandler):  # type: ignore[misc]  # (untyped package)
    """PUT /api/collaboration/session/PATH: a room only for what the contents API serves.

    jupyter-collaboration indexes any path it is given and answers with a file id; a room for
    ipykeep's state, or for a file behind a symlink leaving the project, would then fail to
    load (a traceback each time a client retries). Such a path is refused here, before it is
    indexed, with the contents API's own 404."""

    @web.authenticated
    @authorized
    async def put(self, path: str) -> Any:
        root = self.settings["ipykeep_serverapp"].root_dir
        if not reachable(os.path.join(root, path), root):
            raise web.HTTPError(404, f"{path} is not in the served project")
        return await super().put(path)


class DocumentHandler(APIHandler):
    """POST /ipykeep/document/(read|edit|outputs): see the module docstring."""

    # ipykeep's own resource: the view token of publish URLs may not use it (serve.viewer)
    auth_resource = "ipykeep"

    @web.authenticated
    @authorized
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
