"""A public URL for a published view through a Cloudflare quick tunnel (``cloudflared``).

Only used when asked (``publish --tunnel``). It fails loudly when ``cloudflared`` is not
installed or the tunnel does not come up: there is no silent fallback to the local URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil

from ipykeep.serve.errors import TunnelError

URL_RE = re.compile(r"https://[a-z0-9-]+\.trycloudflare\.com")
START_TIMEOUT = 45.0


def require_cloudflared() -> str:
    exe = shutil.which("cloudflared")
    if exe is None:
        raise TunnelError(
            "cannot publish through a tunnel: `cloudflared` is not installed (not on PATH)",
            hint="install cloudflared "
            "(https://developers.cloudflare.com/cloudflare-one/connections/"
            "connect-networks/downloads/) "
            "or publish without --tunnel for a local URL",
        )
    return exe


class QuickTunnel:
    def __init__(self, local_url: str) -> None:
        self.local_url = local_url
        self.public_url: str | None = None
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> str:
        exe = require_cloudflared()
        # The Host header is rewritten so Jupyter's remote-access check sees a local name.
        self.proc = await asyncio.create_subprocess_exec(
            exe,
            "tunnel",
            "--no-autoupdate",
            "--url",
            self.local_url,
            "--http-host-header",
            "localhost",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        seen: list[str] = []

        async def find_url() -> str | None:
            assert self.proc is not None and self.proc.stderr is not None
            while line := (await self.proc.stderr.readline()).decode(errors="replace"):
                seen.append(line.rstrip())
                match = URL_RE.search(line)
                if match:
                    return match.group(0)
            return None

        with contextlib.suppress(asyncio.TimeoutError):
            self.public_url = await asyncio.wait_for(find_url(), START_TIMEOUT)
        if self.public_url:
            self._drain_task = asyncio.create_task(self._drain())
            return self.public_url
        await self.stop()
        tail = "\n".join(seen[-8:])
        raise TunnelError(
            "the cloudflared quick tunnel did not come up" + (f":\n{tail}" if tail else ""),
            hint="check this machine can reach Cloudflare, or publish without --tunnel",
        )

    async def _drain(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc is not None and self.proc.stderr is not None
            while await self.proc.stderr.readline():
                pass

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
