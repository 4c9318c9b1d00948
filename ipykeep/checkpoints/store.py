"""The checkpoint store: content-addressed, authenticated blobs and signed manifests.

Layout under ``<project>/.ipykeep/checkpoints/`` (directories 0700, files 0600)::

    key                              32 random bytes, the project's secret (0600)
    blobs/ab/cdef…                   one pickled value; its name is its MAC
                                     (``_inkernel/blobfmt.py``)
    notebooks/<nbkey>/cells/<id>.json  the latest checkpoint of each notebook cell
    notebooks/<nbkey>/named/<n>.json   named checkpoints (``ipykeep checkpoint NAME``)
    memo/<source>/<key>.json         memoized runs of any notebook's cells, by normalized
                                     source and run key (``memo.py``)
    poisoned.json                    authentic blobs that failed to unpickle: never tried again
    quarantine/<id>                  blobs that failed authentication, moved out of the way

Unpickling is code execution, so a blob is only ever loaded when its bytes authenticate under
the project's key: the address *is* the MAC, so a blob copied from elsewhere, edited, or
renamed is refused before anything reads it as a pickle. The MAC is HMAC-SHA256 over fixed-size
chunks bound by index, combined with the total length (so a kernel checks one blob on several
cores); ``blobfmt`` defines it once for both sides. Manifests carry a MAC over their canonical
JSON. The in-kernel writer (``_inkernel/snapshot.py``) writes the same format with the standard
library only; the tests pin that both sides agree.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipykeep.api.errors import IpykeepError
from ipykeep.checkpoints._inkernel import blobfmt
from ipykeep.platform.files import others_can_access
from ipykeep.project.atomic import atomic_write_bytes
from ipykeep.project.layout import private_dir

BLOB_ID = re.compile(r"^[0-9a-f]{64}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MANIFEST_VERSION = 1


class CheckpointError(IpykeepError):
    code = "checkpoint_error"


class TamperedCheckpointError(CheckpointError):
    """A blob or manifest that does not authenticate under this project's key."""

    code = "checkpoint_tampered"


class UnknownCheckpointError(CheckpointError):
    code = "unknown_checkpoint"
    exit_code = 5


def _private_dir(path: Path) -> Path:
    # Its parents too (checkpoints/notebooks/…): the store holds the user's values.
    return private_dir(path)


def _write_private(path: Path, data: bytes) -> None:
    """Atomic write of a 0600 file (a reader never sees half a blob or manifest)."""
    atomic_write_bytes(path, data, mode=0o600)


def canonical(payload: dict[str, Any]) -> bytes:
    """The bytes a manifest's MAC covers: its JSON without ``mac``, keys sorted."""
    body = {k: v for k, v in payload.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=256)
def notebook_key(notebook: Path) -> str:
    """A directory name for a notebook's checkpoints (its resolved path, hashed). Kept per
    path: asked after every cell, and resolving walks the path's components (~0.1 ms)."""
    return hashlib.sha256(str(notebook.resolve()).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class BlobInfo:
    blob_id: str
    path: Path
    size: int
    mtime: float


class CheckpointStore:
    """One project's checkpoints (daemon side)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "checkpoints"
        self._key: bytes | None = None

    # -- key ---------------------------------------------------------------------------------
    @property
    def key_path(self) -> Path:
        return self.root / "key"

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = self._load_or_create_key()
        return self._key

    def _load_or_create_key(self) -> bytes:
        _private_dir(self.root)
        path = self.key_path
        if not path.exists():
            with contextlib.suppress(FileExistsError):  # two daemons racing: the first one wins
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(secrets.token_bytes(32))
        st = path.stat()
        if others_can_access(st):
            raise CheckpointError(
                f"the checkpoint key {path} is readable by other users "
                f"(mode {st.st_mode & 0o777:o})",
                hint=f"chmod 600 {path} (or delete it: existing checkpoints are then discarded)",
            )
        key = path.read_bytes()
        if len(key) != 32:
            raise CheckpointError(
                f"the checkpoint key {path} is damaged",
                hint=f"delete {path}; checkpoints are then discarded",
            )
        return key

    # -- blobs -------------------------------------------------------------------------------
    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    def blob_id(self, data: bytes | memoryview) -> str:
        return str(blobfmt.blob_id(self.key, [data]))

    def blob_path(self, blob_id: str) -> Path:
        if not BLOB_ID.match(blob_id):
            raise TamperedCheckpointError(
                f"{blob_id!r} is not a checkpoint blob id",
                hint="checkpoint manifests name blobs by 64 hex digits",
            )
        return self.blobs / blob_id[:2] / blob_id[2:]

    def put_blob(self, data: bytes) -> str:
        blob_id = self.blob_id(data)
        path = self.blob_path(blob_id)
        if path.exists():
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used: last to be collected
            return blob_id
        _private_dir(self.blobs)
        _private_dir(path.parent)
        _write_private(path, data)
        return blob_id

    def get_blob(self, blob_id: str) -> bytes:
        """The bytes of a blob, authenticated; a mismatch is refused (and poisons the blob)."""
        path = self.blob_path(blob_id)
        if self.is_poisoned(blob_id):
            raise TamperedCheckpointError(
                f"checkpoint blob {blob_id[:12]} is poisoned (it failed to load before)",
                hint="its cell re-runs instead; `ipykeep checkpoint` makes new checkpoints",
            )
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(
                f"checkpoint blob {blob_id[:12]} is missing (collected?)",
                hint="its cell re-runs instead",
            ) from None
        if not hmac.compare_digest(self.blob_id(data), blob_id):
            self.quarantine(blob_id)
            raise TamperedCheckpointError(
                f"checkpoint blob {blob_id[:12]} does not authenticate under this project's key: "
                "it was modified or not written by this project; refusing to unpickle it",
                hint="its cell re-runs instead; delete .ipykeep/checkpoints to start over",
            )
        with contextlib.suppress(OSError):
            os.utime(path)
        return data

    def iter_blobs(self) -> Iterator[BlobInfo]:
        if not self.blobs.is_dir():
            return
        for sub in self.blobs.iterdir():
            if not sub.is_dir():
                continue
            for f in sub.iterdir():
                if f.name.startswith("."):
                    continue
                with contextlib.suppress(OSError):
                    st = f.stat()
                    yield BlobInfo(sub.name + f.name, f, st.st_size, st.st_mtime)

    # -- poisoned blobs ----------------------------------------------------------------------
    @property
    def poisoned_path(self) -> Path:
        return self.root / "poisoned.json"

    def poisoned(self) -> dict[str, str]:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self.poisoned_path.read_text())
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items()}
        return {}

    def is_poisoned(self, blob_id: str) -> bool:
        return blob_id in self.poisoned()

    def quarantine(self, blob_id: str) -> None:
        """Move a blob that failed authentication out of the store (kept for inspection).

        Not poisoned: its id is a MAC, so when the kernel writes the true bytes again they are
        authentic and load."""
        path = self.blob_path(blob_id)
        target = _private_dir(self.root / "quarantine") / blob_id
        with contextlib.suppress(OSError):
            os.replace(path, target)

    def mark_poisoned(self, blob_id: str, why: str) -> None:
        data = self.poisoned()
        data[blob_id] = why[:300]
        _private_dir(self.root)
        _write_private(self.poisoned_path, json.dumps(data, indent=1).encode())

    # -- manifests ---------------------------------------------------------------------------
    def notebook_dir(self, notebook: Path) -> Path:
        return self.root / "notebooks" / notebook_key(notebook)

    def cell_manifest_path(self, notebook: Path, cell_id: str) -> Path:
        safe = hashlib.sha256(cell_id.encode()).hexdigest()[:24]  # ids are user text
        return self.notebook_dir(notebook) / "cells" / f"{safe}.json"

    def named_manifest_path(self, notebook: Path, name: str) -> Path:
        if not NAME.match(name):
            raise CheckpointError(
                f"{name!r} is not a checkpoint name",
                hint="use letters, digits, '.', '_' or '-' "
                "(at most 64, starting with a letter or digit)",
            )
        return self.notebook_dir(notebook) / "named" / f"{name}.json"

    def sign(self, payload: dict[str, Any]) -> dict[str, Any]:
        out = dict(payload)
        out["mac"] = hmac.new(self.key, canonical(payload), hashlib.sha256).hexdigest()
        return out

    def write_manifest(self, path: Path, payload: dict[str, Any]) -> None:
        _private_dir(path.parent)
        _write_private(path, json.dumps(self.sign(payload)).encode())

    def read_manifest(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise UnknownCheckpointError(f"no checkpoint at {path}") from None
        except (OSError, ValueError) as exc:
            raise TamperedCheckpointError(
                f"checkpoint manifest {path} is unreadable: {exc}", hint=f"delete {path}"
            ) from exc
        mac = data.get("mac") if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or not isinstance(mac, str)
            or not hmac.compare_digest(
                hmac.new(self.key, canonical(data), hashlib.sha256).hexdigest(), mac
            )
        ):
            raise TamperedCheckpointError(
                f"checkpoint manifest {path} does not authenticate under this project's key; "
                "refusing it",
                hint=f"delete {path}; the cells it describes re-run instead",
            )
        return data

    def manifests(self, directory: Path) -> tuple[list[dict[str, Any]], list[str]]:
        """Every manifest in ``directory`` that authenticates, and the errors of the others."""
        good: list[dict[str, Any]] = []
        bad: list[str] = []
        if not directory.is_dir():
            return good, bad
        for f in sorted(directory.glob("*.json")):
            try:
                good.append(self.read_manifest(f))
            except CheckpointError as exc:
                bad.append(exc.message)
        return good, bad

    def cell_manifests(self, notebook: Path) -> tuple[list[dict[str, Any]], list[str]]:
        return self.manifests(self.notebook_dir(notebook) / "cells")

    def named_manifests(self, notebook: Path) -> tuple[list[dict[str, Any]], list[str]]:
        return self.manifests(self.notebook_dir(notebook) / "named")

    def memo_dir(self, source_hash: str) -> Path:
        """The memoized runs of cells whose normalized source hashes to ``source_hash``: kept
        per project, not per notebook, so a fork's runs serve its parent's notebook."""
        return self.root / "memo" / hashlib.sha256(source_hash.encode()).hexdigest()[:24]

    def memo_manifest_path(self, source_hash: str, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{16,64}", key):
            raise CheckpointError(f"{key!r} is not a memo key", hint="keys are hex digests")
        return self.memo_dir(source_hash) / f"{key}.json"

    def memo_manifests(self, source_hash: str) -> list[tuple[Path, dict[str, Any]]]:
        """The stored runs of one cell source that authenticate (the others are skipped)."""
        directory = self.memo_dir(source_hash)
        out: list[tuple[Path, dict[str, Any]]] = []
        if not directory.is_dir():
            return out
        for f in sorted(directory.glob("*.json")):
            with contextlib.suppress(CheckpointError):
                out.append((f, self.read_manifest(f)))
        return out

    def all_manifest_paths(self) -> Iterator[Path]:
        base = self.root / "notebooks"
        if base.is_dir():
            yield from base.glob("*/*/*.json")
        memo = self.root / "memo"
        if memo.is_dir():
            yield from memo.glob("*/*.json")

    def usage(self) -> int:
        return sum(b.size for b in self.iter_blobs())
