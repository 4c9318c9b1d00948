"""The names the staleness package raises its errors under: the shared classes themselves.

They are the ``ipykeep.api.errors`` classes (not subclasses: each error code has one class,
which the client rebuilds over RPC), so a probe failure reaches the caller as ``probe_failed``.
"""

from __future__ import annotations

from ipykeep.api.errors import IpykeepError, ProbeFailedError

StalenessError = IpykeepError
#: An in-kernel probe failed or answered something unreadable.
ProbeError = ProbeFailedError
