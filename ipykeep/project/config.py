"""Configuration: defaults < user file < project file < ``IPYKEEP_*`` environment.

Project settings live in ``ipykeep.toml`` (top level) or in ``[tool.ipykeep]`` of
``pyproject.toml`` at the project root; the user file is ``$XDG_CONFIG_HOME/ipykeep/config.toml``
(``~/.config/ipykeep/config.toml``). An unknown key or a value of the wrong type is an error
naming the file (or variable), never silently ignored.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from ipykeep.api.errors import ConfigError
from ipykeep.project.layout import find_project_root

# A version check rather than try/except ImportError: mypy follows it and types each branch.
if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - Python 3.10
    import tomlkit as _toml


@dataclass(frozen=True)
class Config:
    #: Python interpreter that runs kernels (must have ipykernel, and ipyflow-core for dataflow).
    #: None: the project's environment, found in the order docs/environments.md gives.
    python: str | None = None
    #: Install ipykernel into a discovered environment that lacks it (instead of refusing with
    #: the command that adds it).
    install_kernel: bool = False
    #: "static": plain kernels, static analysis + runtime evidence; "ipyflow": adds ipyflow's
    #: tracer.
    #: static is the default: with runtime evidence (namespace diff and fingerprints after every
    #: cell) it is as sound as ipyflow on every suite, at no tracing cost (README, "Staleness").
    dataflow: Literal["ipyflow", "static"] = "static"
    #: Seconds without activity before a kernel is closed; 0 = never.
    idle_timeout: float = 3600.0
    #: Write outputs back into the notebook after each batch.
    write_outputs: bool = True
    #: Milliseconds within which outputs a reply did not wait for are written (one write for
    #: every batch in that window; see ``engine/writeback.py``). A crash loses at most that window.
    write_delay_ms: int = 200
    #: Bytes of output recorded per execution before the rest is dropped with a note.
    output_cap_bytes: int = 2_000_000
    #: Finished executions per kernel whose output the daemon keeps in memory, and their bytes;
    #: older ones are read back from the kernel's archive on disk.
    kept_outputs: int = 100
    kept_outputs_mb: int = 32
    #: Characters of text output returned in one response (head + tail are kept).
    max_output_chars: int = 2500
    #: Seconds an interrupted cell gets to stop before the kernel is killed and restarted.
    interrupt_grace: float = 3.0
    #: Seconds one inspection may take before a degraded summary is returned.
    inspect_timeout: float = 5.0
    #: Extra summarizers, as "module:callable", tried before the built-ins.
    summarizers: list[str] = field(default_factory=list)
    #: Executions waiting on one kernel before new work is refused (retryable).
    max_queue: int = 32
    #: Subshells used for scratch work while the main shell is busy.
    max_subshells: int = 4
    #: Images returned to agents: largest side in pixels and size in bytes.
    image_max_pixels: int = 1024
    image_max_bytes: int = 200_000
    #: ipyflow mode: trace cells during warm-up. False warms ~4x faster; warm-up runs then
    #: carry static analysis only (as in "static" mode) until a cell runs again.
    warm_tracing: bool = True
    #: Seconds a notebook cell may run during warm-up / run before it is interrupted; 0 = no limit.
    cell_timeout: float = 0.0
    #: Default notebook (used by ``ipykeep start`` without argument).
    notebook: str | None = None
    #: Jupyter front end for ``--serve``/``publish``: "lab" or "notebook".
    server_command: Literal["lab", "notebook"] = "lab"
    #: Port for the Jupyter server; 0 picks a free one.
    serve_port: int = 0
    #: True (the default; the serve extra brings jupyter-collaboration): the served notebook is
    #: the server's shared document; ipykeep's edits and outputs go into it, plans read it, and
    #: a file tool's write is merged into it cell by cell. False: the file is the document and
    #: the server runs without real-time collaboration; an agent's write to the file while a
    #: person has unsaved typing then brings up JupyterLab's "File Changed" dialog, where
    #: "Overwrite" drops the agent's change and "Revert" the person's.
    serve_collaboration: bool = True
    #: Where kernels run: "local", "gateway" (a Jupyter Server / Kernel or Enterprise Gateway
    #: at gateway_url) or "ssh" (ssh_url). A cwd of "ssh://user@host/path" always means ssh.
    kernel_provider: Literal["local", "gateway", "ssh"] = "local"
    #: http(s) URL of the Jupyter server for kernel_provider = "gateway" (no token in it).
    gateway_url: str | None = None
    #: Environment variable holding the gateway's token (jupyter_server's convention).
    gateway_token_env: str = "JUPYTER_GATEWAY_AUTH_TOKEN"
    #: Kernel spec to start on the gateway (default: the server's default spec).
    gateway_kernel_name: str | None = None
    #: Directory a remote kernel works in (gateway default: the notebook's directory).
    kernel_cwd: str | None = None
    #: "ssh://[user@]host[:port]/path" for kernel_provider = "ssh".
    ssh_url: str | None = None
    #: Python on the SSH host that runs kernels (needs ipykernel; ipyflow-core for "ipyflow").
    remote_python: str = "python3"
    #: An ssh config file used instead of ~/.ssh/config (``ssh -F``); None: the user's own.
    ssh_config: str | None = None
    #: Checkpoint each notebook cell's values in the background so a lost kernel comes back
    #: without re-running fresh cells (README, "Checkpoints").
    checkpoints: bool = True
    checkpoint_max_value_mb: float = 512.0
    checkpoint_max_cell_mb: float = 1024.0
    checkpoint_max_project_mb: float = 4096.0
    checkpoint_max_age_days: float = 14.0
    #: Seconds the kernel may spend pickling one cell's values; the rest is not checkpointed.
    checkpoint_snapshot_budget_s: float = 10.0
    #: Where values are pickled: "fork", a forked child of the kernel (a crash or a hang while
    #: pickling cannot reach the kernel; the fork costs ~0.3-0.5 s per GB the kernel holds), or
    #: "kernel", the kernel itself (what platforms without os.fork always do).
    checkpoint_pickle_in: Literal["fork", "kernel"] = "fork"
    #: How ``ipykeep fork`` copies a kernel: "process", by forking the kernel's process
    #: (copy-on-write: ready in about a second whatever the kernel holds; local kernels on
    #: Linux, else the checkpoint way, with the reason), or "checkpoint", every variable saved
    #: as a named checkpoint and loaded into a new kernel.
    fork_method: Literal["process", "checkpoint"] = "process"
    #: A cell's values are checkpointed only when re-running it (with the cheap cells it reads
    #: from, which are not checkpointed either) takes at least this many seconds; cheaper cells
    #: re-run on restore instead (storing them would cost more than recomputing them).
    checkpoint_min_cell_s: float = 1.0
    #: Variable names, and types as "module.QualName", never checkpointed (their cells re-run).
    checkpoint_exclude_names: list[str] = field(default_factory=list)
    checkpoint_exclude_types: list[str] = field(default_factory=list)
    #: Seconds a restore may take before the values not loaded yet are re-run instead.
    restore_timeout: float = 120.0
    #: Seconds a kernel on an SSH host keeps running with no ipykeep attached (the link dropped
    #: and never came back); then its supervisor on the host stops it.
    ssh_orphan_timeout_s: float = 600.0
    #: Seconds a remote kernel's dropped connection (SSH or gateway) is re-established with
    #: backoff, its running executions kept running, before the kernel counts as lost.
    remote_reconnect_s: float = 120.0
    #: Seconds between two stat polls of a remote kernel's data files (through the kernel,
    #: skipped while its main shell is busy and no subshell is free); 0 turns polling off.
    remote_watch_interval_s: float = 5.0
    #: Local kernels kept started and ready before they are asked for, one per (interpreter,
    #: dataflow mode) among the most recently served; 0 turns pre-starting off.
    prestart_kernels: int = 1
    #: Keep what kernels run in IPython's history database (``history.sqlite`` of the IPython
    #: profile) too. Off, each kernel keeps its input in memory (``In``, ``%history`` for the
    #: kernel's life) and ipykeep's record is the durable history: the database commits every
    #: execution, about a millisecond of each call. Local and SSH kernels (a gateway's kernels
    #: are started as the gateway's spec says).
    ipython_history: bool = False

    def with_overrides(self, **overrides: Any) -> Config:
        clean = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(self, **clean) if clean else self


_HINTS = get_type_hints(Config)
_FIELDS = {f.name for f in fields(Config)}


def _coerce(name: str, value: Any, source: str, *, from_env: bool = False) -> Any:
    hint = _HINTS[name]
    origin = get_origin(hint)
    args = get_args(hint)
    where = f"{source}: setting {name!r}"
    if origin is Literal:
        if value not in args:
            raise ConfigError(
                f"{where} must be one of {', '.join(map(repr, args))}, not {value!r}",
                hint=f"fix {name} in {source}",
            )
        return value
    if hint is bool:
        if from_env and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
    elif hint is int:
        try:
            if isinstance(value, bool):
                raise ValueError
            return int(value) if from_env or isinstance(value, int) else _fail()
        except (TypeError, ValueError):
            pass
    elif hint is float:
        try:
            if isinstance(value, bool):
                raise ValueError
            if from_env or isinstance(value, (int, float)):
                return float(value)
        except (TypeError, ValueError):
            pass
    elif origin is list:
        if from_env and isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    elif hint in (str, str | None) or (str in args):
        if isinstance(value, str):
            # An optional setting written as "" (as ``ipykeep init``'s template shows it) is unset.
            return None if value == "" and type(None) in args else value
    raise ConfigError(
        f"{where} has a value of the wrong type: {value!r} (expected {_describe(hint)})",
        hint=f"fix {name} in {source}",
    )


def _fail() -> Any:
    raise ValueError


def _describe(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = _toml.load(fh)
    except Exception as exc:  # tomllib.TOMLDecodeError carries the line
        raise ConfigError(
            f"{path}: not valid TOML ({exc})", hint=f"fix the syntax of {path}"
        ) from exc
    return dict(data)


def _apply(values: dict[str, Any], table: dict[str, Any], source: str) -> None:
    for key, raw in table.items():
        name = key.replace("-", "_")
        if name not in _FIELDS:
            close = [f for f in _FIELDS if f.startswith(name[:3])]
            raise ConfigError(
                f"{source}: unknown setting {key!r}",
                hint=f"known settings: {', '.join(sorted(_FIELDS))}"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
            )
        values[name] = _coerce(name, raw, source)


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "ipykeep" / "config.toml"


def project_config_sources(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    sources: list[tuple[Path, dict[str, Any]]] = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("ipykeep")
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError(f"{pyproject}: [tool.ipykeep] must be a table")
            sources.append((pyproject, dict(table)))
    ipykeep_toml = root / "ipykeep.toml"
    if ipykeep_toml.is_file():
        sources.append((ipykeep_toml, _read_toml(ipykeep_toml)))
    return sources


def load_config(root: Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Load the effective configuration for the project at ``root``."""
    root = root or find_project_root()
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    user = user_config_path()
    if user.is_file():
        _apply(values, _read_toml(user), str(user))
    for path, table in project_config_sources(root):
        _apply(values, table, str(path))
    for key, raw in env.items():
        if not key.startswith("IPYKEEP_"):
            continue
        name = key[len("IPYKEEP_") :].lower()
        if name not in _FIELDS:
            continue  # IPYKEEP_MCP_TOKEN and friends belong to other parts
        values[name] = _coerce(name, raw, f"environment variable {key}", from_env=True)
    if values.get("python") == "":
        values.pop("python")
    return Config(**values)


def resolve_python(python: str, root: Path) -> str:
    """A relative ``python`` is taken from the project root; a bare name is looked up on PATH."""
    import shutil

    if os.sep in python:
        path = Path(python).expanduser()
        return str(path if path.is_absolute() else (root / path))
    return shutil.which(python) or python
