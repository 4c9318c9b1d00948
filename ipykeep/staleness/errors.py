"""Errors of the staleness package, owned here so the package stands alone (it imports nothing
from the engine). The engine's staleness service catches them at its boundary."""

from __future__ import annotations

from typing import ClassVar


class StalenessError(Exception):
    code: ClassVar[str] = "internal"

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ProbeError(StalenessError):
    """An in-kernel probe failed or answered something unreadable."""

    code = "probe_failed"
