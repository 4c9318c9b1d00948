"""Fingerprints of the process-wide settings cells share without naming them, and their readers.

Installed in the kernel (standard library only) before ``statemon``, which reports each setting
as a pseudo-name (``<numpy.printoptions>``): a cell whose run changed a setting's digest wrote
it; a cell whose code used what the setting governs read it (``readers``), so editing
``np.set_printoptions(precision=2)`` re-runs the later cell that formats an array. A library's
settings exist only once the notebook imported it: nothing here imports numpy, pandas,
matplotlib or torch.

Each digest is equal in every process for equal settings (blake2b of a repr, never ``hash()``
of a string, which is salted per process), as checkpoints compare the digests a lost kernel
recorded with the ones a new kernel reaches.
"""

import hashlib
import operator
import os
import sys
import types

PROTOCOL_VERSION = 1

#: pseudo-name -> what reads it: "format" (code that formats a value of the library), "use"
#: (code that uses a value of the library), "any" (code that uses any library), or the words
#: (names, attributes) a reader mentions
NUMPY_PRINT = "<numpy.printoptions>"
NUMPY_ERR = "<numpy.errstate>"
PANDAS_DISPLAY = "<pandas.display>"
PANDAS_OPTIONS = "<pandas.options>"
MPL_RC = "<matplotlib.rcParams>"
WARNINGS = "<warnings.filters>"
CWD = "<os.cwd>"
ENVIRON = "<os.environ>"
SYS_PATH = "<sys.path>"
LOCALE = "<locale>"
TORCH_RNG = "<torch.random>"
NAMES = (
    NUMPY_PRINT,
    NUMPY_ERR,
    PANDAS_DISPLAY,
    PANDAS_OPTIONS,
    MPL_RC,
    WARNINGS,
    CWD,
    ENVIRON,
    SYS_PATH,
    LOCALE,
    TORCH_RNG,
)
#: libraries whose values draw with matplotlib's settings
_PLOTTING = frozenset({"matplotlib", "seaborn", "mpl_toolkits"})
_PLOT_METHODS = frozenset({"plot", "hist", "boxplot", "scatter", "imshow", "bar", "barh"})
#: words that name file or directory access (relative paths resolve against the cwd)
_FILE_WORDS = frozenset(
    {"open", "os", "pathlib", "Path", "glob", "shutil", "listdir", "scandir", "savefig", "imread"}
)
_FILE_PREFIXES = ("read_", "to_", "load", "save")
_ENV_WORDS = frozenset({"os", "environ", "getenv", "putenv"})
_LOCALE_WORDS = frozenset(
    {"locale", "setlocale", "strftime", "strptime", "strcoll", "strxfrm", "currency"}
)
_NOT_LIBRARIES = frozenset({"builtins", "__main__", "types", None})
#: the words code that changes a setting names (``np.set_printoptions``, ``os.chdir``)
_SETTERS = {
    NUMPY_PRINT: {"set_printoptions", "printoptions", "set_string_function"},
    NUMPY_ERR: {"seterr", "errstate", "seterrcall"},
    PANDAS_DISPLAY: {"set_option", "option_context", "reset_option", "options"},
    PANDAS_OPTIONS: {"set_option", "option_context", "reset_option", "options"},
    MPL_RC: {"rcParams", "rc", "rcdefaults", "rc_context", "style", "set_theme", "set", "use"},
    WARNINGS: {"filterwarnings", "simplefilter", "resetwarnings", "catch_warnings", "filters"},
    CWD: {"chdir", "fchdir"},
    ENVIRON: {"environ", "putenv", "unsetenv"},
    SYS_PATH: {"path"},
    LOCALE: {"setlocale", "resetlocale"},
    TORCH_RNG: {"manual_seed", "seed", "set_rng_state"},
}

_state = sys.__dict__.setdefault("_ipykeep_settings_state", {})


def _digest(text):
    return hashlib.blake2b(text.encode("utf-8", "backslashreplace"), digest_size=16).hexdigest()


def _same(values, key):
    """The digest remembered for ``key`` when ``values`` are the very objects seen last time.

    Settings change by storing new objects (a validated rcParams value, a new print-options
    dict, a filter tuple inserted, an environment string), so comparing identities (of objects
    kept alive here, so no id is reused) spares re-digesting on every look: ~5 µs instead of
    ~0.1–0.8 ms per setting."""
    cached = _state.get(key)
    if cached is None or len(cached[0]) != len(values):
        return None
    return cached[1] if all(map(operator.is_, cached[0], values)) else None


def _remember(values, key, digest):
    _state[key] = (values, digest)
    return digest


def _by_identity(key, values, text):
    """Digest of ``text()`` for settings held in ``values``, re-computed only on a change."""
    values = tuple(values)
    found = _same(values, key)
    return found if found is not None else _remember(values, key, _digest(text()))


def _pandas_leaves(pd, display):
    """(path, dict, key) of the display options pandas keeps, or of the others; found once per
    option tree layout."""
    config = pd._config.config
    root = config._global_config
    layout = _state.get("pd_layout")
    if layout is None or layout[0] is not root or layout[1] != len(config._registered_options):
        leaves = []
        stack = [("", root)]
        while stack:
            prefix, node = stack.pop()
            for key, value in node.items():
                if isinstance(value, dict):
                    stack.append((prefix + key + ".", value))
                else:
                    leaves.append((prefix + key, node, key))
        leaves.sort(key=lambda leaf: leaf[0])
        split = {
            flag: [leaf for leaf in leaves if leaf[0].startswith("display.") == flag]
            for flag in (True, False)
        }
        layout = _state["pd_layout"] = (root, len(config._registered_options), split)
    return layout[2][display]


def _pandas_options(pd, display):
    leaves = _pandas_leaves(pd, display)
    values = [node[key] for _, node, key in leaves]
    key = "pd_display" if display else "pd_options"
    return _by_identity(
        key, values, lambda: repr([(path, repr(v)) for (path, _, _), v in zip(leaves, values)])
    )


def _rc_params(mpl):
    """rcParams (~300 entries, ~2 ms to repr), re-digested when a value is a new object."""
    rc = getattr(mpl, "rcParams", None)
    if rc is None:
        return None
    return _by_identity(
        "rc", dict.values(rc), lambda: repr(sorted((k, repr(v)) for k, v in dict.items(rc)))
    )


def _numpy_print(np):
    options = None
    try:  # numpy 2: one dict per setting, replaced by ``set_printoptions``
        options = np._core.printoptions.format_options.get()
    except Exception:
        pass
    if not isinstance(options, dict):
        options = np.get_printoptions()
    return _by_identity(
        "np_print", (options,) + tuple(options.values()), lambda: repr(sorted(options.items()))
    )


def _numpy_errors(np):
    errors = np.geterr()  # a new dict each time, of interned strings
    return _by_identity("np_err", errors.values(), lambda: repr(sorted(errors.items())))


def _environ():
    data = getattr(os.environ, "_data", None)  # the encoded strings, as the process holds them
    if not isinstance(data, dict):
        return _digest(repr(sorted(os.environ.items())))
    return _by_identity(
        "env", tuple(data) + tuple(data.values()), lambda: repr(sorted(data.items()))
    )


def _torch_rng(torch):
    state = torch.random.get_rng_state()
    return hashlib.blake2b(bytes(state.tolist()), digest_size=16).hexdigest()


def snapshot():
    """pseudo-name -> digest of every setting that exists in this process now."""
    out = {}
    mods = sys.modules
    np, pd, mpl = mods.get("numpy"), mods.get("pandas"), mods.get("matplotlib")
    probes = [
        (CWD, lambda: _digest(os.getcwd())),
        (ENVIRON, _environ),
        (SYS_PATH, lambda: _by_identity("path", sys.path, lambda: repr(sys.path))),
    ]
    if "warnings" in mods:
        filters = mods["warnings"].filters
        probes.append((WARNINGS, lambda: _by_identity("warn", filters, lambda: repr(filters))))
    if "locale" in mods:
        probes.append((LOCALE, lambda: _digest(repr(mods["locale"].setlocale(6)))))  # LC_ALL
    if np is not None:
        probes.append((NUMPY_PRINT, lambda: _numpy_print(np)))
        probes.append((NUMPY_ERR, lambda: _numpy_errors(np)))
    if pd is not None:
        probes.append((PANDAS_DISPLAY, lambda: _pandas_options(pd, True)))
        probes.append((PANDAS_OPTIONS, lambda: _pandas_options(pd, False)))
    if mpl is not None:
        probes.append((MPL_RC, lambda: _rc_params(mpl)))
    if "torch" in mods:
        probes.append((TORCH_RNG, lambda: _torch_rng(mods["torch"])))
    for name, probe in probes:
        try:
            digest = probe()
        except Exception:  # a half-imported library, a patched module: no evidence for it
            continue
        if digest is not None:
            out[name] = digest
    return out


def _library(obj):
    if isinstance(obj, types.ModuleType):
        return obj.__name__.split(".")[0]
    module = getattr(type(obj), "__module__", None)
    return module.split(".")[0] if isinstance(module, str) else None


def readers(uses, ns, present):
    """The settings in ``present`` that code with ``uses`` (``reach.mentions()``) read."""
    names = uses["names"]
    attrs = uses["attrs"]
    libraries = set()
    for name in names:
        if name in ns:
            try:
                libraries.add(_library(ns[name]))
            except Exception:
                continue
    formats = uses["formats"]
    words = names | attrs
    plots = bool(libraries & _PLOTTING) or ("pandas" in libraries and bool(attrs & _PLOT_METHODS))
    files = bool(words & _FILE_WORDS) or any(w.startswith(_FILE_PREFIXES) for w in attrs)
    read = {
        NUMPY_PRINT: formats and "numpy" in libraries,
        NUMPY_ERR: "numpy" in libraries,
        PANDAS_DISPLAY: formats and "pandas" in libraries,
        PANDAS_OPTIONS: "pandas" in libraries,
        MPL_RC: plots,
        WARNINGS: bool(libraries - _NOT_LIBRARIES),
        CWD: files,
        ENVIRON: uses["imports"] or bool(words & _ENV_WORDS),
        SYS_PATH: uses["imports"],
        LOCALE: bool(words & _LOCALE_WORDS),
        TORCH_RNG: "torch" in libraries,
    }
    return sorted(name for name, yes in read.items() if yes and name in present)


def by_import(name, uses):
    """Whether the change of setting ``name`` came with an import of code that names none of
    its setters (a library adding warning filters or environment variables as it loads): a
    fresh run's import does the same at the same place, so it is not the cell's write."""
    if name not in _SETTERS or not uses["imports"]:
        return False
    return not (_SETTERS[name] & (uses["names"] | uses["attrs"]))
