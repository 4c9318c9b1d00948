"""The ``publish`` credential: a second token that can only read the published views.

The hosting server knows two tokens. The server's own (``--serve``'s URL) grants what the served
JupyterLab gives. The view token (a ``publish`` URL) identifies the fixed user
``VIEWER_USERNAME``, whom ``ViewerAuthorizer`` lets *read* the published copies under
``.ipykeep/publish/`` (contents API, ``/files/``) and the read-only pieces the JupyterLab page
loads (settings, themes, translations, kernel specs, status), and nothing else: no writing,
no other file or directory listing, no kernels, sessions (so no websocket, no execution),
terminals, conversion or events. The identity travels in Jupyter's signed login cookie, so a
browser that opened a publish URL stays a viewer on the following requests.
"""

# jupyter_server ships type information but leaves much of its API unannotated.
# mypy: untyped-calls-exclude=jupyter_server

from __future__ import annotations

import hmac
import posixpath
from typing import Any

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import PasswordIdentityProvider, User
from traitlets import Unicode

from ipykeep.serve.contents import PUBLISHED_DIR

#: the identity of whoever holds the view token (not a uuid: anonymous users get those)
VIEWER_USERNAME = "ipykeep-publish-viewer"
#: what a viewer may read besides the published views: what the page needs, nothing of the
#: project (``api``: status and identity; the rest is JupyterLab's own configuration)
VIEWER_READABLE = frozenset(
    {"api", "csp", "config", "kernelspecs", "settings", "themes", "translations", "listings"}
)
_PUBLISHED = PUBLISHED_DIR.replace("\\", "/")


class ViewTokenIdentityProvider(PasswordIdentityProvider):
    """Jupyter's token login, plus the view token, which logs in as ``VIEWER_USERNAME``."""

    view_token = Unicode("", config=True, help="the token of publish URLs (read-only)")

    async def get_user_token(self, handler: Any) -> User | None:
        given = self.get_token(handler) or ""
        if self.view_token and hmac.compare_digest(given.encode(), self.view_token.encode()):
            return User(VIEWER_USERNAME, "viewer", "Viewer", "V", None, None)
        user = await super().get_user_token(handler)
        if user is not None and user.username == VIEWER_USERNAME:
            # the server's token in a browser whose cookie still names the viewer: the token
            # is explicit, so the request gets the token's rights
            return self.generate_anonymous_user(handler)
        return user


class ViewerAuthorizer(Authorizer):
    """Every action for the server token's users; reading published views for the viewer."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        if getattr(user, "username", None) != VIEWER_USERNAME:
            return True
        if action != "read":
            return False
        if resource == "contents":  # the contents API and /files/
            return is_published(_request_path(handler))
        return resource in VIEWER_READABLE


def _request_path(handler: Any) -> str:
    kwargs = getattr(handler, "path_kwargs", None) or {}
    args = getattr(handler, "path_args", None) or ()
    path = kwargs.get("path")
    if path is None and args:
        path = args[0]
    return str(path or "")


def is_published(path: str) -> bool:
    """Whether an API path (``/a/b``, URL-decoded) is a published view or under one."""
    clean = posixpath.normpath("/" + path.replace("\\", "/")).lstrip("/")
    return clean == _PUBLISHED or clean.startswith(_PUBLISHED + "/")
