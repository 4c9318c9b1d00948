"""What an MCP session is beyond its pipes: its handshake and the server's state for it.

A stdio session may be served by ``ipykeep mcp-serve`` and by the daemon in turn
(``handoff.py``). The SDK keeps the handshake's outcome inside its server object, so a process
taking a session over replays the client's ``initialize`` (and ``notifications/initialized``)
to a fresh SDK server and drops the answer; ``SessionState`` carries that and the rest of what
``IpykeepMcp`` holds per session: the log level the client set, the cursor owner its reads
use, and which notices it has been shown.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ipykeep.mcp_server.stdio import Replay

if TYPE_CHECKING:
    from ipykeep.mcp_server.server import IpykeepMcp

_INITIALIZE_MARK = b'"initialize"'
_INITIALIZED_MARK = b'"notifications/initialized"'
INITIALIZED_LINE = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


class Handshake:
    """The client's ``initialize`` params, the handshake-era version the SDK negotiated, and
    whether the client has said it is initialized (read off the session's traffic)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] | None = None
        self.version: str | None = None
        self.initialized = False

    @property
    def ready(self) -> bool:
        """An initialized handshake-era session (2026-07-28 sessions have no handshake)."""
        return self.version is not None and self.initialized

    def saw_request(self, line: bytes) -> None:
        if _INITIALIZED_MARK in line:
            if _method(line) == "notifications/initialized":
                self.initialized = True
        elif _INITIALIZE_MARK in line:
            message = _parsed(line)
            if message.get("method") == "initialize" and isinstance(message.get("params"), dict):
                self.params = message["params"]

    def saw_response(self, text: str) -> None:
        """Learn the negotiated version from the SDK's answer to ``initialize``."""
        if self.version is not None or '"protocolVersion"' not in text:
            return
        result = _parsed(text).get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version in HANDSHAKE_PROTOCOL_VERSIONS:
            self.version = version


def _parsed(line: bytes | str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _method(line: bytes) -> Any:
    return _parsed(line).get("method")


@dataclass
class SessionState:
    """What a process taking a session over needs of the one that served it."""

    #: the directory the server was started for (relative notebook paths resolve there)
    project: str
    #: the client's ``initialize`` params, replayed to a fresh SDK server
    initialize: dict[str, Any] | None
    log_level: str = "info"
    #: the cursor owner of the session's reads (``read_cell`` goes on where it left off)
    reader: str = ""
    #: notices already shown, per kernel
    shown: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def capture(cls, app: IpykeepMcp, handshake: Handshake) -> SessionState:
        return cls(
            project=str(app.project),
            initialize=handshake.params,
            log_level=app.log_level,
            reader=app.default_reader,
            shown=app.notices.export(),
        )

    @classmethod
    def from_json(cls, data: Any) -> SessionState:
        if not isinstance(data, dict) or not isinstance(data.get("project"), str):
            raise ValueError("not a session state")
        init = data.get("initialize")
        return cls(
            project=data["project"],
            initialize=init if isinstance(init, dict) else None,
            log_level=str(data.get("log_level") or "info"),
            reader=str(data.get("reader") or ""),
            shown={str(k): [str(n) for n in v] for k, v in (data.get("shown") or {}).items()},
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def apply(self, app: IpykeepMcp) -> None:
        app.log_level = self.log_level
        if self.reader:
            app.default_reader = self.reader
        app.notices.restore(self.shown)

    def replay(self, unread: bytes) -> Replay:
        """The handshake for a fresh SDK server, then ``unread`` (input not yet handled)."""
        replay = Replay()
        if self.initialize is not None:
            rid = f"ipykeep-replay-{uuid.uuid4().hex}"
            request = {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "initialize",
                "params": self.initialize,
            }
            replay.lines += [(json.dumps(request) + "\n").encode(), INITIALIZED_LINE]
            replay.drop.add(rid)
        *complete, replay.partial = unread.split(b"\n")
        replay.lines += [line + b"\n" for line in complete]
        return replay
