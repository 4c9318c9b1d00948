"""In-kernel checkpoint writer (standard library + cloudpickle; never imports ipykeep).

Installed once per kernel as ``sys.modules["_ipykeep_ckpt"]`` and called through silent
``user_expressions``. ``snapshot`` is the only step that holds the kernel: the named values
are pickled (each bounded by the per-value limit, all of them by the per-cell limit and a time
budget) in a forked child of the kernel, which then writes the blobs, or — without ``os.fork``
— into memory here, and one writer thread writes them; the writer thread writes each cell's
signed manifest, in order (``configure(..., fork=False)`` picks the in-kernel way).
Loading is ``loading.py``'s (installed after this module, as ``_ipykeep_ckpt_load``).

Format (shared with ``ipykeep/checkpoints/store.py``): blobs are described in ``blobfmt.py``
(installed first, as ``_ipykeep_ckpt_blob``); a blob's file name is its id (a chunked
HMAC-SHA256 of its bytes) in hex under ``blobs/<2>/<62>``; a manifest is JSON with ``mac`` =
HMAC-SHA256(key, canonical JSON without ``mac``).

A kernel on another host (SSH) is configured with ``configure_remote``: its blobs live on its
own disk (``root``, under its working directory), the key comes in the configuring request (it
has no access to the project's key file), and each finished manifest waits in ``_outbox`` until
the daemon takes it (``take_manifests``, also riding on ``snapshot``'s reply) and stores it
with the project's other manifests.
"""

import contextlib
import hashlib
import hmac
import io
import json
import os
import queue
import secrets
import signal
import sys
import threading
import time
import warnings
from typing import Any

PROTOCOL_VERSION = 2
#: the spelling this module's replies and the loader's use
PROTOCOL = PROTOCOL_VERSION
_fmt = sys.modules["_ipykeep_ckpt_blob"]
_fork = sys.modules["_ipykeep_ckpt_fork"]
MAGIC = _fmt.MAGIC
# hidden state the staleness tracker treats as a value (see statemon): saved and restored too
_HIDDEN = ("<numpy.random>", "<random>")
_IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(sys))

_cfg: dict = {}
_jobs: Any = None
_pending = [0]
_lock = threading.Lock()
_written: list = []  # (label, ok, message) of finished jobs, read by ``status``
_outbox: list = []  # remote: (daemon's manifest path, signed manifest) not yet taken
_failures: list = []  # (manifest path, why) of writes that failed, not yet told the daemon
#: name -> (id of the object, why): a value whose pickling killed or outlasted the child
_poisoned: dict = {}


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    pass


class _Bounded(io.BytesIO):
    """A buffer that refuses to grow past ``limit`` or past ``deadline``: pickling a huge or
    slow value stops early instead of holding the kernel."""

    def __init__(self, limit, deadline):
        super().__init__()
        self.limit = limit
        self.deadline = deadline

    def write(self, b):
        if self.tell() + memoryview(b).nbytes > self.limit:
            raise _TooLarge()
        if time.perf_counter() > self.deadline:
            raise _TooSlow()
        return super().write(b)


def _ns():
    ip = sys.modules["IPython"].get_ipython()
    return ip.user_ns, ip


def _unavailable():
    """Why checkpoints cannot work in this kernel (JSON), or None."""
    try:
        import cloudpickle  # noqa: F401
    except Exception as exc:
        why = f"cloudpickle is not importable: {exc}"
        return json.dumps({"protocol": PROTOCOL, "available": False, "reason": why})
    return None


def configure(
    root,
    key_path,
    max_value,
    max_cell,
    max_pending,
    budget,
    exclude_names,
    exclude_types,
    fork=True,
):
    if (why := _unavailable()) is not None:
        return why
    return _configure(
        root,
        _read_key(key_path),
        max_value,
        max_cell,
        max_pending,
        budget,
        exclude_names,
        exclude_types,
        fork=fork,
    )


def configure_remote(
    root, key_hex, max_value, max_cell, max_pending, budget, exclude_names, exclude_types, fork=True
):
    """As ``configure`` for a kernel on another host: blobs under ``root`` (``~`` and relative
    paths resolved here), the key given as hex; manifests go to ``_outbox``."""
    if (why := _unavailable()) is not None:
        return why
    try:
        key = bytes.fromhex(key_hex)
        root = os.path.abspath(os.path.expanduser(root))
        top = os.path.dirname(os.path.dirname(root))  # <cwd>/.ipykeep
        for d in (top, os.path.dirname(root), root, os.path.join(root, "blobs")):
            os.makedirs(d, mode=0o700, exist_ok=True)
            os.chmod(d, 0o700)
    except Exception as exc:  # the message names the directory, never the key
        why = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or 'unusable'}"
        return json.dumps(
            {"protocol": PROTOCOL, "available": False, "reason": f"checkpoint store {root}: {why}"}
        )
    out = json.loads(
        _configure(
            root,
            key,
            max_value,
            max_cell,
            max_pending,
            budget,
            exclude_names,
            exclude_types,
            remote=True,
            fork=fork,
        )
    )
    out["root"] = root
    return json.dumps(out)


def _configure(
    root,
    key,
    max_value,
    max_cell,
    max_pending,
    budget,
    exclude_names,
    exclude_types,
    remote=False,
    fork=True,
):
    global _jobs
    if len(key) != 32:
        raise ValueError("the checkpoint key is damaged")
    _cfg.update(
        root=root,
        key=key,
        remote=remote,
        max_value=int(max_value),
        max_cell=int(max_cell),
        max_pending=int(max_pending),
        budget=float(budget),
        exclude_names=set(exclude_names),
        exclude_types=set(exclude_types),
        fork=bool(fork),
    )
    if _jobs is None:
        _jobs = queue.Queue()
        threading.Thread(target=_writer, name="ipykeep-checkpoint-writer", daemon=True).start()
    ip = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if ip is not None and not getattr(ip, "_ipykeep_freeze", False):
        # by name: a re-sent module replaces this one, and its blobs are the ones to freeze
        ip.events.register(
            "pre_run_cell", lambda *_a, _name=__name__: sys.modules[_name].freeze_live()
        )
        ip._ipykeep_freeze = True
    return json.dumps({"protocol": PROTOCOL, "available": True})


def _read_key(path):
    # read here rather than sent in a message: the key never leaves the files it lives in
    with open(path, "rb") as fh:
        key = fh.read()
    if len(key) != 32:
        raise ValueError(f"checkpoint key {path} is damaged")
    return key


def _type_name(obj):
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _get(ns, name):
    if name == "<numpy.random>":
        np_random = sys.modules.get("numpy.random")
        return ("state", np_random.get_state()) if np_random is not None else None
    if name == "<random>":
        rnd = sys.modules.get("random")
        return ("state", rnd.getstate()) if rnd is not None else None
    if name not in ns:
        return None
    return ("value", ns[name])


class _Blob:
    """One pickled value: the pickle stream and its out-of-band buffers.

    Protocol 5 hands large contiguous buffers (numpy arrays, pandas blocks) to a callback
    instead of copying them through the pickler. They are not copied here either: the writer
    thread reads them from the live objects, one chunk at a time under ``_live_lock``, so the
    snapshot step holds the kernel for the pickle stream only (copying 1 GB held it ~0.6-0.9 s).
    Before any user code runs again (IPython's ``pre_run_cell``, and ``run_untraced`` for
    subshell scratch) ``freeze_live`` copies what the writer has not read yet, so a blob is
    always the value as the cell left it. The file is ``MAGIC``, the part count and lengths,
    then the parts; its name is their MAC (``blobfmt``).
    """

    def __init__(self, stream, buffers):
        stream = stream.getbuffer()
        lengths = [memoryview(p).nbytes for p in [stream, *buffers]]
        head = _fmt.header(lengths)
        self.size = sum(lengths) + len(head)
        # [view, base]: view[0] is byte ``base`` of the part (a frozen tail starts past 0)
        self.parts = [[memoryview(head), 0], [stream, 0]] + [[b, 0] for b in buffers]
        self.at = (0, 0)  # (part, offset) the writer reads next
        if buffers:
            with _live_lock:
                _live.append(self)

    def freeze(self):
        """Copy the buffers not read yet (caller holds ``_live_lock``); the header and the
        pickle stream (parts 0 and 1) are this blob's own."""
        part, offset = self.at
        if part < 2:
            part, offset = 2, 0
        for i in range(part, len(self.parts)):
            view, base = self.parts[i]
            start = offset - base if i == part else 0
            copy = memoryview(bytearray(view[start:]))
            view.release()
            self.parts[i] = [copy, offset if i == part else 0]

    def pieces(self):
        """The blob's bytes in order, ``CHUNK`` at a time (each a copy taken under the lock)."""
        for i in range(len(self.parts)):
            offset = 0
            while True:
                with _live_lock:
                    view, base = self.parts[i]
                    piece = bytes(view[offset - base : offset - base + _fmt.CHUNK])
                    offset += len(piece)
                    self.at = (i, offset)
                if not piece:
                    break
                yield piece
        self.done()

    def done(self):
        with _live_lock:
            if self in _live:
                _live.remove(self)
            for view, _ in self.parts:
                view.release()
            self.parts = []


_live_lock = threading.Lock()
_live: list = []  # blobs whose buffers are still the kernel's live objects
_frozen_s = [0.0]


def freeze_live():
    """Called before user code runs: the blobs being written stop reading live objects."""
    if _live:
        started = time.perf_counter()
        with _live_lock:
            for blob in _live:
                blob.freeze()
            del _live[:]
        _frozen_s[0] += time.perf_counter() - started  # the kernel was held for these copies
    return "null"


def _pickle(obj, limit, deadline):
    import cloudpickle

    stream = _Bounded(limit, deadline)
    found: list = []
    cloudpickle.Pickler(stream, protocol=5, buffer_callback=found.append).dump(obj)
    used = stream.tell()
    buffers = []
    for pb in found:
        raw = pb.raw()
        used += raw.nbytes
        if used > limit:
            raise _TooLarge()
        if time.perf_counter() > deadline:
            raise _TooSlow()
        buffers.append(raw)  # not copied: see _Blob
    return _Blob(stream, buffers)


def _load(data):
    """A value from a blob's bytes (authenticated by the caller); arrays share ``data``."""
    import pickle

    parts = _fmt.split(data)
    return pickle.loads(parts[0], buffers=parts[1:])


def snapshot(meta_json, names):
    """Pickle ``names`` now; the blobs and the manifest are written in the background. Returns
    what was taken.

    Where the platform has ``os.fork``, the values are pickled in a forked child of the kernel
    (``_snapshot_forked``): a value whose pickling crashes the process or never ends costs that
    child, never the kernel. Elsewhere they are pickled here (``_snapshot_inline``).
    """
    if not _cfg:
        return json.dumps({"protocol": PROTOCOL, "available": False, "reason": "not configured"})
    meta = json.loads(meta_json)
    ns, _ = _ns()
    started = time.perf_counter()
    failed = {}
    todo = []  # (name, kind, object) to pickle, in name order
    for name in sorted(set(names)):
        if name in _cfg["exclude_names"]:
            failed[name] = "excluded by the checkpoint_exclude_names setting"
            continue
        got = _get(ns, name)
        if got is None:
            continue  # deleted since, or a hidden state whose module is not loaded
        kind, obj = got
        if kind == "value" and _type_name(obj) in _cfg["exclude_types"]:
            failed[name] = (
                f"its type {_type_name(obj)} is excluded by the checkpoint_exclude_types setting"
            )
            continue
        poisoned = _poisoned.get(name)
        if kind == "value" and poisoned is not None and poisoned[0] == id(obj):
            failed[name] = f"{poisoned[1]} (not tried again while the name holds this value)"
            continue
        todo.append((name, kind, obj))
    if _forking() and not all(_plain(obj) for _, kind, obj in todo if kind == "value"):
        sizes = _snapshot_forked(meta, ns, todo, failed, started)
    else:
        sizes = _snapshot_inline(meta, ns, todo, failed, started)
    return json.dumps(
        {
            "protocol": PROTOCOL,
            "available": True,
            "sizes": sizes,
            "failed": failed,
            "seconds": round(time.perf_counter() - started, 6),
            "manifests": _take(),
            "write_failures": json.loads(take_failures()),
        }
    )


#: exact types whose pickling cannot crash, hang or run user code (a subclass may do any of it)
_PLAIN = frozenset({int, float, complex, bool, type(None), str, bytes})
_PLAIN_MAX_BYTES = 1 << 16


def _plain(obj):
    """Whether ``obj`` is a small value of a builtin scalar type: pickled in the kernel at once,
    as forking a child for it costs the kernel more than pickling it (a long chain of cheap
    cells is checkpointed cell by cell)."""
    t = type(obj)
    return t in _PLAIN and (t not in (str, bytes) or len(obj) <= _PLAIN_MAX_BYTES)


def _forking():
    return _cfg["fork"] and hasattr(os, "fork") and hasattr(os, "waitstatus_to_exitcode")


def _pickle_all(todo, failed, started, report):
    """Pickle ``todo`` within the limits and the time budget: ``(taken, sizes, total)``, each
    failure in ``failed``; ``report(**event)`` is told of each step (the forked child's pipe)."""
    taken, sizes = [], {}
    total = 0
    budget = _cfg["budget"]
    pickled: dict = {}  # id of an object already pickled here -> its blob (one object, one pickle)
    for name, kind, obj in todo:
        if time.perf_counter() - started > budget:
            failed[name] = f"skipped: the snapshot time budget ({budget:g} s) was spent"
            report(failed=name, why=failed[name])
            continue
        if kind == "value" and id(obj) in pickled:
            sizes[name] = pickled[id(obj)].size
            taken.append((name, kind, pickled[id(obj)]))
            report(ok=name, size=sizes[name])
            continue
        limit = min(_cfg["max_value"], _cfg["max_cell"] - total)
        report(begin=name)
        try:
            buf = _pickle(obj, limit + 1, started + budget)
        except _TooSlow:
            failed[name] = (
                f"skipped: pickling it took longer than the snapshot time budget ({budget:g} s)"
            )
        except _TooLarge:
            which = "per-value" if limit == _cfg["max_value"] else "per-cell"
            failed[name] = f"larger than the {which} checkpoint limit ({limit / 2**20:.0f} MB)"
        except BaseException as exc:  # any pickling failure: the cell is re-run instead
            if isinstance(exc, KeyboardInterrupt):
                raise
            failed[name] = f"cannot be pickled: {type(exc).__name__}: {str(exc)[:160]}"
        else:
            total += buf.size
            sizes[name] = buf.size
            taken.append((name, kind, buf))
            if kind == "value":
                pickled[id(obj)] = buf
            report(ok=name, size=buf.size)
            continue
        report(failed=name, why=failed[name])
    return taken, sizes, total


def _snapshot_inline(meta, ns, todo, failed, started):
    """Pickle in the kernel (no ``os.fork``): the budget is checked as each pickle grows, so a
    value whose pickling hangs without writing, or kills the process, reaches the kernel."""
    taken, sizes, total = _pickle_all(todo, failed, started, lambda **_: None)
    meta["shared"] = _shared(ns, {n: ns[n] for n, kind, _ in taken if kind == "value"})
    queued = True
    with _lock:
        if taken and _pending[0] + total > _cfg["max_pending"]:
            queued = False
        else:
            _pending[0] += total
    if not queued:
        failed.update({n: "skipped: the checkpoint writer is behind" for n, _, _ in taken})
        taken, sizes, total = [], {}, 0
    _jobs.put((meta, taken, failed, total, None))
    return sizes


def _snapshot_forked(meta, ns, todo, failed, started):
    """Pickle ``todo`` in a forked child, waiting for it up to the time budget.

    The child has the kernel's memory as it is at the fork (copy-on-write), so it needs no copy
    of the values and the kernel may go on at once; it runs only this module's code (pickling
    and writing files, then ``os._exit``: the kernel's other threads, sockets and streams are
    not in it). It tells over a pipe which name it starts, each result, when everything is
    pickled, then each blob written. The kernel waits until everything is pickled: a child that
    dies meanwhile costs the value it was pickling (reported, and not tried again while the
    name holds that object), and so does one still pickling when the budget is spent (it is
    killed). The writer thread reads the rest and writes the manifest.
    """
    if _pending[0] > _cfg["max_pending"]:  # read without the lock: a hint, as inline
        failed.update({n: "skipped: the checkpoint writer is behind" for n, _, _ in todo})
        todo = []
    if not todo:
        _jobs.put((meta, [], failed, 0, None))
        return {}
    objects = {n: obj for n, _, obj in todo}
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded": see above
        pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_fd)
            _child(todo, dict(failed), started, write_fd)
        except BaseException:
            os._exit(70)
        os._exit(0)
    os.close(write_fd)
    pipe = _fork.Pipe(read_fd)
    sizes: dict = {}
    current = None
    try:
        while True:
            event = pipe.next(started + _cfg["budget"])
            if event is None or event == "timeout":
                break
            if "begin" in event:
                current = event["begin"]
            elif "ok" in event:
                sizes[event["ok"]], current = event["size"], None
            elif "failed" in event:
                failed[event["failed"]], current = event["why"], None
            elif "pickled" in event:
                _fork.adopt_class_names(event.get("classes"))
                break
    except BaseException:  # an interrupt while waiting: the child goes, the kernel's code runs on
        _fork.kill(pid)
        pipe.close()
        raise
    if event is not None and event != "timeout":
        total = sum(sizes.values())
        with _lock:
            _pending[0] += total
        meta["shared"] = _shared(ns, {n: ns[n] for n, k, _ in todo if n in sizes and k == "value"})
        _jobs.put((meta, [], failed, total, (pid, pipe)))
        return sizes
    # the child died, or was still pickling when the budget ran out: nothing of it is kept
    budget = _cfg["budget"]
    if event == "timeout":
        _fork.kill(pid)
        why = (
            f"pickling it took longer than the snapshot time budget ({budget:g} s); "
            "the process pickling it was stopped"
        )
    else:
        why = f"pickling it ended the process that pickled it ({_fork.exit_text(_fork.reap(pid))})"
    pipe.close()
    culprit = current if current is not None else "the values"
    if current is not None:
        failed[current] = why
        if todo and next(k for n, k, _ in todo if n == current) == "value":
            _poisoned[current] = (id(objects[current]), why)
    for name, _, _ in todo:
        if name not in failed:
            failed[name] = f"skipped: pickling {culprit} failed ({why.split(';')[0]})"
    _jobs.put((meta, [], failed, 0, None))
    return {}


def _child(todo, failed, started, write_fd):
    """The forked child: pickle, tell, write the blobs, tell. Only this thread exists here, and
    the locks other kernel threads held at the fork may never be released: it makes its own."""
    global _lock, _live_lock
    _lock, _live_lock = threading.Lock(), threading.Lock()
    del _live[:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kernel's interrupt is the kernel's
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    # the kernel's sys.stdout sends to its I/O thread, which the child does not have
    sys.stdout = sys.stderr = open(os.devnull, "w")
    pipe = os.fdopen(write_fd, "wb", buffering=0)

    def report(**event):
        pipe.write((json.dumps(event) + "\n").encode())

    named = _fork.named_classes()
    taken, _, _ = _pickle_all(todo, failed, started, report)
    report(pickled=True, classes=_fork.new_class_names(named))
    ids: dict = {}
    try:
        for name, kind, blob in taken:
            if id(blob) not in ids:
                ids[id(blob)] = _write_blob(blob)
            report(blob=name, id=ids[id(blob)], size=blob.size, kind=kind)
    except OSError as exc:  # the kernel's writer reports it (a full disk, most often)
        report(write_error=_fork.write_failure(exc))
        raise
    report(written=True)


def _shared(ns, saved):
    """Saved name -> the other user names bound to the same object now.

    Values are pickled per name, so two names of one object would come back as two objects
    (and a mutation through one would no longer show through the other); the daemon uses this
    to bind them to one object again on restore. Immutable scalars are left out: their
    identity cannot be observed through a mutation.
    """
    wanted = {id(v) for v in saved.values() if not isinstance(v, _SCALARS)}
    if not wanted:
        return {}
    holders: dict = {}
    for n, v in ns.items():
        if id(v) in wanted and not n.startswith("_") and n not in _IPYTHON_NAMES:
            holders.setdefault(id(v), []).append(n)
    out = {}
    for name, value in saved.items():
        others = sorted(n for n in holders.get(id(value), ()) if n != name)
        if others:
            out[name] = others
    return out


def _write_manifest(meta, **fields):
    """Sign the manifest with ``fields`` and write it: its bytes (remote: handed over, None)."""
    manifest = dict(meta.get("manifest") or {})
    manifest.update(fields, created=time.time())
    manifest["mac"] = hmac.new(_cfg["key"], _canonical(manifest), hashlib.sha256).hexdigest()
    if _cfg.get("remote"):
        with _lock:  # the path is the daemon's: it writes the manifest there
            _outbox.append([meta["path"], manifest])
        return None
    data = json.dumps(manifest).encode()
    _write_private(os.path.dirname(meta["path"]), lambda fh: fh.write(data), meta["path"])
    return data


def take_failures():
    """The writes that failed since the last call, as ``[manifest path, why]`` pairs."""
    return json.dumps(_take(_failures))


def _take(box=_outbox):
    with _lock:
        done = box[:]
        del box[:]
    return done


def take_manifests():
    """Remote: the manifests written since the last call, as ``[path, manifest]`` pairs."""
    return json.dumps(_take())


def settle(timeout):
    """Remote: wait up to ``timeout`` s for the writer, then ``take_manifests``."""
    flush(timeout)
    return take_manifests()


def _write_private(directory, write, destination):
    """Write a new file, 0600 in ``directory`` (0700), with ``write(file)``; then move it to
    ``destination``: a path, or a function asked once the file is written (a blob's name is its
    MAC) that returns None to drop it."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = f"{directory}/.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        path = destination() if callable(destination) else destination
        if path is None:
            os.unlink(tmp)
        else:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _tee(pieces, fh):
    """Each piece, once written to ``fh``."""
    for piece in pieces:
        fh.write(piece)
        yield piece


def _write_blob(blob):
    """Write ``blob`` under its id (hashed while written: one read of each live byte)."""
    found = []

    def write(fh):
        found.append(_fmt.blob_id(_cfg["key"], _tee(blob.pieces(), fh)))

    def destination():
        path = _blob_path(found[0])
        if os.path.exists(path):  # content-addressed: already there
            os.utime(path)
            return None
        return path

    try:
        _write_private(os.path.join(_cfg["root"], "blobs"), write, destination)
    except BaseException:
        blob.done()
        raise
    return found[0]


def _canonical(payload):
    body = {k: v for k, v in payload.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _blob_path(blob_id):
    return os.path.join(_cfg["root"], "blobs", blob_id[:2], blob_id[2:])


def _writer():
    while True:
        meta, taken, failed, total, child = _jobs.get()
        try:
            values: dict = {}
            ids: dict = {}
            for name, kind, blob in taken:
                if id(blob) in ids:  # names of one object share its pickle
                    blob_id = ids[id(blob)]
                else:
                    blob_id = ids[id(blob)] = _write_blob(blob)
                values[name] = {"blob": blob_id, "size": blob.size, "kind": kind}
            if child is not None:
                values = _child_blobs(*child)
            for name in values:
                if name in meta.get("shared", {}):
                    values[name]["shared"] = meta["shared"][name]
            data = _write_manifest(meta, values=values, failed=failed, restorable=not failed)
            memo = None if failed else meta.get("memo_path")  # every value saved: a memo entry
            if data is not None and memo:
                _write_private(os.path.dirname(memo), lambda fh, d=data: fh.write(d), memo)
            _written.append((meta["path"], True, ""))
        except Exception as exc:  # a full disk costs the checkpoint, never the kernel
            why = _fork.write_failure(exc)
            _written.append((meta.get("path"), False, why))
            with _lock:
                _failures.append([meta.get("path"), why])
            # a small manifest saying so: after a restart it describes the cell
            lost = {name: why for name, _kind, _blob in taken}
            try:
                _write_manifest(
                    meta, values={}, failed={**failed, **lost}, restorable=False, write_failed=why
                )
            except Exception:  # nothing fits: an older manifest must not stand for it
                with contextlib.suppress(OSError):
                    os.unlink(meta["path"])
        finally:
            del taken
            with _lock:
                _pending[0] -= total
            del _written[:-50]
            _jobs.task_done()


def _child_blobs(pid, pipe):
    """The blobs a forked child wrote (see ``_snapshot_forked``), once it has exited."""
    values = {}
    try:
        while True:
            event = pipe.next()
            if event is None or "written" in event:
                break
            if "write_error" in event:
                raise _fork.WriteFailed(event["write_error"])
            values[event["blob"]] = {
                "blob": event["id"],
                "size": event["size"],
                "kind": event["kind"],
            }
    finally:
        pipe.close()
        status = _fork.reap(pid)
    if event is None or status != 0:
        raise OSError(f"the process writing the blobs ended early ({_fork.exit_text(status)})")
    return values


def flush(timeout):
    """Wait up to ``timeout`` s until every queued snapshot is written; True when done."""
    if _jobs is None:
        return json.dumps(True)
    deadline = time.monotonic() + float(timeout)
    while _jobs.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    return json.dumps(not _jobs.unfinished_tasks)


def status():
    return json.dumps(
        {
            "protocol": PROTOCOL,
            "pending_bytes": _pending[0],
            "queued": _jobs.unfinished_tasks if _jobs is not None else 0,
            "errors": [m for _, ok, m in _written if not ok][-5:],
            "frozen_s": round(_frozen_s[0], 6),
        }
    )


def user_names():
    """Every user variable (for named checkpoints): IPython's and private names left out."""
    ns, ip = _ns()
    hidden = getattr(ip, "user_ns_hidden", {})
    names = [
        n
        for n in ns
        if not n.startswith("_")
        and n not in _IPYTHON_NAMES
        and (n not in hidden or ns[n] is not hidden[n])
    ]
    names += [h for h in _HIDDEN if _get(ns, h) is not None]
    return json.dumps(sorted(names))
