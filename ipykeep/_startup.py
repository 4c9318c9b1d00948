"""Start-up time for the short-lived processes (CLI, daemon, MCP server).

jsonschema (imported by nbformat) imports ``rfc3987_syntax`` when it is installed (the Jupyter
server stack pulls it in); that module compiles a grammar at import and costs ~3 s, for an
"iri" format check nbformat never uses. Marking it absent makes jsonschema skip that one
format checker. Only ipykeep's own entry points call this, never a library import.
"""

from __future__ import annotations

import sys


def trim_imports() -> None:
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
