"""The daemon's side of the Jupyter server: start it, tell it what to host, stop it.

One server per daemon, started on first use as a child process (``python -m
ipykeep.serve.server``) with its own random tokens (the server's, and the read-only one of
publish URLs). Its files live in ``.ipykeep/run/serve/`` (0700): ``settings.json`` and
``adopt.json`` (0600), its log (``server.log``, 0600) and Jupyter's runtime files. The tokens
are passed in the 0600 settings file, never on the command line, and are never logged: Jupyter
masks a configured token, and the log tail ipykeep shows masks both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from ipykeep.project.layout import ProjectPaths, private_dir
from ipykeep.serve.adoption import AdoptionSpec, write_private_json, write_spec
from ipykeep.serve.errors import ServeError

START_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JupyterServer:
    """A running hosting server (or one about to be started)."""

    def __init__(
        self, paths: ProjectPaths, *, command: str, port: int, collaboration: bool = False
    ) -> None:
        self.paths = paths
        self.command = command
        #: the served notebooks are shared documents (jupyter-collaboration)
        self.collaboration = collaboration
        self.dir = private_dir(paths.run / "serve")
        self.spec_path = self.dir / "adopt.json"
        self.settings_path = self.dir / "settings.json"
        self.log_path = self.dir / "server.log"
        self.token = secrets.token_urlsafe(32)
        #: the token of publish URLs: reads the published views only (``viewer``)
        self.view_token = secrets.token_urlsafe(32)
        self.port = port or free_port()
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self, spec: AdoptionSpec) -> None:
        write_spec(self.spec_path, spec)
        write_private_json(
            self.settings_path,
            {
                "command": self.command,
                "port": self.port,
                "root_dir": str(self.paths.root),
                "token": self.token,
                "view_token": self.view_token,
                "spec_path": str(self.spec_path),
                "daemon_pid": os.getpid(),
                "collaboration": self.collaboration,
            },
        )
        env = dict(os.environ)
        env["JUPYTER_RUNTIME_DIR"] = str(private_dir(self.dir / "runtime"))
        env.pop("JUPYTER_TOKEN", None)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ipykeep.serve.server",
                str(self.settings_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=env,
                cwd=str(self.paths.root),
            )
        finally:
            os.close(fd)
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.running:
                break
            with contextlib.suppress(OSError, urllib.error.URLError):
                await asyncio.to_thread(self.request, "GET", "/api/status", timeout=2)
                return
            await asyncio.sleep(0.2)
        tail = self.log_tail()
        await self.stop()
        raise ServeError(
            f"the Jupyter server did not start on port {self.port}"
            + (f":\n{tail}" if tail else ""),
            hint=f"see {self.log_path}; is port {self.port} free (serve_port in ipykeep.toml)?",
        )

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 30) -> Any:
        """A token-authenticated request to the server (blocking; run it in a thread)."""
        data = (
            json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        )
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    async def sync(self, spec: AdoptionSpec) -> list[str]:
        write_spec(self.spec_path, spec)
        try:
            reply = await asyncio.to_thread(self.request, "POST", "/ipykeep/sync")
        except (OSError, urllib.error.URLError) as exc:
            raise ServeError(
                f"the Jupyter server on port {self.port} did not take the kernel list: {exc}",
                hint=f"see {self.log_path}",
            ) from None
        return list(reply.get("kernels", []))

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; returns once the process is gone."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").replace(self.token, "<token>")
            text = text.replace(self.view_token, "<token>")
            return "\n".join(text.splitlines()[-lines:])
        return ""
