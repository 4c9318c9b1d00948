"""The names the inspection package raises its errors under: the shared classes themselves.

They are the ``ipykeep.api.errors`` classes (not subclasses: each error code has one class,
which the client rebuilds over RPC), so an inspection error reaches the caller as it was raised.
"""

from __future__ import annotations

from ipykeep.api.errors import IpykeepError, UnknownNameError, UsageError

#: The kernel's answer could not be read (a bug or a stale in-kernel module): ``internal``.
InspectionError = IpykeepError
#: No such variable (``details`` carries ``name`` and close ``matches``).
UnknownVariableError = UnknownNameError
#: Not a name, attribute or constant-key path.
BadPathError = UsageError
