"""What the checkpoint tests share: an in-process engine per module, its checkpoint layer, and
notebooks started on it with their checkpoints written before the test goes on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from ipykeep.checkpoints.service import CheckpointService
from ipykeep.daemon.composition import compose
from ipykeep.engine.engine import Engine
from ipykeep.kernel.inkernel import CHECKPOINT
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from tests.staleness.test_staleness_acceptance import Nb


@asynccontextmanager
async def composed_engine(
    tmp_path_factory: pytest.TempPathFactory, name: str, **config: Any
) -> AsyncIterator[Engine]:
    """An engine on a fresh project that saves every cell's values (``checkpoint_min_cell_s``
    0: the tests' cells are quick), composed as the daemon composes it."""
    root = tmp_path_factory.mktemp(name)
    (root / ".git").mkdir()
    eng = compose(
        ProjectPaths(root), Config(idle_timeout=0, checkpoint_min_cell_s=0, **config)
    ).engine
    try:
        yield eng
    finally:
        await eng.shutdown()


def layer(engine: Engine) -> CheckpointService:
    return next(o for o in engine.observers if isinstance(o, CheckpointService))


async def started(
    engine: Engine,
    name: str,
    mode: str,
    cells: Iterable[tuple[str, str]],
    files: dict[str, str] | None = None,
) -> Nb:
    """A notebook of ``cells`` in its own directory (with ``files`` beside it), warmed up, its
    checkpoints written."""
    directory = engine.paths.root / name
    directory.mkdir()
    for file, text in (files or {}).items():
        (directory / file).write_text(text)
    nb = Nb(engine, directory, mode)
    nb.write_cells(list(cells))
    await nb.start()
    await flush(nb)
    return nb


async def flush(nb: Nb) -> None:
    """Wait until the kernel's checkpoint writer has written what it holds."""
    entry = nb.engine.kernels[nb.kernel_id]
    assert await entry.process.eval_silent(CHECKPOINT.call("flush", 30), timeout=40)
