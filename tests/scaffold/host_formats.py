"""Reading host files the way the hosts do: TOML with the standard parser where Python has one."""

from __future__ import annotations

import sys
from typing import Any

# A version check rather than try/except ImportError: mypy follows it and types each branch.
if sys.version_info >= (3, 11):
    import tomllib

    def toml_loads(text: str) -> dict[str, Any]:
        return tomllib.loads(text)

else:  # pragma: no cover - Python 3.10 has no tomllib
    import tomlkit

    def toml_loads(text: str) -> dict[str, Any]:
        loaded: dict[str, Any] = tomlkit.parse(text).unwrap()
        return loaded
