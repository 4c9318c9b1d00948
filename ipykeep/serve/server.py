"""The Jupyter server process: ``python -m ipykeep.serve.server SETTINGS_JSON``.

Started by the daemon (``launcher``). ``SETTINGS_JSON`` (0600) carries the front end (lab or
notebook), port, root dir, the two tokens (the server's, and the read-only one of ``publish``
URLs, see ``viewer``) and the path of the adoption list. The server is a stock
JupyterLab / Notebook 7 server with ipykeep's kernel manager (``kernels``) and these additions:

- ``POST /ipykeep/sync`` (token required) re-reads the adoption list: adopt new kernels,
  re-adopt restarted ones, let go of removed ones, and register a session per notebook path so
  the front end opens it bound to its kernel;
- the restart action is answered 403 (Jupyter's own handler would turn the refusal into a 500),
  and a small prebuilt front-end extension shows that message (JupyterLab itself only logs it
  and keeps the kernel "Restarting");
- ``GET /ipykeep/cells?path=...`` (token required) gives the page ipykeep's mark of each cell
  (``marks``);
- with collaboration, the shared-document endpoints (``shared_document``), and a file write to
  an open notebook merged into its shared document instead of reloading it (``file_merge``);
- a watchdog stops the server within a second when the daemon that started it is gone.
"""

# jupyter_server ships type information but leaves much of its API unannotated.
# mypy: untyped-calls-exclude=jupyter_server

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.services.kernels.handlers import (
    KernelActionHandler,
    _kernel_action_regex,
    _kernel_id_regex,
)
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.ioloop import PeriodicCallback
from traitlets.config import Config

from ipykeep.serve import marks
from ipykeep.serve.adoption import AdoptionSpec, read_spec
from ipykeep.serve.kernels import REFUSE_RESTART, AdoptingKernelManager
from ipykeep.serve.viewer import ViewerAuthorizer, ViewTokenIdentityProvider

#: Prebuilt front-end extensions served with the page (no build step, no install).
LABEXTENSIONS = Path(__file__).resolve().parent / "labextension"


def server_config(settings: dict[str, Any]) -> Config:
    """Traitlets configuration of the hosting server (token and ports from ``settings``)."""
    cfg = Config()
    cfg.ServerApp.ip = "127.0.0.1"
    cfg.ServerApp.port = int(settings["port"])
    cfg.ServerApp.port_retries = 0
    cfg.ServerApp.open_browser = False
    cfg.ServerApp.root_dir = settings["root_dir"]
    cfg.ServerApp.kernel_manager_class = "ipykeep.serve.kernels.AdoptingKernelManager"
    cfg.ServerApp.kernel_spec_manager_class = "ipykeep.serve.kernels.AdoptionKernelSpecManager"
    cfg.ServerApp.contents_manager_class = "ipykeep.serve.contents.ReplacingFileManager"
    cfg.ServerApp.kernel_websocket_connection_class = (
        "ipykeep.serve.kernels.GuardedChannelsConnection"
    )
    cfg.ServerApp.shutdown_no_activity_timeout = 0
    # The server runs as whoever runs the daemon (root in containers and CI).
    cfg.ServerApp.allow_root = True
    # No terminals: a token holder gets the notebook and its kernel, not a shell on the machine.
    cfg.ServerApp.terminals_enabled = False
    cfg.IdentityProvider.token = settings["token"]
    # publish URLs carry a second token that can only read the published views (``viewer``)
    cfg.ServerApp.identity_provider_class = "ipykeep.serve.viewer.ViewTokenIdentityProvider"
    cfg.ServerApp.authorizer_class = "ipykeep.serve.viewer.ViewerAuthorizer"
    cfg.ViewTokenIdentityProvider.view_token = settings["view_token"]
    cfg.MappingKernelManager.cull_idle_timeout = 0
    # Published copies live under .ipykeep/publish; without this Jupyter would hide them.
    cfg.ContentsManager.allow_hidden = True
    cfg.LabApp.news_url = None
    cfg.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
    cfg.LabServerApp.open_browser = False
    # ipykeep-serve: shows why a restart was refused instead of "Restarting" forever (see
    # labextension/ipykeep-serve/static/remoteEntry.js).
    cfg.LabApp.extra_labextensions_path = [str(LABEXTENSIONS)]
    cfg.LabServerApp.extra_labextensions_path = [str(LABEXTENSIONS)]
    # jupyter-collaboration switches itself on wherever it is installed; ipykeep's server is a
    # collaborative one only when the daemon chose it (docs/editing-and-console.md).
    collaboration = bool(settings.get("collaboration"))
    cfg.YDocExtension.disable_rtc = not collaboration
    if collaboration:
        # Its update store and session list would be files at the project root: keep them in
        # the server's private directory with the rest of its runtime files.
        private = Path(settings["spec_path"]).parent
        cfg.SQLiteYStore.db_path = str(private / "ystore.db")
        cfg.YDocExtension.session_store_path = str(private / "collaboration_sessions.json")
    return cfg


class SyncHandler(APIHandler):
    """POST /ipykeep/sync: re-read the adoption list and reconcile (the server token only)."""

    auth_resource = "ipykeep"

    @web.authenticated
    @authorized
    async def post(self) -> None:
        hosted = await reconcile(
            self.settings["ipykeep_serverapp"], Path(self.settings["ipykeep_spec_path"])
        )
        self.finish(json.dumps({"kernels": hosted}))


class RefusingKernelActionHandler(KernelActionHandler):
    """Interrupt passes through; restart is refused with 403 (see ``kernels``)."""

    @web.authenticated
    async def post(self, kernel_id: str, action: str) -> None:
        if action == "restart":
            self.kernel_manager._check_kernel_id(kernel_id)
            raise web.HTTPError(403, REFUSE_RESTART)
        # tornado types ``authenticated`` handlers as Optional[Awaitable]; this post is async def.
        pending = super().post(kernel_id, action)
        assert pending is not None
        await pending


_reconcile_lock: asyncio.Lock | None = None


async def reconcile(serverapp: Any, spec_path: Path) -> list[str]:
    """Serialised: the start-up sync and a daemon's sync may overlap."""
    global _reconcile_lock
    if _reconcile_lock is None:
        _reconcile_lock = asyncio.Lock()
    async with _reconcile_lock:
        return await _reconcile(serverapp, spec_path)


async def _reconcile(serverapp: Any, spec_path: Path) -> list[str]:
    km: AdoptingKernelManager = serverapp.kernel_manager
    sm = serverapp.session_manager
    spec: AdoptionSpec = read_spec(spec_path)
    wanted = {k.server_id: k for k in spec.kernels}
    # A tunnel's public origin must pass Jupyter's websocket origin check.
    serverapp.web_app.settings["allow_origin"] = spec.origin or ""
    sessions = await sm.list_sessions()
    for kid in list(km.list_kernel_ids()):
        k = wanted.get(kid)
        moved = k is not None and (
            km.adopted_pid(kid) != k.pid or km.adopted_connection_file(kid) != k.connection_file
        )
        if k is None or moved:
            for s in sessions:
                if s["kernel"]["id"] == kid:
                    sm.cursor.execute("DELETE FROM session WHERE session_id=?", (s["id"],))
            await km.detach(kid)
    sessions = await sm.list_sessions()
    bound = {(s["path"], s["kernel"]["id"]) for s in sessions}
    for kid, k in wanted.items():
        if kid not in km:
            if not Path(k.connection_file).exists():
                serverapp.log.warning(
                    "kernel %s has no connection file any more; not adopted", k.kernel_id
                )
                continue
            await km.adopt(
                kid, k.connection_file, k.pid, f"ipykeep {k.kernel_id}", k.interrupt_command
            )
        for path in k.session_paths:
            if (path, kid) in bound:
                continue
            # A session for this path bound to another kernel would make the front end pick it.
            for s in sessions:
                if s["path"] == path and s["kernel"]["id"] != kid:
                    sm.cursor.execute("DELETE FROM session WHERE session_id=?", (s["id"],))
            await sm.create_session(path=path, name=Path(path).name, type="notebook", kernel_id=kid)
    return sorted(km.list_kernel_ids())


def document_handlers(base: str, collaboration: bool) -> list[tuple[str, Any]]:
    """The shared-document endpoints, when the notebook is a collaborative document."""
    if not collaboration:
        return []
    from ipykeep.serve.shared_document import DocumentHandler

    return [(url_path_join(base, r"/ipykeep/document/(read|edit|outputs)"), DocumentHandler)]


def replace_handler(web_app: Any, old: type, new: type) -> int:
    """Serve ``old``'s routes with ``new`` (a subclass); returns how many routes changed.

    An extension's routes are added before ipykeep's and match first, so an override cannot
    be added beside them: the class in their rule is swapped instead."""
    changed = 0
    pending = list(web_app.default_router.rules)
    while pending:
        rule = pending.pop()
        target = rule.target
        if target is old:
            rule.target = new
            changed += 1
        elif hasattr(target, "rules"):
            pending.extend(target.rules)
    return changed


#: JupyterLab's plugin that asks "Would you like to get notified about official Jupyter
#: news?" on a fresh profile (the news feed itself is off: ``LabApp.news_url = None``).
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"


def quiet_page_config(previous: Any) -> Any:
    """A page-config hook that disables the announcements plugin (after ``previous``'s)."""

    def hook(handler: Any, page_config: dict[str, Any]) -> dict[str, Any]:
        if previous is not None:
            page_config = previous(handler, page_config)
        disabled = list(page_config.get("disabledExtensions") or [])
        if ANNOUNCEMENTS_PLUGIN not in disabled:
            page_config["disabledExtensions"] = [*disabled, ANNOUNCEMENTS_PLUGIN]
        return page_config

    return hook


def install(
    serverapp: Any, spec_path: Path, daemon_pid: int, *, collaboration: bool = False
) -> None:
    """Add ipykeep's handlers and watchdog to an initialized server."""
    web_app = serverapp.web_app
    web_app.settings["ipykeep_serverapp"] = serverapp
    if collaboration:
        from ipykeep.serve import file_merge

        # Before any room exists: a room binds its out-of-band handler when it is made.
        file_merge.install()
        from jupyter_server_ydoc.handlers import DocSessionHandler

        from ipykeep.serve.shared_document import DocumentSessionHandler

        if not replace_handler(web_app, DocSessionHandler, DocumentSessionHandler):
            # its route moved: without the guard a room could be asked for ipykeep's state
            sys.exit("jupyter-collaboration's session route was not found; ipykeep cannot serve")
    web_app.settings["ipykeep_spec_path"] = str(spec_path)
    web_app.settings["page_config_hook"] = quiet_page_config(
        web_app.settings.get("page_config_hook")
    )
    base = web_app.settings.get("base_url", "/")
    # add_handlers puts these before the server's own rules, so they take precedence.
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, r"/ipykeep/sync"), SyncHandler),
            *marks.handlers(base),
            *document_handlers(base, collaboration),
            (
                url_path_join(
                    base, r"/api/kernels/%s/%s" % (_kernel_id_regex, _kernel_action_regex)
                ),
                RefusingKernelActionHandler,
            ),
        ],
    )

    def watchdog() -> None:
        if os.getppid() != daemon_pid:
            serverapp.log.warning("the ipykeep daemon (pid %d) is gone; stopping", daemon_pid)
            os.kill(os.getpid(), signal.SIGTERM)

    PeriodicCallback(watchdog, 1000).start()

    async def first_sync() -> None:
        try:
            await reconcile(serverapp, spec_path)
        except Exception:
            serverapp.log.exception("could not adopt ipykeep's kernels")

    serverapp.io_loop.add_callback(first_sync)


class SecretMaskingStream(io.TextIOBase):
    """The server's stderr (its log file) with the two tokens masked wherever they appear.

    Jupyter's access log hides a URL's token, but not every message does: a refused websocket
    is logged by the authorizer with the URL it was asked for, token and all. Masking the
    stream every handler writes to covers those and any message added later."""

    def __init__(self, stream: IO[str], secrets: Iterable[str]) -> None:
        self._stream = stream
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def write(self, text: str) -> int:
        for secret in self._secrets:
            text = text.replace(secret, "[token]")
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return False


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    settings_path = Path(args[0])
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    # before any log handler is made: each takes the sys.stderr of the moment
    sys.stderr = SecretMaskingStream(sys.stderr, (settings["token"], settings["view_token"]))
    app_class: type[ExtensionApp]  # both apps are Jupyter Server extension apps
    if settings["command"] == "notebook":
        from notebook.app import JupyterNotebookApp

        app_class = JupyterNotebookApp
    else:
        from jupyterlab.labapp import LabApp

        app_class = LabApp
    serverapp = app_class.initialize_server(argv=[], config=server_config(settings))
    # The token is ipykeep's even if a user configuration file sets another one.
    serverapp.identity_provider.token = settings["token"]
    if not isinstance(serverapp.identity_provider, ViewTokenIdentityProvider) or not isinstance(
        serverapp.authorizer, ViewerAuthorizer
    ):
        sys.exit(
            "a Jupyter configuration file overrides ServerApp.identity_provider_class or "
            "authorizer_class; ipykeep cannot serve (publish URLs would not be read-only)"
        )
    serverapp.identity_provider.view_token = settings["view_token"]
    if not isinstance(serverapp.kernel_manager, AdoptingKernelManager):
        sys.exit(
            "a Jupyter configuration file overrides ServerApp.kernel_manager_class; "
            "ipykeep cannot serve"
        )
    install(
        serverapp,
        Path(settings["spec_path"]),
        int(settings["daemon_pid"]),
        collaboration=bool(settings.get("collaboration")),
    )
    serverapp.start()


if __name__ == "__main__":
    main()
