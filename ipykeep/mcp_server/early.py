"""Answering the MCP handshake while the SDK loads.

Importing the ``mcp`` SDK takes over a second (its protocol types are large pydantic models),
and hosts time the handshake from the moment they spawn the server: Claude Code sends its first
model request before a slow server is ready and Codex exposes the tools only from its second
request. The answers to ``initialize`` and ``tools/list`` depend only on this installation
(ipykeep's catalog, the SDK's version) and on the protocol version the client asks for, so the
server remembers the SDK's own answers in a small cache and, on the next start, gives them from
a reader thread while the SDK is still importing. ``ipykeep init`` fills the cache for every
protocol version the SDK speaks (``prefill.py``), so even a host's first start is answered
early.

The SDK still receives every message, in order, and answers each request itself; an answer to a
request that was already answered is compared with what was sent and dropped. A difference
corrects the cache (and is logged), so a stale entry can be wrong for one start at most; the
cache key also covers ipykeep's MCP modules and the SDK's files, so an upgrade starts afresh.
A request the cache does not know waits for the SDK, as it always did, and its answer is
remembered for the next start. ``IPYKEEP_MCP_EARLY_HANDSHAKE=0`` turns the early path off.

Standard library and the platform seam only: this module is imported before the SDK.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import select
import stat
import sys
import threading
from pathlib import Path
from typing import Any

from ipykeep.platform.files import write_all

log = logging.getLogger("ipykeep.mcp.early")

#: Requests whose answers depend only on the installation and the request itself.
CACHEABLE = ("initialize", "tools/list")
_MARKERS = tuple(f'"{m}"'.encode() for m in CACHEABLE)


def switched_on(variable: str) -> bool:
    """An environment switch that is on unless set to 0, false, no or off."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "false", "no", "off")


def enabled() -> bool:
    return switched_on("IPYKEEP_MCP_EARLY_HANDSHAKE")


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def install_key() -> str:
    """What the cached answers depend on: this Python, ipykeep's MCP modules, the API
    declarations the tools are derived from, and the SDK's files."""
    import importlib.util

    from ipykeep import __version__

    parts = [__version__, sys.version]
    here = Path(__file__).parent
    files = sorted([*here.glob("*.py"), *(here.parent / "api").glob("*.py")])
    for name in ("mcp", "mcp_types"):
        spec = importlib.util.find_spec(name)  # finds the package without importing it
        if spec is not None and spec.origin:
            files.append(Path(spec.origin))
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ipykeep"


class HandshakeCache:
    """``{request key: result}`` for one installation, in a 0600 file under the user's cache."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Any] = {}
        self._lock = threading.Lock()
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                self.entries = data
        except (OSError, ValueError):
            pass

    @classmethod
    def for_install(cls) -> HandshakeCache:
        return cls(cache_dir() / f"mcp-handshake-{install_key()}.json")

    def get(self, key: str) -> Any:
        with self._lock:
            return self.entries.get(key)

    def put(self, key: str, result: Any) -> None:
        with self._lock:
            if self.entries.get(key) == result:
                return  # known: the file is left as it is
            self.entries[key] = result
            data = json.dumps(self.entries, sort_keys=True)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            from ipykeep.project.atomic import atomic_write_text

            atomic_write_text(self.path, data, mode=0o600)
        except OSError as exc:  # a read-only home only costs the early answer
            log.debug("handshake cache not written: %s", exc)


def _well_formed_initialize(params: Any) -> bool:
    """The fields ``initialize`` requires, of the right types (the SDK checks the rest)."""
    if not isinstance(params, dict):
        return False
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


def _strip(params: Any, *keys: str) -> Any:
    if not isinstance(params, dict):
        return params
    return {k: v for k, v in params.items() if k not in keys}


class EarlyAnswers:
    """Which requests to answer early, and which of the SDK's answers to drop, learn or check.

    Called from the reader thread (before hand-over) and from the event loop (after it); the
    shared state is guarded by one lock.
    """

    def __init__(self, cache: HandshakeCache) -> None:
        self.cache = cache
        self.answering = True  # only until the SDK takes over stdin
        self.version: str | None = None  # negotiated protocol version, once known
        self._pending: dict[
            str, tuple[str, Any]
        ] = {}  # json(id) -> (key, result sent early or None)
        self._lock = threading.Lock()
        self.answered: list[str] = []

    def _key(self, method: str, params: Any) -> str | None:
        if method == "initialize":
            # The SDK's answer depends on the protocol version asked for alone (not on the
            # host's name, build or capabilities), so answers learnt from one client, or by
            # ``ipykeep init`` (``prefill.py``), serve every host. Only a well-formed request
            # is answered early: a malformed one gets the SDK's own error.
            if not _well_formed_initialize(params):
                return None
            body = {"protocolVersion": params["protocolVersion"]}
        elif method == "tools/list":
            if self.version is None:
                return None
            body = {"version": self.version, "params": _strip(params, "_meta")}
        else:
            return None
        return method + " " + json.dumps(body, sort_keys=True, separators=(",", ":"))

    def on_request(self, line: bytes) -> bytes | None:
        """Note a request line; returns the early answer to write, if there is one."""
        if not any(m in line for m in _MARKERS):
            return None
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if not isinstance(msg, dict) or "id" not in msg or msg.get("method") not in CACHEABLE:
            return None
        with self._lock:
            key = self._key(msg["method"], msg.get("params"))
            if key is None:
                return None
            result = self.cache.get(key) if self.answering else None
            self._pending[json.dumps(msg["id"])] = (key, result)
            if result is None:
                return None
            if msg["method"] == "initialize":
                self.version = result.get("protocolVersion")
            self.answered.append(msg["method"])
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        return (json.dumps(answer, separators=(",", ":")) + "\n").encode()

    def on_response(self, text: str) -> bool:
        """Whether the SDK's message ``text`` goes to the client (False: already answered)."""
        with self._lock:
            if not self._pending:
                return True
        try:
            msg = json.loads(text)
        except ValueError:
            return True
        if (
            not isinstance(msg, dict)
            or "id" not in msg
            or ("result" not in msg and "error" not in msg)
        ):
            return True
        with self._lock:
            entry = self._pending.pop(json.dumps(msg["id"]), None)
        if entry is None:
            return True
        key, sent = entry
        result = msg.get("result")
        if key.startswith("initialize ") and isinstance(result, dict):
            with self._lock:
                self.version = result.get("protocolVersion")
        if sent is None:
            if result is not None:
                self.cache.put(key, result)
            return True
        if result != sent:
            log.warning(
                "the MCP handshake answered from the cache differed from the SDK's;"
                " corrected for the next start"
            )
            if result is not None:
                self.cache.put(key, result)
        return False


class StdinPrefetch:
    """Reads stdin in a thread until the SDK is ready, answering what the cache knows."""

    def __init__(self, answers: EarlyAnswers) -> None:
        self.answers = answers
        self._stop = threading.Event()
        self._lines: list[bytes] = []
        self._partial = b""
        self._thread = threading.Thread(target=self._run, name="ipykeep-mcp-early", daemon=True)

    def start(self) -> StdinPrefetch:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([0], [], [], 0.02)
                if not ready:
                    continue
                chunk = os.read(0, 65536)
                if not chunk:
                    return
                *complete, self._partial = (self._partial + chunk).split(b"\n")
                for raw in complete:
                    line = raw + b"\n"
                    self._lines.append(line)
                    answer = self.answers.on_request(line)
                    if answer is not None:
                        write_all(1, answer)
        except OSError as exc:
            log.debug("early stdin reader stopped: %s", exc)

    def handover(self) -> tuple[list[bytes], bytes]:
        """Stop reading; returns the lines read so far and any incomplete last line."""
        self._stop.set()
        self._thread.join()
        self.answers.answering = False
        return self._lines, self._partial


def start() -> StdinPrefetch | None:
    """Begin answering the handshake early, when stdio are pipes and the path is enabled."""
    if not enabled() or not (_is_pipe(0) and _is_pipe(1)):
        return None
    return StdinPrefetch(EarlyAnswers(HandshakeCache.for_install())).start()
