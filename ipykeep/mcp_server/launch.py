"""Starting the MCP server quickly: hosts send ``initialize`` as soon as the process exists.

Claude Code starts its first request before a slow server is ready and Codex exposes the tools
only from its second request, so ``ipykeep mcp-serve`` imports only what the handshake needs:
the SDK, the tool catalog and the configuration. The daemon client, the result renderers and
the notebook library load on the first tool call. The CLI's command table declares the
``mcp-serve`` options; its standard-library parser builds :class:`ServeOptions` and calls
:func:`serve` without loading typer.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from ipykeep.api.errors import IpykeepError, UsageError


@dataclass(frozen=True)
class ServeOptions:
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 0
    connection_file: Path | None = None
    project: Path | None = None


def _setup_logging() -> None:
    # stdout is the protocol channel on stdio: every log line goes to stderr.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("ipykeep").setLevel(logging.INFO)


def serve(opts: ServeOptions) -> int:
    """Run the server until the client goes away; returns the exit code."""
    from ipykeep.project.config import load_config
    from ipykeep.project.layout import find_project_root

    _setup_logging()
    try:
        if opts.project is not None and "${" in str(opts.project):
            raise UsageError(
                f"--project {opts.project} was not expanded by the host",
                hint="use a host that expands ${workspaceFolder} (Cursor does), "
                "or write the project's path",
            )
        project_dir = (opts.project or Path.cwd()).expanduser().resolve()
        if not project_dir.is_dir():
            raise UsageError(
                f"project directory {project_dir} does not exist",
                hint="pass an existing --project DIR",
            )
        config = load_config(find_project_root(project_dir))
        from ipykeep.mcp_server.server import IpykeepMcp, serve_stdio

        app = IpykeepMcp(project_dir, config)
        if opts.transport == "stdio":
            serve_stdio(app)
        elif opts.transport == "http":
            from ipykeep.mcp_server.http import HttpOptions, resolve_token, serve_http

            token, explicit = resolve_token(opts.host)
            serve_http(
                app, HttpOptions(opts.host, opts.port, token, explicit, opts.connection_file)
            )
        else:
            raise UsageError(
                f"unknown transport {opts.transport!r}",
                hint="use --transport stdio or --transport http",
            )
    except IpykeepError as exc:
        from ipykeep.client.render import render_error

        sys.stderr.write(render_error(exc) + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0
