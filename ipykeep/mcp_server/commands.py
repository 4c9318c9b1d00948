"""The ``ipykeep mcp-serve`` command."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from ..core.config import load_config
from ..core.errors import IpykeepError, UsageError
from ..core.project import find_project_root


def _setup_logging() -> None:
    # stdout is the protocol channel on stdio: every log line goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("ipykeep").setLevel(logging.INFO)


def mcp_serve(
    transport: str = typer.Option("stdio", "--transport", help="'stdio' (default) or 'http' (streamable HTTP)."),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP: address to listen on (loopback unless IPYKEEP_MCP_TOKEN is set)."),
    port: int = typer.Option(0, "--port", help="HTTP: port; 0 picks a free one (the URL is printed on stderr)."),
    connection_file: Optional[Path] = typer.Option(
        None, "--connection-file", help="HTTP: write {url, headers} here (0600) once the server accepts requests."
    ),
    project: Optional[Path] = typer.Option(None, "--project", help="Project directory whose daemon to use (default: cwd)."),
) -> None:
    """Serve ipykeep's tools over MCP (stdio, or streamable HTTP with a bearer token)."""
    from .server import IpykeepMcp, serve_stdio

    _setup_logging()
    try:
        project_dir = (project or Path.cwd()).expanduser().resolve()
        if not project_dir.is_dir():
            raise UsageError(f"project directory {project_dir} does not exist", hint="pass an existing --project DIR")
        config = load_config(find_project_root(project_dir))
        app = IpykeepMcp(project_dir, config)
        if transport == "stdio":
            serve_stdio(app)
        elif transport == "http":
            from .http import HttpOptions, resolve_token, serve_http

            token, explicit = resolve_token(host)
            serve_http(app, HttpOptions(host, port, token, explicit, connection_file))
        else:
            raise UsageError(f"unknown transport {transport!r}", hint="use --transport stdio or --transport http")
    except IpykeepError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            typer.echo(f"hint: {exc.hint}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def register(app: typer.Typer) -> None:
    """Attach ``mcp-serve`` to the CLI app."""
    app.command("mcp-serve")(mcp_serve)
