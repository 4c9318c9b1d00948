"""Remote kernels: the round trip through each provider as a ratio to a local kernel.

One in-process engine holds three plain kernels bound to copies of one notebook: local (ipc),
behind a Jupyter Kernel Gateway on loopback (REST + one websocket), and over SSH to a loopback
sshd (zmq over ``ssh -L`` tunnels). ``execute("1+1")`` is timed on each, interleaved call by
call, so the ratios show what the provider's transport adds with no network in the way; a real
link adds its own latency on top. Without an sshd on this machine only the gateway is measured.
"""

from __future__ import annotations

import os
import sys

from benchmarks.context import RunContext
from benchmarks.timing import Metric, Stats, interleave

NAME = "remote_providers"
TITLE = "13. Remote kernel providers"

CODE = "1+1"


async def run(ctx: RunContext) -> list[Metric]:
    from tests.kernel.providers.checks import free_port, make_engine, make_remote_project
    from tests.kernel.providers.gateway_server import Gateway
    from tests.kernel.providers.sshd import LoopbackSshd, unavailable

    work = ctx.workdir(NAME)
    gateway = Gateway(work)
    sshd = None
    if unavailable() is None and not ctx.smoke:  # a smoke run only checks the scenario runs
        (work / "sshd").mkdir()
        sshd = LoopbackSshd(work / "sshd", free_port())
    os.environ["JUPYTER_GATEWAY_AUTH_TOKEN"] = gateway.token
    root = make_remote_project(work)
    engine = make_engine(
        root, **({"ssh_config": str(sshd.config), "remote_python": sys.executable} if sshd else {})
    )
    try:
        kernels = {"local": (await engine.create_kernel(cwd=str(root), warm=False)).kernel_id}
        kernels["gateway"] = (
            await engine.create_kernel(cwd=str(root), gateway=gateway.url, warm=False)
        ).kernel_id
        if sshd is not None:
            kernels["ssh"] = (await engine.create_kernel(cwd=sshd.url(root), warm=False)).kernel_id

        def side(kid: str):
            async def call() -> None:
                rec = await engine.execute(CODE, kernel_id=kid)
                assert rec.state == "ok" and rec.output.text.strip() == "2", rec

            return call

        warmup = 0 if ctx.smoke else ctx.reps(3, 1)
        samples = await interleave(
            {k: side(v) for k, v in kernels.items()}, ctx.reps(50, 5), warmup=warmup
        )
    finally:
        await engine.shutdown()
        gateway.stop()
        if sshd is not None:
            sshd.stop()
        os.environ.pop("JUPYTER_GATEWAY_AUTH_TOKEN", None)
    ms = {k: Stats.of([x * 1000 for x in v]) for k, v in samples.items()}
    metrics = [
        Metric(
            NAME,
            "execute('1+1'), kernel gateway on loopback",
            "ms",
            ms["gateway"],
            "gateway provider",
            "local provider",
            ms["local"],
        )
    ]
    if "ssh" in ms:
        metrics.append(
            Metric(
                NAME,
                "execute('1+1'), SSH to loopback sshd",
                "ms",
                ms["ssh"],
                "ssh provider",
                "local provider",
                ms["local"],
            )
        )
    return metrics
