"""The ``ipykeep`` console script: ``mcp-serve`` and the hot CLI commands start without typer.

Agent hosts time the MCP handshake from process start; see ``mcp_server/launch.py``.
"""

from __future__ import annotations

import sys


def main() -> None:
    from ipykeep._startup import trim_imports

    trim_imports()
    from ipykeep.mcp_server.launch import fast_main

    code = fast_main(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from ipykeep.cli.fast import (
        main as cli_main,  # the hot commands without typer; the rest go on to it
    )

    cli_main()
