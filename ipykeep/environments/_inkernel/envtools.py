"""Installs packages into the running interpreter's environment; imports local scripts by path.

Sent into the kernel as source and installed once as a module (``_ipykeep_env``); the daemon
also runs this same file with the environment's interpreter before a kernel exists (installing
ipykernel), so there is one installer. It installs with uv when it is found (``uv pip install
--python sys.executable``), with ``python -m pip`` otherwise; the installer's output goes to a
log file and only a bounded tail comes back. After an install, import caches are invalidated
and new ``.pth`` files of the site directories processed, so new packages import without a
restart; packages that were already imported and changed version are reported (the kernel holds
their old code until it restarts).

``import_path(path)`` (put in ``builtins`` by the daemon) imports one script: a PEP 723
``# /// script`` block's dependencies are installed first, the module is kept in
``sys.modules`` under the file's stem (a repeated call returns it), and a finder on
``sys.meta_path`` knows the file so ``importlib.reload`` works. Its file is opened like any
import, so staleness records it as an input of the cell that imported it.
Standard library only; the daemon-facing functions return JSON strings.
"""

import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time

PROTOCOL_VERSION = 1
#: characters of the installer's output returned (the rest is in the log file)
TAIL_CHARS = 2000
_STATE_KEY = "_ipykeep_env_state"

# Kept on ``sys`` so a re-sent module shares the scripts already imported and the one finder.
_state = sys.__dict__.setdefault(
    _STATE_KEY, {"uv": None, "log_dir": None, "scripts": {}, "finder": None, "events": []}
)

_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def configure(uv=None, log_dir=None, refused=None):
    """Where uv is (the daemon's, for a local kernel), where installer logs go, and why this
    kernel must not be installed into (a gateway's image), if it must not."""
    _state["uv"] = uv
    _state["log_dir"] = log_dir
    _state["refused"] = refused
    return json.dumps({"prefix": sys.prefix, "python": sys.executable})


def _user_tag():
    """The uid on POSIX; the user name on Windows, which has no uids (in-kernel code cannot
    import ``ipykeep/platform``, so it carries this small branch of its own)."""
    getuid = getattr(os, "getuid", None)
    if getuid is not None:
        return str(getuid())
    import getpass

    return re.sub(r"[^A-Za-z0-9_.-]", "_", getpass.getuser()) or "user"


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _versions():
    importlib.invalidate_caches()
    found: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def _site_dirs():
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


def _pth_files():
    return {(d, n) for d in _site_dirs() for n in os.listdir(d) if n.endswith(".pth")}


def refusal():
    """Why this interpreter must not be installed into, or None: a system interpreter (not in
    a virtual environment or conda) that its distribution manages (PEP 668's
    ``EXTERNALLY-MANAGED`` marker, as pip honours it) or whose site directory is read-only."""
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    conda = os.path.isdir(os.path.join(sys.prefix, "conda-meta"))
    target = sysconfig.get_paths()["purelib"]
    if not os.path.isdir(target):
        target = sys.prefix
    if not in_venv and not conda:
        marker = os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")
        if os.path.isfile(marker):
            return "%s is a system interpreter managed by its distribution (%s)" % (
                sys.executable,
                marker,
            )
        if not os.access(target, os.W_OK):
            return "%s is a system interpreter (not a virtual environment) and %s is read-only" % (
                sys.executable,
                target,
            )
    elif not os.access(target, os.W_OK):
        return "%s is not writable" % target
    return None


def _installer(requirements, index_url):
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    uv = _state.get("uv") or shutil.which("uv") or (beside if os.path.isfile(beside) else None)
    extra = ["--index-url", index_url] if index_url else []
    if uv:
        return "uv", [uv, "pip", "install", "--python", sys.executable] + extra + list(requirements)
    if importlib.util.find_spec("pip") is None:
        return None, None
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
    return "pip", cmd + extra + list(requirements)


def _top_level(name):
    """The import names a distribution provides (from its metadata)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return []
    text = dist.read_text("top_level.txt")
    if text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    tops = set()
    for f in dist.files or ():
        first = str(f).split("/", 1)[0]
        if first.endswith(".py"):
            tops.add(first[:-3])
        elif "/" in str(f) and not first.endswith((".dist-info", ".data")) and first != "..":
            tops.add(first)
    return sorted(tops)


def _tail(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return ""
    text = _ANSI.sub("", text)
    return text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]


def install_result(requirements, index_url=None, timeout=600.0, keep_event=True):
    """Install ``requirements``; a dict saying what changed, or why it failed. ``keep_event``:
    keep it for ``take_events`` (the daemon records the installs it asked for itself)."""
    why = _state.get("refused") or refusal()
    if why:
        return {"ok": False, "error": "refused", "message": why}
    installer, cmd = _installer(requirements, index_url)
    if cmd is None:
        return {
            "ok": False,
            "error": "no_installer",
            "message": "neither uv nor pip is available for %s" % sys.executable,
        }
    log_dir = _state.get("log_dir") or os.path.join(
        tempfile.gettempdir(), "ipykeep-installs-%s" % _user_tag()
    )
    os.makedirs(log_dir, mode=0o700, exist_ok=True)
    os.chmod(log_dir, 0o700)  # the owner's only, made so before this run or not
    log = os.path.join(log_dir, "install-%d-%d.log" % (int(time.time() * 1000), os.getpid()))
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    before = _versions()
    pth_before = _pth_files()
    with open(log, "w", encoding="utf-8") as out:
        out.write("$ %s\n" % " ".join(cmd))
        out.flush()
        try:
            code = subprocess.run(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                env=dict(os.environ, NO_COLOR="1"),  # plain text in the log and in errors
            ).returncode
        except subprocess.TimeoutExpired:
            code = None
        except OSError as exc:
            out.write("could not run the installer: %s\n" % exc)
            code = -1
    base = {"installer": installer, "python": sys.executable, "log": log}
    if code != 0:
        what = "timed out after %g s" % timeout if code is None else "exited with %s" % code
        return dict(
            base, ok=False, error="failed", message="%s %s" % (installer, what), tail=_tail(log)
        )
    known = set(sys.path)
    for d, n in sorted(_pth_files() - pth_before):
        site.addpackage(d, n, known)
    importlib.invalidate_caches()
    after = _versions()
    changed = [
        {"name": n, "before": before.get(n), "after": after.get(n)}
        for n in sorted(set(before) | set(after))
        if before.get(n) != after.get(n)
    ]
    restart = []
    for c in changed:
        if c["before"] is None:
            continue
        tops = _top_level(c["name"]) if c["after"] else []
        if any(t in sys.modules for t in tops):
            restart.append(c["name"])
    if keep_event:
        event = {"at": time.time(), "requirements": list(requirements), "changed": changed}
        _state["events"].append(event)
    modules = sorted({t for c in changed if c["name"] in restart for t in _top_level(c["name"])})
    return dict(base, ok=True, changed=changed, restart_needed=restart, modules=modules)


def install(requirements, index_url=None, timeout=600.0):
    return json.dumps(install_result(requirements, index_url, timeout, keep_event=False))


def take_events():
    """The installs done in the kernel (``import_path``) since the last call."""
    events, _state["events"] = _state["events"], []
    return json.dumps(events)


def script_dependencies(source):
    """The ``dependencies`` of a PEP 723 ``# /// script`` block, or []."""
    blocks = [m for m in _PEP723.finditer(source) if m.group("type") == "script"]
    if not blocks:
        return []
    if len(blocks) > 1:
        raise ValueError("more than one '# /// script' block")
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].group("content").splitlines(keepends=True)
    )
    try:
        tomllib = importlib.import_module("tomllib")
        return list(tomllib.loads(content).get("dependencies", []))
    except ImportError:  # Python 3.10: the list literal is also valid Python
        import ast

        found = re.search(r"(?ms)^dependencies\s*=\s*(\[.*?\])", content)
        return list(ast.literal_eval(found.group(1))) if found else []


class _ScriptFinder(importlib.abc.MetaPathFinder):
    """Finds the scripts ``import_path`` imported, by name, so ``importlib.reload`` works."""

    def find_spec(self, fullname, path=None, target=None):
        found = sys.__dict__[_STATE_KEY]["scripts"].get(fullname)
        return importlib.util.spec_from_file_location(fullname, found) if found else None


def _missing(requirements):
    """The requirements whose distribution is not installed (version specifiers are left to
    the installer once one is missing)."""
    have = _versions()
    out = []
    for requirement in requirements:
        found = _NAME.match(requirement)
        if found is None or canonical(found.group(1)) not in have:
            out.append(requirement)
    return out


def import_path(path, name=None, index_url=None):
    """Import the script at ``path`` (relative to the working directory) as a module.

    A PEP 723 ``# /// script`` block's dependencies not installed yet are installed first,
    into this kernel's environment. The module is ``sys.modules[name]`` (default: the file's
    stem); calling again returns it; ``importlib.reload(module)`` re-runs the file.
    """
    full = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not os.path.isfile(full):
        raise FileNotFoundError("import_path: no such file: %s" % full)
    with open(full, encoding="utf-8") as fh:
        source = fh.read()
    name = name or os.path.splitext(os.path.basename(full))[0]
    if not name.isidentifier():
        raise ImportError("import_path: %r is not a module name; pass name=" % name)
    loaded = sys.modules.get(name)
    if loaded is not None:
        if getattr(loaded, "__file__", None) == full:
            return loaded
        raise ImportError(
            "import_path: a module named %r is already imported (from %s); pass name= to "
            "import %s under another name" % (name, getattr(loaded, "__file__", "built-in"), full)
        )
    needed = _missing(script_dependencies(source))
    if needed:
        result = install_result(needed, index_url)
        if not result["ok"]:
            raise ImportError(
                "import_path: installing %s for %s failed: %s%s"
                % (
                    ", ".join(needed),
                    full,
                    result["message"],
                    " (log: %s)" % result["log"] if result.get("log") else "",
                )
            )
    if _state["finder"] not in sys.meta_path:
        _state["finder"] = _ScriptFinder()
        sys.meta_path.append(_state["finder"])
    _state["scripts"][name] = full
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise ImportError("import_path: %s cannot be imported as a module" % full)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        _state["scripts"].pop(name, None)
        raise
    return module


def expose():
    """Make ``import_path`` a builtin of the kernel (no name appears in the user's namespace)."""
    import builtins

    builtins.__dict__["import_path"] = import_path
    return json.dumps(True)


if __name__ == "__main__":  # run by the daemon with an environment's interpreter: one install
    _request = json.loads(sys.argv[1])
    configure(_request.get("uv"), _request.get("log_dir"))
    print(json.dumps(install_result(_request["requirements"], _request.get("index_url"))))
