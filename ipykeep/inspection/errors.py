"""Errors of the inspection protocol, owned here so the package stands alone.

Each carries the ``code`` of the error envelope the engine answers with (the engine's
inspection service turns them into the shared error classes at its boundary), a message and a
hint saying what to do.
"""

from __future__ import annotations

from typing import Any, ClassVar


class InspectionError(Exception):
    """The kernel's answer could not be read (a bug or a stale in-kernel module)."""

    code: ClassVar[str] = "internal"

    def __init__(
        self, message: str, *, hint: str = "", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or {}

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UnknownVariableError(InspectionError):
    """No such variable (``details`` carries ``name`` and close ``matches``)."""

    code = "unknown_name"


class BadPathError(InspectionError):
    """Not a name, attribute or constant-key path."""

    code = "bad_argument"
