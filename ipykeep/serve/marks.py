"""Cell marks for the served page: ``GET /ipykeep/cells?path=NOTEBOOK`` (runs in the server).

The front-end extension (``labextension/ipykeep-serve``) polls this for each notebook it shows
and marks every code cell with ipykeep's view of it — fresh, stale, blocked, running or paused —
with the reason as the mark's hover text. The marks are the daemon's ``list_cells`` for the
kernel hosting that path (found in the adoption list, so a published copy is marked like its
notebook), i.e. the same plan ``run-stale`` shows. The request needs the server's token like
every other endpoint; the server reaches the daemon with the project's runtime descriptor.
"""

# jupyter_server ships type information but leaves much of its API unannotated.
# mypy: untyped-calls-exclude=jupyter_server

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ipykeep.api.errors import DaemonUnreachableError, IpykeepError, UnknownKernelError
from ipykeep.api.execution import LIST_CELLS
from ipykeep.api.records import CellState
from ipykeep.api.spec import KernelParams
from ipykeep.client.connection import DaemonClient, read_descriptor
from ipykeep.project.layout import ProjectPaths
from ipykeep.serve.adoption import read_spec

MarkState = Literal["fresh", "stale", "blocked", "running", "paused"]

#: what a cell in ``list_cells`` with no recorded reason is stale for
_DEFAULT_REASON = {"never_run": "never run", "failed": "its last run failed", "stale": "edited"}


@dataclass(frozen=True)
class CellMark:
    #: the nbformat cell id (JupyterLab's cell model id)
    id: str
    state: MarkState
    #: the hover text: the state and why
    title: str


def cell_marks(cells: list[CellState]) -> list[CellMark]:
    """The mark of each code cell (markdown and raw cells get none)."""
    return [_mark(c) for c in cells if c.cell_type == "code"]


def _mark(cell: CellState) -> CellMark:
    if cell.state == "running":
        if cell.paused:
            return CellMark(cell.cell_id, "paused", f"paused in the debugger at {cell.paused}")
        return CellMark(cell.cell_id, "running", "running")
    if cell.state == "ok":
        return CellMark(cell.cell_id, "fresh", "fresh: holds what a run of the notebook would give")
    reasons = cell.reasons or []
    messages = [str(r.get("message") or r.get("kind")) for r in reasons]
    if not messages:
        messages = [_DEFAULT_REASON.get(cell.state, cell.state)]
    # The plan blocks a cell that reads a name only a cell below it defines, and transitively
    # its readers; each of them carries a ``missing_producer`` reason (staleness.tracker_reasons).
    if any(r.get("kind") == "missing_producer" for r in reasons):
        return CellMark(
            cell.cell_id, "blocked", "blocked (a fresh run would fail): " + "; ".join(messages)
        )
    return CellMark(cell.cell_id, "stale", "stale: " + "; ".join(messages))


class CellMarksHandler(APIHandler):
    """GET /ipykeep/cells?path=NOTEBOOK: the marks of the cells of a served notebook."""

    # ipykeep's own resource: the view token of publish URLs may not use it (serve.viewer)
    auth_resource = "ipykeep"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.get_query_argument("path", "").strip("/")
        kernel_id = self._hosting_kernel(path)
        marks: list[CellMark] = []
        if kernel_id is not None:
            try:
                record = await self._client().ainvoke(LIST_CELLS, KernelParams(kernel_id=kernel_id))
                marks = cell_marks(record.cells)
            except UnknownKernelError:
                kernel_id = None  # closed since the adoption list was written
            except DaemonUnreachableError as exc:
                self.settings.pop("ipykeep_daemon_client", None)  # re-read the descriptor next time
                raise web.HTTPError(503, f"the ipykeep daemon did not answer: {exc}") from None
            except IpykeepError as exc:
                # e.g. the notebook is being rewritten and does not parse: no marks this time
                # (old ones would be wrong), and the next poll tries again.
                body = {"kernel_id": kernel_id, "cells": [], "error": exc.message}
                self.finish(json.dumps(body))
                return
        self.finish(json.dumps({"kernel_id": kernel_id, "cells": [asdict(m) for m in marks]}))

    def _hosting_kernel(self, path: str) -> str | None:
        spec = read_spec(Path(self.settings["ipykeep_spec_path"]))
        return next((k.kernel_id for k in spec.kernels if path in k.session_paths), None)

    def _client(self) -> DaemonClient:
        client: DaemonClient | None = self.settings.get("ipykeep_daemon_client")
        if client is None:
            root = Path(self.settings["ipykeep_serverapp"].root_dir)
            desc = read_descriptor(ProjectPaths(root))
            if desc is None:
                raise web.HTTPError(503, "the ipykeep daemon has no runtime descriptor")
            client = DaemonClient(desc)
            self.settings["ipykeep_daemon_client"] = client
        return client


def handlers(base_url: str) -> list[tuple[str, Any]]:
    return [(url_path_join(base_url, r"/ipykeep/cells"), CellMarksHandler)]
