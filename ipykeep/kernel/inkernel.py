"""The in-kernel module registry: every helper ipykeep sends into kernels, and how it gets there.

A helper is standard-library-only source (a file under some ``ipykeep/*/_inkernel/``) that the
engine sends into the user's kernel and keeps as ``sys.modules[name]``, so later calls are
short expressions on it. The kernel may run in another environment than ipykeep, so a helper
is always sent as source text, never imported there. Each helper is declared here once, as an
``InKernelModule``: the name it is installed under, its file, its protocol version (which must
equal the file's ``PROTOCOL_VERSION``; ``tests/kernel/test_inkernel_registry.py`` checks that,
and that each file is declared and imports only the standard library). Host-side code names a
helper by its declaration (``inkernel.FILETRACK``), never by a string of its own.

Installing is a single *expression* (``install_expression``): it can ride on a
``user_expressions`` request (no execution count, no history, no name bound in the user's
globals) or be executed as a statement. For each helper it installs when the module is missing
or was built from other source (a daemon of another version adopting the kernel), and does
nothing otherwise, so sending it again is cheap and never resets a helper's state. A helper's
``adopt`` names a function of the new module called with the previous copy (or None), for
helpers that carry state across an upgrade.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

#: Attribute recording which source a helper module was built from.
DIGEST_ATTR = "__ipykeep_digest__"
#: Attribute every helper defines: the version of the calls it answers and the JSON it returns.
PROTOCOL_ATTR = "PROTOCOL_VERSION"
#: The ``ipykeep`` package directory: helper files are named relative to it.
PACKAGE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class InKernelModule:
    """One helper: what it is called in the kernel, where its source is, which protocol."""

    #: the key in the kernel's ``sys.modules`` (other helpers find it there under this name)
    name: str
    #: its source file, relative to the ``ipykeep`` package, e.g. ``staleness/_inkernel/x.py``
    path: str
    #: equals the file's ``PROTOCOL_VERSION``
    protocol: int
    #: helpers this one reads from ``sys.modules`` while it is executed: installed before it
    requires: tuple[InKernelModule, ...] = ()
    #: function of the new copy called with the previous one when the source changed
    adopt: str | None = None

    @property
    def source(self) -> str:
        return _read(self.path)

    @property
    def digest(self) -> str:
        return source_digest(self.source)

    def call(self, function: str, *args: Any) -> str:
        """An expression calling ``function(*args)`` of this helper as installed in the kernel."""
        rendered = ", ".join(repr(a) for a in args)
        return f'__import__("sys").modules[{self.name!r}].{function}({rendered})'


@cache
def _read(path: str) -> str:
    return (PACKAGE_DIR / path).read_text(encoding="utf-8")


# One declaration per file under ``ipykeep/*/_inkernel/`` (``__init__.py`` aside).

#: signal handling, activity marks, traceback warm-up, probe bundles, untraced runs
KERNEL_SETUP = InKernelModule("_ipykeep_kernel", "kernel/_inkernel/kernel_setup.py", 1)
#: files a cell read and wrote (an audit hook filtered to the project tree)
FILETRACK = InKernelModule("_ipykeep_filetrack", "staleness/_inkernel/filetrack.py", 1)
#: which big values the code run since the last look could reach (read by ``STATEMON``)
REACH = InKernelModule("_ipykeep_reach", "staleness/_inkernel/reach.py", 1)
#: numpy and pandas content hashes, mixed into ``STATEMON``'s fingerprinter
DATAHASH = InKernelModule("_ipykeep_datahash", "staleness/_inkernel/datahash.py", 1)
#: process-wide settings (print options, rcParams, cwd…) as digests, and their readers
SETTINGS = InKernelModule("_ipykeep_settings", "staleness/_inkernel/settings.py", 1)
#: matplotlib figures fingerprinted by what they show (not their caches)
PLOTFP = InKernelModule("_ipykeep_plotfp", "staleness/_inkernel/plotfp.py", 1)
#: names an execution bound, rebound, deleted or changed in place
STATEMON = InKernelModule(
    "_ipykeep_statemon",
    "staleness/_inkernel/statemon.py",
    1,
    requires=(REACH, DATAHASH, SETTINGS, PLOTFP),
)
#: ipyflow's dataflow record (ipyflow kernels only)
IPYFLOW = InKernelModule("_ipykeep_ipyflow", "staleness/_inkernel/ipyflow_probe.py", 1)
#: typed summaries and the namespace listing; keeps summarizers registered in an older copy
INSPECT = InKernelModule("_ipykeep_inspect", "inspection/_inkernel/summarize.py", 1, adopt="_adopt")
#: the checkpoint blob format and its authentication
CHECKPOINT_BLOB = InKernelModule("_ipykeep_ckpt_blob", "checkpoints/_inkernel/blobfmt.py", 1)
#: the kernel's side of the forked child that pickles a checkpoint
CHECKPOINT_FORK = InKernelModule("_ipykeep_ckpt_fork", "checkpoints/_inkernel/forked.py", 1)
#: the kernel's side of a fork made by forking its process (a new kernel around its shell)
FORK_PROCESS = InKernelModule("_ipykeep_forkkernel", "checkpoints/_inkernel/forkkernel.py", 1)
#: the checkpoint writer
CHECKPOINT = InKernelModule(
    "_ipykeep_ckpt",
    "checkpoints/_inkernel/snapshot.py",
    2,
    requires=(CHECKPOINT_BLOB, CHECKPOINT_FORK),
)
#: the checkpoint loader (authenticate, unpickle); reads the writer's configuration
CHECKPOINT_LOAD = InKernelModule(
    "_ipykeep_ckpt_load",
    "checkpoints/_inkernel/loading.py",
    2,
    requires=(CHECKPOINT_BLOB, CHECKPOINT),
)
#: what a cell read that a memo key cannot cover (network, processes, files outside the project)
MEMOGUARD = InKernelModule("_ipykeep_memoguard", "checkpoints/_inkernel/memoguard.py", 1)
#: installs packages into the kernel's environment; ``import_path`` for local scripts
ENVTOOLS = InKernelModule("_ipykeep_env", "environments/_inkernel/envtools.py", 1)

#: the debugger (bdb on the main thread, driven from subshells) and the last failure's frames;
#: it summarises values with ``INSPECT``
DEBUG = InKernelModule("_ipykeep_debug", "debugger/_inkernel/debug.py", 2, requires=(INSPECT,))

#: every helper, in an order that installs each after the helpers it requires
MODULES: tuple[InKernelModule, ...] = (
    KERNEL_SETUP,
    FILETRACK,
    REACH,
    DATAHASH,
    SETTINGS,
    PLOTFP,
    STATEMON,
    IPYFLOW,
    INSPECT,
    CHECKPOINT_BLOB,
    CHECKPOINT_FORK,
    FORK_PROCESS,
    CHECKPOINT,
    CHECKPOINT_LOAD,
    MEMOGUARD,
    ENVTOOLS,
    DEBUG,
)


def install_order(modules: Iterable[InKernelModule]) -> tuple[InKernelModule, ...]:
    """``modules`` with the helpers they require, each once, each after its requirements."""
    ordered: list[InKernelModule] = []

    def visit(module: InKernelModule) -> None:
        if module in ordered:
            return
        for required in module.requires:
            visit(required)
        ordered.append(module)

    for module in modules:
        visit(module)
    return tuple(ordered)


def install_expression(*modules: InKernelModule) -> str:
    """An expression installing ``modules`` (and what they require), in order, where needed.

    It evaluates to JSON text: each installed helper's name and its ``PROTOCOL_VERSION``.
    """
    entries = ", ".join(
        f"{m.name!r}: "
        + source_install_expression(m.name, m.source, adopt=m.adopt, result=PROTOCOL_ATTR)
        for m in install_order(modules)
    )
    return f"(lambda json: json.dumps({{{entries}}}))(__import__('json'))"


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def source_install_expression(
    module_name: str, source: str, *, adopt: str | None = None, result: str | None = None
) -> str:
    """An expression installing ``source`` as ``sys.modules[module_name]`` unless already there.

    It evaluates to the module's attribute ``result`` (e.g. its protocol version), or True.
    The building block of ``install_expression``, which callers use for declared helpers.
    """
    digest = source_digest(source)
    filename = f"<ipykeep:{module_name}>"
    value = f"getattr(m, {result!r})" if result else "True"
    current = f"getattr(old, {result!r})" if result else "True"
    adopt_call = f"getattr(m, {adopt!r})(old), " if adopt else ""
    build = (
        "(lambda m: ("
        f"m.__dict__.update(__file__={filename!r}), "
        f"exec(compile({source!r}, {filename!r}, 'exec'), m.__dict__), "
        f"{adopt_call}"
        f"setattr(m, {DIGEST_ATTR!r}, {digest!r}), "
        f"sys.modules.__setitem__({module_name!r}, m), "
        f"{value})[-1])"
        f"(types.ModuleType({module_name!r}))"
    )
    return (
        "(lambda sys, types: (lambda old: "
        f"{current} if getattr(old, {DIGEST_ATTR!r}, None) == {digest!r} else {build})"
        f"(sys.modules.get({module_name!r})))"
        "(__import__('sys'), __import__('types'))"
    )
