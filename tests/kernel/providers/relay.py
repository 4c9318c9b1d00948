"""A loopback TCP relay the link tests put between ipykeep and a server, to drop the network.

``Relay(target_port)`` listens on a free loopback port in a process of its own and forwards each
connection to ``target_port``. ``cut(seconds)`` kills it (every connection through it resets, new
ones are refused) and brings it back on the same port after ``seconds``; ``stall(seconds)``
stops it (SIGSTOP: connections stay open, nothing moves, as on a suspended network) and
resumes it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time


class Relay:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        with socket.socket() as probe:  # a free port (the relay binds it again after a cut)
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.kernel.providers.relay",
                str(self.port),
                str(self.target_port),
            ]
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("the relay did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    async def cut(self, seconds: float) -> None:
        self.kill()
        await asyncio.sleep(seconds)
        await asyncio.to_thread(self.start)

    async def stall(self, seconds: float) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _serve(port: int, target: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
