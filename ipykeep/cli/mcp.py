"""The ``ipykeep mcp-serve`` command (the typer face of ``launch.serve``)."""

from __future__ import annotations

from pathlib import Path

import typer

from ipykeep.mcp_server.launch import ServeOptions, serve


def mcp_serve(
    transport: str = typer.Option(
        "stdio", "--transport", help="'stdio' (default) or 'http' (streamable HTTP)."
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="HTTP: address to listen on (loopback unless IPYKEEP_MCP_TOKEN is set).",
    ),
    port: int = typer.Option(
        0, "--port", help="HTTP: port; 0 picks a free one (the URL is printed on stderr)."
    ),
    connection_file: Path | None = typer.Option(
        None,
        "--connection-file",
        help="HTTP: write {url, headers} here (0600) once the server accepts requests.",
    ),
    project: Path | None = typer.Option(
        None,
        "--project",
        help="Project directory whose daemon to use (default: cwd). Hosts that may start the server elsewhere (Cursor) pass it.",
    ),
) -> None:
    """Serve ipykeep's tools over MCP (stdio, or streamable HTTP with a bearer token)."""
    code = serve(ServeOptions(transport, host, port, connection_file, project))
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Attach ``mcp-serve`` to the CLI app."""
    app.command("mcp-serve")(mcp_serve)
