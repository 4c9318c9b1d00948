"""Sees what a memo key cannot cover while a notebook cell runs (standard library only).

A cell run is memoized by its source, the versions of the values it read and the files under
the project it read (``checkpoints/memo.py``). This module, installed once per kernel, reports
the reads that key cannot see, so such a run is never loaded in place of a real one: network
access (``socket.connect``, ``urllib.Request``… audit events), other processes (``!cmd``,
``subprocess``, ``os.system``), and files opened for reading outside the project tree and
outside the Python installation and the usual system and cache directories (``/dev/urandom``
counts: entropy is data). An audit hook (on for the life of the process) records them between
IPython's ``pre_run_cell`` and ``post_run_cell`` events; ``collect`` answers after the cell, with
the version of each package the cell imports (a library upgrade changes the key).
"""

import json
import os
import sys
import types

PROTOCOL_VERSION = 1
_STATE_KEY = "_ipykeep_memoguard_state"
_NETWORK = frozenset(
    {
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sendto",
        "urllib.Request",
        "http.client.connect",
        "ftplib.connect",
        "smtplib.connect",
        "imaplib.open",
        "poplib.connect",
    }
)
_PROCESSES = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile"}
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_SYSTEM = ("/usr/", "/lib/", "/lib64/", "/etc/", "/proc/", "/sys/", "/opt/conda/", "/dev/null")
_HOME_CACHES = (
    ".cache",
    ".config",
    ".matplotlib",
    ".ipython",
    ".local/lib",
    ".local/share/jupyter",
)
_MAX = 5

_state = sys.__dict__.setdefault(
    _STATE_KEY, {"hooked": False, "registered": False, "active": False, "seen": []}
)


def _allowed_prefixes():
    home = os.path.expanduser("~")
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    out = [os.path.join(os.path.realpath(p), "") for p in prefixes if p]
    out += [os.path.join(home, c, "") for c in _HOME_CACHES]
    return tuple(out) + _SYSTEM


def _in_import():
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(14):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _note(what):
    seen = _state["seen"]
    if what not in seen and len(seen) < _MAX:
        seen.append(what)


def _hook(event, args):
    if not _state["active"]:
        return
    try:
        if event == "open":
            _opened(args)
        elif event in _NETWORK:
            _note(f"network ({event})")
        elif event in _PROCESSES:
            _note(f"another process ({event})")
    except Exception:  # never into the user's code
        pass


def _opened(args):
    path = args[0] if args else None
    if path is None or isinstance(path, int):
        return
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return  # a write is the cell's output, not an input
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return
    if _in_import():
        return
    full = os.path.realpath(os.path.join(os.getcwd(), os.fsdecode(os.fspath(path))))
    root = (sys.__dict__.get("_ipykeep_filetrack_state") or {}).get("root")
    if root and (full == root or full.startswith(os.path.join(root, ""))):
        return  # the project's files are stamped: the key covers them
    if full.startswith(_state.setdefault("allowed", _allowed_prefixes())):
        return
    _note(f"a file outside the project ({full})")


def _begin(*_args):
    _state["seen"] = []
    _state["active"] = True


def _end(*_args):
    _state["active"] = False


def install():
    if not _state["hooked"]:
        sys.addaudithook(lambda event, args: _STATE_HOOK[0](event, args))
        _state["hooked"] = True
    _STATE_HOOK[0] = _hook
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and not _state["registered"]:
        shell.events.register("pre_run_cell", lambda *a: _STATE_HOOK[1](*a))
        shell.events.register("post_run_cell", lambda *a: _STATE_HOOK[2](*a))
        _state["registered"] = True
    _STATE_HOOK[1], _STATE_HOOK[2] = _begin, _end
    return json.dumps({"protocol": PROTOCOL_VERSION, "ok": shell is not None})


def _version(package):
    module = sys.modules.get(package)
    if module is None:
        return None
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    path = getattr(module, "__file__", None)
    if isinstance(path, str):
        try:
            st = os.stat(path)
            return f"{st.st_mtime_ns}:{st.st_size}"
        except OSError:
            return None
    return "builtin"


def collect(packages=()):
    """What the last cell read that a memo key cannot cover, and its imports' versions."""
    _state["active"] = False
    return json.dumps(
        {
            "protocol": PROTOCOL_VERSION,
            "uncovered": list(_state["seen"]),
            "libs": {p: _version(p) for p in packages},
        }
    )


# the hook and the event handlers go through this list, so a re-sent copy of the module
# replaces the functions an earlier copy registered (audit hooks cannot be removed)
_STATE_HOOK = _state.setdefault("functions", [None, None, None])
