"""Errors of the serving layer (subclasses of the shared hierarchy, rebuilt by code over RPC)."""

from __future__ import annotations

from ipykeep.api.errors import IpykeepError


class ServeError(IpykeepError):
    """The Jupyter server could not be started or reached."""

    code = "serve_failed"
    exit_code = 1


class TunnelError(IpykeepError):
    """``publish --tunnel`` could not give a public URL (never falls back to a local one)."""

    code = "tunnel_failed"
    exit_code = 1
