"""Kernel ids (``k1``…) and execution handles (``c1``…), never reused in a project.

Counters continue from what earlier daemons left in ``.ipykeep/kernels``: the kernel counter
skips every ``k<N>`` directory there, and handles are reserved in blocks (``counters.json``)
so the hot path does not write a file per call; a daemon that dies leaves its successor to
start after the whole reserved block.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from pathlib import Path

from ipykeep.project.atomic import atomic_write_text
from ipykeep.project.layout import ProjectPaths, private_dir

log = logging.getLogger("ipykeep.engine")

HANDLE_BLOCK = 1000


class IdCounters:
    def __init__(self, paths: ProjectPaths) -> None:
        self.paths = paths
        self._next_kernel, self._next_handle = self._load()
        self._reserved_handles = self._next_handle

    @property
    def _file(self) -> Path:
        return self.paths.kernels / "counters.json"

    def _load(self) -> tuple[int, int]:
        nk, nh = 1, 1
        with contextlib.suppress(Exception):
            data = json.loads(self._file.read_text())
            nk, nh = int(data["kernel"]), int(data["handle"])
        with contextlib.suppress(OSError):
            for child in self.paths.kernels.iterdir():
                m = re.fullmatch(r"k(\d+)", child.name)
                if m:
                    nk = max(nk, int(m.group(1)) + 1)
        return nk, nh

    def _save(self) -> None:
        try:
            private_dir(self.paths.kernels)
            data = {
                "kernel": self._next_kernel,
                "handle": max(self._next_handle, self._reserved_handles),
            }
            atomic_write_text(self._file, json.dumps(data), mode=0o600)
        except OSError as exc:
            # Ids stay unique in this daemon; only a successor could reuse some after a crash.
            log.warning("counters not saved: %s", exc)

    def new_kernel_id(self) -> str:
        kernel_id = f"k{self._next_kernel}"
        self._next_kernel += 1
        self._save()
        return kernel_id

    def new_handle(self) -> str:
        if self._next_handle >= self._reserved_handles:
            self._reserved_handles = self._next_handle + HANDLE_BLOCK
            self._save()
        handle = f"c{self._next_handle}"
        self._next_handle += 1
        return handle
