"""Records the files a cell opens for reading under the project root.

Sent into the kernel as source and installed once as a module. A ``sys.addaudithook`` hook
on the ``open`` event (raised by ``open()``, ``io.open_code`` and ``os.open``, so also by
pandas, numpy and imports of local modules) collects paths between ``begin()`` and ``end()``.
Directories a cell lists (``os.listdir``/``os.scandir`` events, so also ``glob``, ``pathlib``
iteration and pandas readers that list) are inputs too; they are stamped by their entries' names
(``listing_stamp``), so a file added to a data directory makes the lister stale while the
notebook's own saves do not. Listings done by the import system are not the cell's. Writes are
outputs, not inputs: they are reported apart (``written``), so a cell reading a
file that a re-running cell above rewrites can be re-run after it. The hook stays installed
for the life of the process (audit hooks cannot be removed), so it does almost nothing while
no cell is tracked.
Standard library only; every public function returns a JSON string.
"""

import json
import os
import sys
import types

PROTOCOL_VERSION = 1
MAX_PATHS = 2000
_STATE_KEY = "_ipykeep_filetrack_state"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

# Kept on ``sys`` so a re-sent module shares the one hook already installed.
_state = sys.__dict__.setdefault(
    _STATE_KEY, {"hooked": False, "active": False, "root": None, "paths": {}, "written": {}}
)
_state.setdefault("written", {})
_state.setdefault("dirs", {})
_LIST_EVENTS = ("os.listdir", "os.scandir")


def listing_stamp(path: str) -> "tuple[int, int]":
    """(a hash of the sorted entry names, their count) for a directory; hidden files, notebooks
    and temporary files are left out so saving a notebook does not change it. The host stamps
    local directories with this same function (``staleness/service.py`` imports it)."""
    import hashlib

    names = sorted(
        n
        for n in os.listdir(path)
        if not n.startswith((".", "~"))
        and not n.endswith((".ipynb", ".tmp", ".ipykeep-tmp"))
        and n != "__pycache__"
    )
    digest = hashlib.sha1("\n".join(names).encode("utf-8", "surrogateescape")).hexdigest()
    return int(digest[:15], 16), len(names)


def _in_import():
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _listed(args):
    path = args[0] if args else None
    if path is None:
        path = "."
    if isinstance(path, int):
        return
    if _in_import():
        return
    full = os.path.normpath(os.path.join(os.getcwd(), os.fsdecode(os.fspath(path))))
    root = _state["root"]
    if root and full != root and not full.startswith(root + os.sep):
        return
    if os.sep + ".ipykeep" in full or "__pycache__" in full:
        return
    if (full + os.sep).startswith(_state.get("skip", ())):
        return
    if len(_state["dirs"]) < MAX_PATHS:
        _state["dirs"][full] = None


def _hook(event, args):
    if not _state["active"]:
        return
    if event in _LIST_EVENTS:
        try:
            _listed(args)
        except Exception:
            pass
        return
    if event != "open":
        return
    try:
        path, mode, flags = args
        if isinstance(mode, str):
            writes = "w" in mode or "a" in mode or "x" in mode or "+" in mode
        else:
            writes = isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        if isinstance(path, int):
            return
        path = os.fsdecode(os.fspath(path))
        full = os.path.normpath(os.path.join(os.getcwd(), path))
        root = _state["root"]
        if root and full != root and not full.startswith(root + os.sep):
            return
        if "__pycache__" in full or os.sep + ".ipykeep" + os.sep in full:
            return
        if full.startswith(_state.get("skip", ())):
            return
        paths = _state["written"] if writes else _state["paths"]
        if len(paths) < MAX_PATHS:
            paths[full] = None
    except Exception:  # an audit hook must never break the user's code
        return


def install(root):
    """Track reads under ``root`` (absolute; resolved against the kernel's cwd)."""
    _state["root"] = os.path.normpath(os.path.join(os.getcwd(), root)) if root else None
    # A project environment (.venv) inside the root is the kernel's interpreter, not data the
    # cells read: what an import or an installer opens there is no input of the cell.
    _state["skip"] = tuple(
        sorted({os.path.normpath(p) + os.sep for p in (sys.prefix, sys.exec_prefix)})
    )
    if not _state["hooked"]:
        sys.addaudithook(_hook)
        _state["hooked"] = True
    return json.dumps({"protocol": PROTOCOL_VERSION, "root": _state["root"]})


def begin():
    """Start collecting reads (for the cell about to run)."""
    _state["paths"] = {}
    _state["written"] = {}
    _state["dirs"] = {}
    _state["active"] = True
    return json.dumps({"protocol": PROTOCOL_VERSION})


def collect():
    """The files read (and opened for writing) since the last collect/begin; keep collecting.

    Evaluated as a ``user_expression`` of each main-shell execution, so every execution's
    window is exactly its own run (user expressions are evaluated right after the code).
    """
    result = end()
    _state["active"] = True
    return result


def end():
    """Stop collecting; the files read since ``begin()``, stamped now (after the cell ran), and
    the paths opened for writing."""
    _state["active"] = False
    paths = list(_state["paths"])
    written = sorted(_state["written"])
    dirs = list(_state["dirs"])
    _state["paths"] = {}
    _state["written"] = {}
    _state["dirs"] = {}
    files = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            files.append({"path": path, "mtime_ns": None, "size": None})
            continue
        if not os.path.isfile(path):
            continue
        files.append({"path": path, "mtime_ns": st.st_mtime_ns, "size": st.st_size})
    for path in dirs:
        try:
            digest, count = listing_stamp(path)
        except OSError:
            files.append({"path": path, "mtime_ns": None, "size": None})
            continue
        files.append({"path": path, "mtime_ns": digest, "size": count})
    return json.dumps(
        {
            "protocol": PROTOCOL_VERSION,
            "files": files,
            "written": written,
            "truncated": len(paths) >= MAX_PATHS,
        }
    )


def stat_many(paths):
    """Stamps of ``paths`` as this process sees them, for a host that cannot stat the kernel's
    files itself (a remote kernel): relative paths against the kernel's cwd, normalized like
    the read hook; files by mtime and size, directories by ``listing_stamp`` (the rule
    ``end()`` and the host's own stat use); a missing path with None."""
    import stat as stat_module

    stamps = []
    for path in paths:
        full = os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(path)))
        try:
            st = os.stat(full)
            if stat_module.S_ISDIR(st.st_mode):
                digest, count = listing_stamp(full)
                stamps.append({"path": full, "mtime_ns": digest, "size": count})
                continue
        except OSError:
            stamps.append({"path": full, "mtime_ns": None, "size": None})
            continue
        stamps.append({"path": full, "mtime_ns": st.st_mtime_ns, "size": st.st_size})
    return json.dumps({"protocol": PROTOCOL_VERSION, "stamps": stamps})
