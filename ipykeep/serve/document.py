"""The daemon's handle on a served notebook's shared document (``HostingState.document``).

Each call is one token-authenticated request to the Jupyter server's
``/ipykeep/document/<action>`` (``shared_document``), run in a worker thread. A refused edit
comes back as the same error the file mode raises (rebuilt from its envelope), so callers see
one ``stale_version`` whichever document the notebook is.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
from dataclasses import asdict
from typing import Any

from ipykeep.api.error_codes import error_from_envelope
from ipykeep.project.notebook import CellOutputs
from ipykeep.serve.errors import ServeError


class SharedDocument:
    def __init__(self, server: Any, api_path: str) -> None:
        self.server = server  # launcher.JupyterServer
        self.api_path = api_path

    async def _call(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = {"path": self.api_path, **body}
        try:
            reply = await asyncio.to_thread(
                self.server.request, "POST", f"/ipykeep/document/{action}", payload
            )
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                raise error_from_envelope(json.loads(exc.read())["error"]) from None
            raise self._unreachable(exc) from None
        except (OSError, urllib.error.URLError) as exc:
            raise self._unreachable(exc) from None
        return dict(reply or {})

    def _unreachable(self, exc: Exception) -> ServeError:
        return ServeError(
            f"the shared document of {self.api_path} did not answer: {exc}",
            hint=f"see {self.server.log_path}",
        )

    async def read_cells(self) -> list[dict[str, Any]]:
        return list((await self._call("read", {}))["cells"])

    async def edit(self, edit: dict[str, Any]) -> dict[str, Any]:
        return await self._call("edit", {"edit": edit})

    async def write_outputs(self, updates: dict[str, Any]) -> dict[str, list[str]]:
        plain = {
            cid: asdict(out) if isinstance(out, CellOutputs) else out
            for cid, out in updates.items()
        }
        reply = await self._call("outputs", {"updates": plain})
        return {k: list(v) for k, v in reply.items()}
