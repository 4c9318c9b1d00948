"""A checkpoint blob spanning several authentication chunks, damaged in any one of them (the
first, a middle one, the last byte, or cut at a chunk boundary), is refused by a real kernel:
its cell re-runs with the reason, the damaged file is quarantined, nothing of it is loaded;
a rollback to a checkpoint holding it changes nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from ipykeep.checkpoints._inkernel import blobfmt
from ipykeep.checkpoints.store import TamperedCheckpointError
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.checkpoints.kit import flush, layer
from tests.checkpoints.test_checkpoints import cell_runs
from tests.staleness.test_staleness_acceptance import Nb, kinds

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(180)]

N = 3_000_000  # float64: 24 MB, three chunks of the blob's MAC (the last one short)
CELLS = [
    ("arr", f'import numpy as np\nbig = np.arange({N}, dtype="float64")\nbig[7] = -1.5'),
    ("use", "total = float(big.sum())"),
]
EXPECTED = str(float(sum(range(N)) - 7 - 1.5))


def _flip(at: Callable[[int], int]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[at(len(data))] ^= 0x01
        path.write_bytes(bytes(data))

    return damage


def _cut(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.truncate(2 * blobfmt.CHUNK)  # the last chunk gone, the first two intact


DAMAGE = {
    "first chunk": _flip(lambda n: 200),
    "middle chunk": _flip(lambda n: blobfmt.CHUNK + 12345),
    "last byte": _flip(lambda n: n - 1),
    "cut at a chunk boundary": _cut,
}


@pytest_asyncio.fixture(scope="module")
async def nb(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Nb]:
    root = tmp_path_factory.mktemp("tamper")
    (root / ".git").mkdir()
    engine = compose(
        ProjectPaths(root), Config(idle_timeout=0, dataflow="static", checkpoint_min_cell_s=0)
    ).engine
    directory = root / "nb"
    directory.mkdir()
    notebook = Nb(engine, directory, "static")
    notebook.write_cells(CELLS)
    await notebook.start()
    await flush(notebook)
    yield notebook
    await engine.shutdown()


def _blob(engine: Engine, nb: Nb) -> str:
    store = layer(engine).store
    return str(
        store.read_manifest(store.cell_manifest_path(nb.path, "arr"))["values"]["big"]["blob"]
    )


@pytest.mark.parametrize("how", list(DAMAGE))
async def test_damaged_chunk_is_refused_and_its_cell_reruns(nb: Nb, how: str) -> None:
    engine, store = nb.engine, layer(nb.engine).store
    blob = _blob(engine, nb)
    path = store.blob_path(blob)
    assert path.stat().st_size > 2 * blobfmt.CHUNK  # the value spans three chunks
    await nb.close()
    DAMAGE[how](path)
    await nb.start()
    report = layer(engine).state(engine.kernels[nb.kernel_id]).last_restore
    assert report is not None
    assert report.not_restorable["arr"].startswith("big: tampered: the blob does not authenticate")
    assert any("refused" in e and "authenticate" in e for e in report.errors), report.errors
    quarantined = store.root / "quarantine" / blob
    assert quarantined.exists()
    assert cell_runs(nb) == ["arr", "use"]  # both re-ran; nothing else was needed
    assert kinds(await nb.plan()) == {}
    assert await nb.values("total", "float(big[7])") == [EXPECTED, "-1.5"]
    await flush(nb)
    # the re-run wrote the true bytes back (they authenticate); the damaged ones are kept apart
    assert store.get_blob(blob) != quarantined.read_bytes()


@pytest.mark.posix
@pytest.mark.timeout(90)  # a blocking open of the FIFO would hold the start until then
async def test_a_fifo_planted_as_a_blob_is_refused_without_blocking(nb: Nb) -> None:
    engine, store = nb.engine, layer(nb.engine).store
    blob = _blob(engine, nb)
    path = store.blob_path(blob)
    await nb.close()
    path.unlink()
    os.mkfifo(path, 0o600)  # no writer ever opens it
    await nb.start()
    report = layer(engine).state(engine.kernels[nb.kernel_id]).last_restore
    assert report is not None
    assert report.not_restorable["arr"].startswith("big: tampered: "), report.not_restorable
    assert "is not a regular file" in report.not_restorable["arr"]
    assert stat.S_ISFIFO((store.root / "quarantine" / blob).lstat().st_mode)
    assert cell_runs(nb) == ["arr", "use"]
    assert await nb.values("total") == [EXPECTED]
    await flush(nb)
    assert stat.S_ISREG(path.lstat().st_mode)  # the re-run wrote the true blob back


async def test_rollback_to_a_damaged_checkpoint_changes_nothing(nb: Nb) -> None:
    cp = layer(nb.engine)
    await cp.checkpoint("before", kernel_id=nb.kernel_id)
    await flush(nb)
    await nb.scratch("big[0] = 99.0")
    manifest = cp.store.read_manifest(cp.store.named_manifest_path(nb.path, "before"))
    path = cp.store.blob_path(manifest["values"]["big"]["blob"])
    _flip(lambda n: n - 1)(path)
    with pytest.raises(TamperedCheckpointError, match="do not authenticate"):
        await cp.restore("before", kernel_id=nb.kernel_id)
    assert await nb.values("float(big[0])") == ["99.0"]
