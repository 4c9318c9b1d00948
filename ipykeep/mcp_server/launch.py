"""Starting the MCP server quickly: hosts send ``initialize`` as soon as the process exists.

Claude Code starts its first request before a slow server is ready and Codex exposes the tools
only from its second request, so ``ipykeep mcp-serve`` imports only what the handshake needs:
the SDK, the tool catalog and the configuration. The daemon client, the result renderers and
the notebook library load on the first tool call. :func:`fast_main` is the entry point's path
for ``mcp-serve`` (argparse, not the full typer CLI); ``--help`` and anything it does not
recognise go to the full CLI.
"""

from __future__ import annotations

import argparse
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
                hint="use a host that expands ${workspaceFolder} (Cursor does),"
                " or write the project's path",
            )
        project_dir = (opts.project or Path.cwd()).expanduser().resolve()
        if not project_dir.is_dir():
            raise UsageError(
                f"project directory {project_dir} does not exist",
                hint="pass an existing --project DIR",
            )
        config = load_config(find_project_root(project_dir))
        prefetch = None
        if opts.transport == "stdio":
            from ipykeep.mcp_server import early

            prefetch = early.start()  # answers the handshake while the SDK below is imported
        from ipykeep.mcp_server.server import IpykeepMcp, serve_stdio

        app = IpykeepMcp(project_dir, config)
        if opts.transport == "stdio":
            serve_stdio(app, prefetch)
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


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Refused(message)


def parse(argv: list[str]) -> ServeOptions | None:
    """``mcp-serve`` options, or None when the full CLI should handle ``argv`` (help, typos)."""
    p = _Parser(add_help=False)
    p.add_argument("--transport", default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--connection-file", type=Path)
    p.add_argument("--project", type=Path)
    try:
        ns = p.parse_args(argv)
    except _Refused:
        return None
    return ServeOptions(ns.transport, ns.host, ns.port, ns.connection_file, ns.project)


def fast_main(argv: list[str]) -> int | None:
    """Serve when ``argv`` is ``mcp-serve [options]``; None to let the full CLI run instead."""
    if not argv or argv[0] != "mcp-serve":
        return None
    opts = parse(argv[1:])
    if opts is None:
        return None
    return serve(opts)
