"""Forks: a new kernel holding another kernel's variables, bound to a copy of its notebook, and
how a fork differs from its parent.

A fork is bound to ``<notebook>.fork-N.ipynb`` beside the parent's notebook (or a name given),
with a copy of the parent's staleness record and of the versions of its values (``memo.py``):
the fork's plans start where the parent's are, its runs are memoized in the same project store,
so a variant tried in the fork loads when the same edit is applied to the parent.

Its kernel is made one of two ways (``ForkResult.how``):

- ``process``: the parent kernel's process is forked (``os.fork``, copy-on-write;
  ``_inkernel/forkkernel.py`` in the kernel, ``kernel/providers/forked.py`` here): every
  variable as it is in the parent, whatever it holds, in about a second, and the parent's
  memory is shared until either side writes to it. For a local kernel where ``os.fork`` is
  safe (``platform/processes.py``) unless ``fork_method = "checkpoint"`` or IPython's history
  database is on (a forked process would share its SQLite connection).
- ``checkpoint``: a named checkpoint of every user variable of the parent loaded into a new
  kernel; what does not pickle is not copied (``not_copied``). Used otherwise, and when the
  process way fails (``fallback_reason`` says why).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipykeep.api.checkpoints import ForkDiff, ForkResult
from ipykeep.api.errors import IpykeepError, KernelStartError, UsageError
from ipykeep.checkpoints import memo
from ipykeep.checkpoints.state import HIDDEN, call
from ipykeep.checkpoints.store import CheckpointError, CheckpointStore
from ipykeep.engine.session import KernelSession
from ipykeep.kernel.inkernel import CHECKPOINT, CHECKPOINT_LOAD, FORK_PROCESS
from ipykeep.kernel.providers import KernelProvider, LaunchSpec
from ipykeep.kernel.providers.forked import ForkedProvider
from ipykeep.platform.processes import fork_is_safe
from ipykeep.project.atomic import atomic_write_bytes
from ipykeep.project.notebook import read_notebook
from ipykeep.staleness.state import staleness_of

if TYPE_CHECKING:
    from ipykeep.checkpoints.service import CheckpointService


@dataclass
class ForkOrigin:
    """Per kernel: the kernel it was forked from (None: not a fork)."""

    parent: str | None = None
    parent_notebook: str | None = None
    forked_at: float = 0.0
    #: the staleness record's run counter when the fork was made: writes up to it are shared
    seq: int = 0


def fork_path(notebook: Path, name: str | None) -> Path:
    """Where the fork's notebook goes: ``name`` (beside the notebook when relative), or the
    first free ``<stem>.fork-N.ipynb`` beside it."""
    if name:
        path = Path(name)
        if not path.is_absolute():
            path = notebook.parent / path
        if path.suffix != ".ipynb":
            raise UsageError(f"{name!r} is not a notebook name", hint="end it with .ipynb")
        if path.exists():
            raise UsageError(
                f"{path} exists: a fork never overwrites a notebook",
                hint="give another name, or leave it out for <notebook>.fork-N.ipynb",
            )
        return path
    n = 1
    while (path := notebook.with_name(f"{notebook.stem}.fork-{n}.ipynb")).exists():
        n += 1
    return path


#: Helpers a forked kernel gets afresh: the checkpoint writer's thread and queue (and the
#: loader, which reads the writer's configuration) stay in the parent.
FRESH = (CHECKPOINT, CHECKPOINT_LOAD)


def process_fork_unavailable(parent: KernelSession) -> str | None:
    """Why the parent's process cannot be forked into the new kernel (None: it can)."""
    config = parent.config
    if config.fork_method != "process":
        return f'fork_method = "{config.fork_method}"'
    if not fork_is_safe():
        return "forking a kernel process is not safe on this platform"
    if parent.process.provider.kind != "local" or parent.process.pid is None:
        return f"the kernel is not a local process (it runs on {parent.process.location})"
    if config.ipython_history:
        return "IPython's history database is on (ipython_history): a forked process would share it"
    return None


async def fork(service: CheckpointService, parent: KernelSession, name: str | None) -> ForkResult:
    """Fork ``parent`` (idle): see the module docstring."""
    if parent.notebook is None:
        raise CheckpointError(
            f"kernel {parent.kernel_id} has no notebook to copy",
            hint="fork a notebook's kernel; a scratch kernel's variables can be saved "
            "with `ipykeep checkpoint`",
        )
    started = time.monotonic()
    target = fork_path(parent.notebook, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    # the notebook as it is on disk now (unsaved browser edits are not in the file either)
    atomic_write_bytes(target, parent.notebook.read_bytes())
    reason = process_fork_unavailable(parent)
    made: ForkResult | None = None
    if reason is None:
        try:
            made = await _fork_process(service, parent, target)
        except IpykeepError as exc:
            reason = f"forking the kernel's process failed: {exc.message}"
    if made is None:
        try:
            made = await _fork_checkpoint(service, parent, target)
        except IpykeepError as exc:
            if reason is not None:  # say why the process way was not taken either
                exc.message += f" (the checkpoint way was taken: {reason})"
            raise
        made.fallback_reason = reason
    child = service.engine.kernels[made.kernel_id]
    # the parent's record of its cells, carried into the fork's kernel: its plans start there
    tracker = copy.deepcopy(staleness_of(parent).tracker)
    tracker.carried_into(staleness_of(child).tracker.epoch)
    staleness_of(child).tracker = tracker
    child.cell_runs.clear()
    child.cell_runs.update(parent.cell_runs)
    st_parent, st_child = service.state(parent), service.state(child)
    st_child.versions = dict(st_parent.versions)
    st_child.cells = dict(st_parent.cells)
    origin = child.features.of(ForkOrigin)
    origin.parent, origin.parent_notebook = parent.kernel_id, str(parent.notebook)
    origin.forked_at = time.time()
    origin.seq = tracker.state.seq
    made.seconds = round(time.monotonic() - started, 3)
    return made


async def _start_fork_kernel(
    service: CheckpointService,
    parent: KernelSession,
    target: Path,
    launch_with: Callable[[LaunchSpec], KernelProvider] | None = None,
) -> KernelSession:
    rec = await service.engine.create_kernel(
        notebook=str(target),
        python=parent.config.python,
        warm=False,
        write_outputs=parent.config.write_outputs,
        dataflow=parent.process.dataflow,
        launch_with=launch_with,
    )
    return service.engine.kernels[rec.kernel_id]


async def _fork_process(
    service: CheckpointService, parent: KernelSession, target: Path
) -> ForkResult:
    """The new kernel is the parent's process, forked (``kernel/providers/forked.py``)."""
    process = parent.process
    await process.install(FORK_PROCESS)

    async def ask(connection_file: str) -> int:
        answer = await process.eval_silent(
            FORK_PROCESS.call("fork", connection_file, os.getpid(), [m.name for m in FRESH])
        )
        if "pid" not in answer:
            raise KernelStartError(str(answer.get("error") or answer), hint="")
        return int(answer["pid"])

    helpers = frozenset(process.installed_helpers) - {m.name for m in FRESH}
    child = await _start_fork_kernel(
        service, parent, target, lambda spec: ForkedProvider(spec, ask, helpers)
    )
    try:
        await child.process.install(CHECKPOINT)  # ``user_names`` also where checkpoints are off
        names = await child.process.eval_silent(call("user_names"))
    except BaseException:
        await service.engine.close_kernel(kernel_id=child.kernel_id)
        raise
    return ForkResult(
        kernel_id=child.kernel_id,
        parent_kernel_id=parent.kernel_id,
        notebook=str(target),
        values=[n for n in names if n not in HIDDEN],
        how="process",
    )


async def _fork_checkpoint(
    service: CheckpointService, parent: KernelSession, target: Path
) -> ForkResult:
    """The new kernel loads a named checkpoint of every variable of the parent."""
    assert parent.notebook is not None
    checkpoint = f"fork-{target.stem.replace('.', '-')[-40:]}-{time.time_ns() % 10**9}"
    # refused (``checkpoint_unavailable``) where checkpoints are not available
    saved = await service.checkpoint(checkpoint, kernel_id=parent.kernel_id)
    store: CheckpointStore = service.store
    manifest = store.read_manifest(store.named_manifest_path(parent.notebook, checkpoint))
    store.write_manifest(store.named_manifest_path(target, checkpoint), manifest)
    child = await _start_fork_kernel(service, parent, target)
    rolled = await service.restore(checkpoint, kernel_id=child.kernel_id)
    for path in (
        store.named_manifest_path(parent.notebook, checkpoint),
        store.named_manifest_path(target, checkpoint),
    ):
        path.unlink(missing_ok=True)  # its values live on in the fork; blobs are collected
    service.state(parent).named.pop(checkpoint, None)
    return ForkResult(
        kernel_id=child.kernel_id,
        parent_kernel_id=parent.kernel_id,
        notebook=str(target),
        values=rolled.restored,
        not_copied={**saved.failed, **rolled.not_rolled_back},
        how="checkpoint",
    )


async def diff(service: CheckpointService, child: KernelSession) -> ForkDiff:
    """Which cells and names differ between a fork and its parent."""
    origin = child.features.of(ForkOrigin)
    if origin.parent is None:
        raise UsageError(
            f"kernel {child.kernel_id} is not a fork", hint="fork one with `ipykeep fork`"
        )
    parent = service.engine.live(origin.parent)
    assert child.notebook is not None and parent.notebook is not None
    mine = {c.cell_id: c for c in read_notebook(child.notebook).cells}
    theirs = {c.cell_id: c for c in read_notebook(parent.notebook).cells}
    cells: list[dict[str, Any]] = []
    for cid, cell in mine.items():
        if cid not in theirs:
            cells.append({"cell_id": cid, "index": cell.index, "change": "only_in_fork"})
        elif theirs[cid].source != cell.source:
            cells.append({"cell_id": cid, "index": cell.index, "change": "edited"})
    cells += [
        {"cell_id": cid, "index": c.index, "change": "only_in_parent"}
        for cid, c in theirs.items()
        if cid not in mine
    ]
    names_child = set(await child.process.eval_silent(call("user_names")))
    names_parent = set(await parent.process.eval_silent(call("user_names")))
    names: list[dict[str, Any]] = []
    for name in sorted((names_child | names_parent) - set(HIDDEN)):
        if name not in names_parent:
            names.append({"name": name, "change": "only_in_fork"})
        elif name not in names_child:
            names.append({"name": name, "change": "only_in_parent"})
        else:
            a, b = _version(service, child, name), _version(service, parent, name)
            if a is not None and b is not None:
                if a != b:
                    names.append({"name": name, "change": "different"})
                continue
            wa, wb = _writer(child, name), _writer(parent, name)
            shared = wa == wb and (wa is None or wa[2] <= origin.seq)
            if not shared:  # written since the fork, by a run whose value has no version
                names.append({"name": name, "change": "may_differ"})
    return ForkDiff(
        kernel_id=child.kernel_id,
        parent_kernel_id=parent.kernel_id,
        cells=sorted(cells, key=lambda c: c["index"]),
        names=names,
    )


def _writer(session: KernelSession, name: str) -> Any:
    w = staleness_of(session).tracker.state.writers.get(name)
    return None if w is None else (w.origin, w.cell_id, w.seq)


def _version(service: CheckpointService, session: KernelSession, name: str) -> str | None:
    w = staleness_of(session).tracker.state.writers.get(name)
    return memo.version_of(name, w, service.state(session).versions)
