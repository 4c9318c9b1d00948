"""Checkpoints of a kernel on an SSH host (the loopback sshd of ``sshd.py``): the blobs live with
the kernel, under its working directory on the host; the signed manifests come back to the
project; a lost kernel, and a lost daemon, are restored from the host's blobs.

The kernel's directory is apart from the project's, so a blob written on the wrong side shows.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from pathlib import Path

import nbformat
import pytest

from ipykeep.checkpoints.service import CheckpointService
from ipykeep.checkpoints.store import TamperedCheckpointError
from ipykeep.engine.engine import Engine
from tests.conftest import make_project
from tests.kernel.providers.checks import free_port, make_engine
from tests.kernel.providers.sshd import LoopbackSshd, unavailable

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ssh,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        unavailable() is not None, reason=f"loopback sshd unavailable: {unavailable()}"
    ),
]

CELLS = (
    "import time\ntime.sleep(0.2)\nbig = list(range(50000))",
    "total = sum(big)",
    "half = total // 2",
)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port())
    yield server
    server.stop()


def layer(engine: Engine) -> CheckpointService:
    return next(o for o in engine.observers if isinstance(o, CheckpointService))


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


async def wait_for(check, what: str, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)


async def start(engine: Engine, root: Path, sshd: LoopbackSshd, host_dir: Path) -> str:
    rec = await engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(host_dir))
    return rec.kernel_id


async def test_blobs_stay_on_the_host_and_lost_kernels_and_daemons_restore_from_them(
    sshd, tmp_path
):
    root = make_project(tmp_path / "p", example=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbformat.write(nb, root / "n.ipynb")
    ids = [c.id for c in nbformat.read(root / "n.ipynb", as_version=4).cells]
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    config = {
        "ssh_config": str(sshd.config),
        "remote_python": sys.executable,
        "dataflow": "static",
        "checkpoint_min_cell_s": 0,
    }
    engine = make_engine(root, **config)
    kid = await start(engine, root, sshd, host_dir)
    service = layer(engine)
    st = service.state(engine.kernels[kid])
    assert st.available, st.reason
    local_store = root / ".ipykeep" / "checkpoints"
    host_store = Path(st.remote_root or "")
    assert (
        host_store.parent == host_dir / ".ipykeep" / "checkpoints"
    )  # one directory per project there
    # the manifests come back (in the snapshot's reply or fetched right after), the blobs stay
    await wait_for(
        lambda: len(service.store.cell_manifests(root / "n.ipynb")[0]) == 3,
        "manifests did not arrive",
    )
    host_blobs = files_under(host_store / "blobs")
    assert host_blobs and not files_under(local_store / "blobs")
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in host_blobs)
    for d in (host_dir / ".ipykeep", host_store.parent, host_store, host_store / "blobs"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert files_under(host_store) == host_blobs  # no key file, no manifest on the host
    # the key went to the kernel in a request only: it is in no file but the project's key file
    key_hex = service.store.key.hex().encode()
    for f in files_under(root / ".ipykeep") + files_under(host_dir):
        if f != service.store.key_path:
            assert key_hex not in f.read_bytes(), f

    # a named checkpoint rolls back with values read on the host
    await service.checkpoint("before", kernel_id=kid)
    assert (await engine.execute("total = -1", kernel_id=kid)).state == "ok"
    rolled = await service.restore("before", kernel_id=kid)
    assert "total" in rolled.restored
    assert (await engine.execute("print(total)", kernel_id=kid)).output.text.strip() == str(
        sum(range(50000))
    )

    # the kernel is lost on the host: `start` again restores its cells instead of running them
    session = engine.kernels[kid]
    os.killpg(session.process.provider.remote_pid, signal.SIGKILL)
    await wait_for(lambda: session.state == "dead", "the kernel was not seen dead")
    runs_before = len([e for e in session.executions.values() if e.kind == "cell"])
    assert (await start(engine, root, sshd, host_dir)) == kid
    report = st.last_restore
    assert report is not None and {c["cell_id"] for c in report.restored} == set(ids), report
    assert (
        len([e for e in session.executions.values() if e.kind == "cell"]) == runs_before
    )  # nothing re-ran
    assert (
        await engine.execute("print(half * 2 == total)", kernel_id=kid)
    ).output.text.strip() == "True"
    await engine.shutdown()

    # the daemon is lost too: a new one, with a new kernel on the host, restores from the same blobs
    engine = make_engine(root, **config)
    try:
        kid = await start(engine, root, sshd, host_dir)
        report = layer(engine).state(engine.kernels[kid]).last_restore
        assert report is not None and {c["cell_id"] for c in report.restored} == set(ids), report
        assert (await engine.execute("print(half)", kernel_id=kid)).output.text.strip() == str(
            sum(range(50000)) // 2
        )
        # a blob altered on the host is refused before anything is unpickled: nothing changes
        service = layer(engine)
        named = service.store.read_manifest(
            service.store.named_manifest_path(root / "n.ipynb", "before")
        )
        blob = named["values"]["total"]["blob"]
        target = host_store / "blobs" / blob[:2] / blob[2:]
        target.write_bytes(target.read_bytes() + b"tampered")
        assert (await engine.execute("total = 7", kernel_id=kid)).state == "ok"
        with pytest.raises(TamperedCheckpointError, match="do not authenticate"):
            await service.restore("before", kernel_id=kid)
        assert (await engine.execute("print(total)", kernel_id=kid)).output.text.strip() == "7"
    finally:
        await engine.shutdown()
