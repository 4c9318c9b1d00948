"""Inside the Jupyter server: a file write to an open notebook merged into its shared document.

jupyter-collaboration (``jupyter_server_ydoc`` 3.x) has no setting or hook for what a room does
when its file changes on disk: its file watcher calls ``DocumentRoom._on_outofband_change``,
and a save that finds the file changed takes the ``OutOfBandChanges`` branch of
``DocumentRoom._maybe_save_document``; both replace the whole document with the file, and the
person's typing since the last save is gone. ``install`` changes that here, the one module
that patches the package (``UPSTREAM`` names what it replaces; a test fails when one is gone):

- ``FileLoader.load_content`` and ``FileLoader.maybe_save_content`` also keep the notebook they
  last read from or wrote to the file (the base of the next merge) and the sources it held
  just before (``FileHistory``): what a file tool may have read and written back unchanged;
- ``DocumentRoom._on_outofband_change`` merges the file into the live notebook cell by cell
  (``cell_merge``, applied by ``shared_document.apply_merged_cells``) in one transaction, with
  no await between reading the live cells and changing them; when the merge keeps something
  the file lacks (unsaved typing, a conflict note), the room saves it at once;
- a save that finds the file changed saves nothing and hands the change to that merge (through
  ``FileLoader.maybe_notify``, the watcher's own path) instead of reloading.

A document that is not a notebook, or one without cell ids, still gets the package's reload.
"""

# jupyter_server_ydoc ships no type information.
# mypy: disable-error-code="import-untyped"

from __future__ import annotations

import asyncio
import copy
import datetime
import importlib
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from ipykeep.project.notebook import FileIdentity
from ipykeep.serve.cell_merge import SAVED, canonical, merge_notebooks, mergeable
from ipykeep.serve.contents import SaveGuard, save_guard
from ipykeep.serve.shared_document import CONTENT_TYPE, apply_merged_cells

log = logging.getLogger(__name__)

#: What ``install`` replaces or calls, as (module, class, attribute).
UPSTREAM: tuple[tuple[str, str, str], ...] = (
    ("jupyter_server_ydoc.rooms", "DocumentRoom", "_on_outofband_change"),
    ("jupyter_server_ydoc.rooms", "DocumentRoom", "_save_to_disc"),
    ("jupyter_server_ydoc.loaders", "FileLoader", "load_content"),
    ("jupyter_server_ydoc.loaders", "FileLoader", "maybe_save_content"),
    ("jupyter_server_ydoc.loaders", "FileLoader", "maybe_notify"),
    ("jupyter_server_ydoc.utils", "OutOfBandChanges", "__init__"),
)

#: How long a version the file held counts as one a file tool may have read and written back
#: (its read and its write are moments apart; the server may save in between).
COPY_WINDOW_S = 3.0


@dataclass
class FileHistory:
    """What a notebook file held, as its room last read or wrote it: ``base`` in full, and
    before it, the versions it held in the last ``COPY_WINDOW_S`` (ids, types and sources)."""

    #: the file's content, marked ``cell_merge.SAVED`` when the document wrote it
    base: dict[str, Any] | None = None
    #: (version, when the file stopped holding it), oldest first
    earlier: list[tuple[dict[str, Any], float]] = field(default_factory=list)
    #: the file version (``file_identity``) ``base`` came from, when known
    identity: FileIdentity | None = None

    def record(self, content: dict[str, Any], *, saved: bool) -> None:
        now = time.monotonic()
        if self.base is not None:
            self.earlier.append((_sources_only(self.base), now))
        self.base = {**copy.deepcopy(content), SAVED: saved}
        self.earlier = self.earlier_versions_at(now)

    def earlier_versions_at(self, now: float) -> list[tuple[dict[str, Any], float]]:
        return [(v, until) for v, until in self.earlier if until >= now - COPY_WINDOW_S]

    def earlier_versions(self) -> list[dict[str, Any]]:
        return [v for v, _ in self.earlier_versions_at(time.monotonic())]


def _identity(loader: Any) -> FileIdentity | None:
    """The version of ``loader``'s file now (None without ipykeep's contents manager)."""
    identity = getattr(loader._contents_manager, "identity", None)
    if identity is None:
        return None
    try:
        found: FileIdentity | None = identity(loader.path)
    except Exception:  # moved, unreachable: the package's own checks report it
        return None
    return found


#: Older than any file's mtime: the package's watcher then sees the file as changed.
_LONG_AGO = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _merge_soon(loader: Any, last_modified: Any) -> None:
    """Have the file merged into the room on the watcher's path, once, now."""
    loader.last_modified = last_modified if last_modified is not None else _LONG_AGO
    task = asyncio.ensure_future(loader.maybe_notify())
    _pending.add(task)
    task.add_done_callback(_pending.discard)


def _sources_only(nb: dict[str, Any]) -> dict[str, Any]:
    cells = [
        {"id": c.get("id"), "cell_type": c.get("cell_type"), "source": c.get("source")}
        for c in nb.get("cells", [])
    ]
    return {"cells": cells, SAVED: nb.get(SAVED, False)}


#: FileLoader -> what its file held.
_histories: weakref.WeakKeyDictionary[Any, FileHistory] = weakref.WeakKeyDictionary()
#: FileLoader -> the lock its saves and merges take (``_merge_lock``).
_merge_locks: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()
#: Merges started by a save, kept alive until they end.
_pending: set[asyncio.Task[None]] = set()
_installed = False


def missing_upstream() -> list[str]:
    """The names in ``UPSTREAM`` the installed package lacks (empty: ``install`` can work)."""
    gone = []
    for module, cls, attr in UPSTREAM:
        try:
            owner = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError):
            gone.append(f"{module}.{cls}")
            continue
        if not callable(getattr(owner, attr, None)):
            gone.append(f"{module}.{cls}.{attr}")
    return gone


def history_of(loader: Any) -> FileHistory:
    found = _histories.get(loader)
    if found is None:
        found = _histories[loader] = FileHistory()
    return found


def install() -> bool:
    """Patch the package (once); False, and nothing patched, when it is not the one expected."""
    global _installed
    if _installed:
        return True
    gone = missing_upstream()
    if gone:
        log.warning(
            "jupyter-collaboration lacks %s: file writes to open notebooks reload the whole "
            "document instead of being merged",
            ", ".join(gone),
        )
        return False
    from jupyter_server_ydoc.loaders import FileLoader
    from jupyter_server_ydoc.rooms import DocumentRoom
    from jupyter_server_ydoc.utils import OutOfBandChanges

    load_content = FileLoader.load_content
    maybe_save_content = FileLoader.maybe_save_content
    maybe_notify = FileLoader.maybe_notify
    reload_room = DocumentRoom._on_outofband_change

    async def loading(self: Any, format: str, file_type: str) -> dict[str, Any]:
        # the version is taken before the read: a write in between is seen as a change later
        # (and merges as none), never a change taken for the version already read
        before = _identity(self)
        model: dict[str, Any] = await load_content(self, format, file_type)
        if file_type == CONTENT_TYPE:
            history = history_of(self)
            history.record(dict(model["content"]), saved=False)
            history.identity = before
        return model

    async def saving(self: Any, model: dict[str, Any]) -> dict[str, Any] | None:
        if model.get("type") != CONTENT_TYPE:
            return await maybe_save_content(self, model)  # type: ignore[no-any-return]
        async with _merge_lock(self):
            return await save_notebook(self, model)

    async def save_notebook(self: Any, model: dict[str, Any]) -> dict[str, Any] | None:
        seen = self.last_modified
        history = history_of(self)
        if history.identity is not None and _identity(self) != history.identity:
            # Replaced since the document last read or wrote it, maybe within the same tick
            # of the clock that stamps mtimes (the package compares mtimes only): merge it.
            _merge_soon(self, seen)
            return None

        def written(identity: FileIdentity) -> None:
            # at the rename, before anything else can look at the file
            history.record(dict(model["content"]), saved=True)
            history.identity = identity

        guard = SaveGuard(history.identity, on_written=written)
        token = save_guard.set(guard)
        try:
            saved: dict[str, Any] | None = await maybe_save_content(self, model)
        except Exception as exc:
            if not (isinstance(exc, OutOfBandChanges) or guard.refused):
                raise
            # The file changed since it was last read (by the package's mtime check, or ours
            # at the rename): merge it (the watcher's path, so the change is seen once) rather
            # than let the room reload the whole document or overwrite the file.
            _merge_soon(self, seen)
            return None
        finally:
            save_guard.reset(token)
        if guard.written is not None and _identity(self) != guard.written:
            # Replaced between the rename and the package's look at the result: the mtime
            # it keeps may be the other writer's, so its watcher would never see the change.
            _merge_soon(self, None)
        return saved

    async def notifying(self: Any) -> None:
        history = _histories.get(self)
        if (
            history is not None
            and history.identity is not None
            and self.last_modified is not None
            and _identity(self) != history.identity
        ):
            # another version than the one last read or written, whatever its mtime says
            self.last_modified = _LONG_AGO
        await maybe_notify(self)

    async def merging(self: Any) -> None:
        if self.file_type != CONTENT_TYPE:
            await reload_room(self)
            return
        await merge_file_into_room(self, reload_room)

    FileLoader.load_content = loading
    FileLoader.maybe_save_content = saving
    FileLoader.maybe_notify = notifying
    DocumentRoom._on_outofband_change = merging
    _installed = True
    return True


def _merge_lock(loader: Any) -> asyncio.Lock:
    """Held by a notebook's save and by a merge into it, whole: a merge's base is then the
    history as it was when the file it merges was read, never half a save later."""
    found = _merge_locks.get(loader)
    if found is None:
        found = _merge_locks[loader] = asyncio.Lock()
    return found


async def merge_file_into_room(room: Any, reload_room: Any) -> None:
    """The file's new content merged into ``room``'s live notebook (see the module docstring)."""
    async with _merge_lock(room._file):
        await _merge_file_into_room(room, reload_room)


async def _merge_file_into_room(room: Any, reload_room: Any) -> None:
    history = history_of(room._file)
    base, earlier = history.base, history.earlier_versions()
    try:
        model = await room._file.load_content(room.file_format, room.file_type)
    except Exception as exc:
        room.log.error("could not read %s after it changed: %r", room._file.path, exc)
        return
    theirs = dict(model["content"])
    lock: asyncio.Lock = room._update_lock
    await lock.acquire()
    # From here to the end, no await: no browser update lands between reading the live cells
    # and changing them.
    ours = room._document.get()
    if base is None or not mergeable(base, theirs, ours):
        lock.release()
        await reload_room(room)
        return
    merged = merge_notebooks(base, theirs, ours, earlier)
    matches_file = canonical(merged.cells) == canonical(theirs["cells"])
    try:
        # Under the room's lock its autosave does not react to the merge's own changes.
        if canonical(merged.cells) != canonical(ours["cells"]) or canonical(
            merged.metadata
        ) != canonical(ours.get("metadata", {})):
            apply_merged_cells(room._document, merged)
        room._document.dirty = not matches_file
    finally:
        lock.release()
    if not matches_file:
        # The merge kept what the file lacks (unsaved typing, a note): the file gets it now.
        room._save_to_disc()
    for c in merged.conflicts:
        room.log.warning(
            "%s: the file's change of cell %s conflicts with the document's own (%s); kept "
            "the document's, noted the file's version in cell %s",
            room._file.path,
            c.cell_id,
            c.kind,
            c.note_id,
        )
    room.log.info("merged a change of %s on disk into its shared document", room._file.path)
