"""The ``ipykeep mcp-serve`` command: its options as ``ServeOptions``, run by ``launch.serve``."""

from __future__ import annotations

from pathlib import Path

from ipykeep.mcp_server.launch import ServeOptions, serve


def serve_options(
    transport: str, host: str, port: int, connection_file: Path | None, project: Path | None
) -> ServeOptions:
    return ServeOptions(transport, host, port, connection_file, project)


def mcp_serve(
    transport: str, host: str, port: int, connection_file: Path | None, project: Path | None
) -> int:
    return serve(serve_options(transport, host, port, connection_file, project))
