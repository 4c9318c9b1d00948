"""The ``ipykeep`` console script: ``mcp-serve`` starts without loading the whole CLI.

Agent hosts time the MCP handshake from process start; see ``mcp_server/launch.py``.
"""

from __future__ import annotations

import sys


def main() -> None:
    from ._startup import trim_imports

    trim_imports()
    from .mcp_server.launch import fast_main

    code = fast_main(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .cli import main as cli_main

    cli_main()
