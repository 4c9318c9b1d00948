"""The kernel's side of a forked checkpoint child (standard library only; never imports ipykeep).

Installed in kernels as ``sys.modules["_ipykeep_ckpt_fork"]`` before ``_ipykeep_ckpt``
(``snapshot.py``), which forks the child: the pipe it reports on, stopping and reaping it, and
the class names cloudpickle gave in it, which the kernel adopts.
"""

import contextlib
import errno
import json
import os
import select
import signal
import sys
import time

PROTOCOL_VERSION = 1


class Pipe:
    """The kernel's end of a child's pipe: one JSON event per line."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def next(self, deadline=None):
        """The next event; None at the end of the pipe; "timeout" past ``deadline``."""
        while b"\n" not in self.buffer:
            if deadline is not None:
                left = deadline - time.perf_counter()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    return "timeout"
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        with contextlib.suppress(OSError):
            os.close(self.fd)


def kill(pid):
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    reap(pid)


def reap(pid):
    with contextlib.suppress(ChildProcessError):
        return os.waitpid(pid, 0)[1]
    return 0


def exit_text(status):
    code = os.waitstatus_to_exitcode(status)
    return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def _trackers():
    """cloudpickle's registries of the classes it saves by value (class -> id, id -> class)."""
    cp = sys.modules.get("cloudpickle.cloudpickle")
    by_class = getattr(cp, "_DYNAMIC_CLASS_TRACKER_BY_CLASS", None)
    by_id = getattr(cp, "_DYNAMIC_CLASS_TRACKER_BY_ID", None)
    return (by_class, by_id) if by_class is not None and by_id is not None else (None, None)


def named_classes():
    """In the child: the class ids cloudpickle has given so far."""
    _, by_id = _trackers()
    return set(by_id.keys()) if by_id is not None else set()


def new_class_names(before):
    """In the child: ``[address, id]`` of each class cloudpickle named since ``before``."""
    _, by_id = _trackers()
    if by_id is None:
        return []
    return [[id(cls), tid] for tid, cls in list(by_id.items()) if tid not in before]


def adopt_class_names(pairs):
    """In the kernel: take the ids a child gave to classes the kernel had not named yet.

    cloudpickle names each class it saves by value with a random id the first time, and a
    restore loads every value naming one id with one class. Named in a child only, a class
    would get a new id in each child, and values saved by different cells would come back
    with different copies of it. The child's memory is the kernel's, so its addresses are the
    kernel's classes (alive: the kernel was waiting meanwhile); they are found by walking the
    class tree from ``object``.
    """
    by_class, by_id = _trackers()
    wanted = {int(address): tid for address, tid in pairs or ()}
    if by_class is None or not wanted:
        return
    seen, stack = set(), [object]
    while stack and wanted:
        cls = stack.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        tid = wanted.pop(id(cls), None)
        if tid is not None and cls not in by_class:
            by_class[cls] = tid
            by_id[tid] = cls
        with contextlib.suppress(TypeError):
            stack.extend(type.__subclasses__(cls))


class WriteFailed(OSError):
    """A forked child's write failed; its words, already those of ``write_failure``."""


def write_failure(exc):
    """Why a checkpoint write failed, in words ("disk full" for ENOSPC or EDQUOT)."""
    if isinstance(exc, WriteFailed):
        return str(exc)
    full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1))
    reason = "disk full" if full else f"{type(exc).__name__}: {exc}"
    return f"its checkpoint could not be written ({reason})"
