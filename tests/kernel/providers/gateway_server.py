"""A Jupyter Kernel Gateway on loopback with a random token and port (tests and benchmarks)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.kernel.providers.checks import free_port


class Gateway:
    def __init__(self, tmp: Path) -> None:
        self.token = secrets.token_urlsafe(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(
            os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTER_DATA_DIR=str(tmp / "data")
        )
        self.log = open(tmp / "gateway.log", "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kernel_gateway",
                "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={self.port}",
                "--KernelGatewayApp.port_retries=0",
                f"--KernelGatewayApp.auth_token={self.token}",
                # for the tests to look; ipykeep never lists
                "--JupyterWebsocketPersonality.list_kernels=True",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
        deadline = time.monotonic() + 120  # a Jupyter server's start-up, on a loaded machine
        while True:
            try:
                self.kernels()
                return
            except urllib.error.HTTPError:
                self.stop()
                raise
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        "the kernel gateway did not start: "
                        f"{(tmp / 'gateway.log').read_text()[-2000:]}"
                    )
                time.sleep(0.1)

    def kernels(self) -> list[dict]:
        req = urllib.request.Request(
            self.url + "/api/kernels", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
