"""A stand-in model endpoint on loopback: plays a fixed plan of tool calls and logs what hosts send.

It speaks the four wire formats the hosts use — Anthropic Messages (Claude Code), OpenAI
Responses (Codex), OpenAI Chat Completions (opencode's OpenAI-compatible provider) and Gemini
``generateContent`` / ``streamGenerateContent`` (Gemini CLI) — streaming as server-sent events
where the request asks for it. Each format is parsed into one neutral view of the conversation
(the tools offered, the tool calls made and what came back for each), the ``Plan`` decides the
next call from that view, and the answer is rendered back in the request's format. Every request
body is kept, so a test asserts exactly what the host gave its model.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: Put in the prompt: a request carrying it is the plan's conversation (hosts also ask their
#: model side questions — titles, quota probes, next-speaker checks — which get a short answer).
MARKER = "IPYKEEP-HOST-PLAN"
#: More calls than the plan has steps, searches and retries together: the host is looping.
MAX_CALLS = 120
#: The pause before repeating a search that found nothing (a model's turn takes about that).
SEARCH_RETRY_S = 0.5


@dataclass
class Received:
    """What the host sent back for one tool call: its text parts and how many images."""

    tool: str
    text: str
    images: int = 0
    #: Size of the result as it sits in the request body (JSON of the host's own wrapping).
    wire_bytes: int = 0


@dataclass
class Conversation:
    """The neutral view of one request: tools offered, calls made, results received."""

    tools: dict[str, int]  # name -> bytes of its definition in the request
    calls: list[tuple[str, str, dict[str, Any]]]  # (call id, tool name, arguments)
    results: dict[str, Received]  # call id -> what came back
    #: Images that arrived outside a tool result (opencode sends them as a following message).
    loose_images: int = 0
    is_plan: bool = False
    #: Tools a host groups under a namespace (Codex: ``mcp__ipykeep``): full name -> (ns, name).
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class Step:
    """One planned call: the ipykeep tool and its arguments given the results so far."""

    tool: str
    args: Callable[[list[Received]], dict[str, Any]]


@dataclass
class Decision:
    text: str | None = None
    call: tuple[str, dict[str, Any]] | None = None


def kernel_id(seen: list[Received]) -> str:
    found = re.search(r"\bk\d+\b", seen[0].text)
    return found.group(0) if found else "k1"


class Plan:
    """The fixed script: each step runs once its predecessors have results."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.lock = threading.Lock()
        #: The results as the model received them, in plan order (the last request's view).
        self.received: list[Received] = []
        self.finished = False

    def decide(self, conv: Conversation) -> Decision:
        done: list[Received] = []
        searched: set[str] = set()
        for call_id, name, args in conv.calls:
            if ipykeep_tool(name) is None:
                searched.add(json.dumps(args, sort_keys=True))
            elif call_id in conv.results:
                done.append(conv.results[call_id])
        with self.lock:
            if len(done) >= len(self.received):
                self.received = done
        if conv.loose_images and done:
            done[-1].images += conv.loose_images
        if len(done) >= len(self.steps):
            self.finished = True
            return Decision(text="Plan complete.")
        step = self.steps[len(done)]
        name = _host_name(conv.tools, step.tool)
        if name is None:
            search = _search_tool(conv.tools)
            query = _search_args(search, step.tool) if search else None
            if search is None or query is None:
                return Decision(text=f"Tool {step.tool} is not available.")
            if json.dumps(query, sort_keys=True) in searched:
                # The search found nothing yet: a host starts its MCP servers in the background
                # (Codex), so ask again after a model's thinking time rather than at once.
                time.sleep(SEARCH_RETRY_S)
            return Decision(call=(search, query))
        return Decision(call=(name, step.args(done)))


def ipykeep_tool(host_name: str) -> str | None:
    """The ipykeep tool a host's name for it stands for (hosts prefix the server's name)."""
    found = re.fullmatch(r"(?:mcp__|mcp_)?ipykeep(?:__|_|\.)(\w+)", host_name)
    return found.group(1) if found else None


def _host_name(tools: dict[str, int], tool: str) -> str | None:
    return next((name for name in tools if ipykeep_tool(name) == tool), None)


def _search_tool(tools: dict[str, int]) -> str | None:
    return next(
        (name for name in tools if "search" in name.lower() and "tool" in name.lower()), None
    )


def _search_args(search: str, tool: str) -> dict[str, Any] | None:
    if search == "ToolSearch":  # Claude Code: `select:` loads the named tools
        return {"query": f"select:mcp__ipykeep__{tool}", "max_results": 5}
    return {"query": f"ipykeep {tool}", "limit": 5}


# -- the wire formats ---------------------------------------------------------------------------


def _size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")).encode())


def _has_marker(obj: Any) -> bool:
    return MARKER in json.dumps(obj)


def _anthropic_view(body: dict[str, Any]) -> Conversation:
    conv = Conversation(
        tools={t["name"]: _size(t) for t in body.get("tools", []) if "name" in t},
        calls=[],
        results={},
        is_plan=_has_marker(body.get("messages", [])[:1]),
    )
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                conv.calls.append((block["id"], block["name"], block.get("input") or {}))
            elif block.get("type") == "tool_result":
                conv.results[block["tool_use_id"]] = _received_blocks(block, block.get("content"))
    _name_results(conv)
    return conv


def _received_blocks(wrapper: Any, content: Any) -> Received:
    texts: list[str] = []
    images = 0
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text"):
                texts.append(part.get("text", ""))
            elif kind in ("image", "input_image", "image_url"):
                images += 1
    return Received(tool="", text="\n".join(texts), images=images, wire_bytes=_size(wrapper))


def _name_results(conv: Conversation) -> None:
    names = {call_id: name for call_id, name, _ in conv.calls}
    for call_id, got in conv.results.items():
        got.tool = ipykeep_tool(names.get(call_id, "")) or names.get(call_id, "")


def _responses_view(body: dict[str, Any]) -> Conversation:
    conv = Conversation(tools={}, calls=[], results={}, is_plan=_has_marker(body.get("input")))
    offered = list(body.get("tools", []))
    for item in body.get("input", []):
        if item.get("type") == "tool_search_output":  # tools a search loaded join the offer
            offered.extend(item.get("tools") or [])
    for tool in offered:
        if tool.get("type") == "function":
            conv.tools[tool["name"]] = _size(tool)
        elif tool.get("type") == "namespace":  # a server's tools grouped under its name
            for inner in tool.get("tools", []):
                full = _join(tool["name"], inner["name"])
                conv.tools[full] = _size(inner)
                conv.namespaced[full] = (tool["name"], inner["name"])
        elif "name" in tool:
            conv.tools[tool["name"]] = _size(tool)
        elif tool.get("type"):
            conv.tools[tool["type"]] = _size(tool)
    for item in body.get("input", []):
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call", "tool_search_call"):
            name = item.get("name") or kind
            if item.get("namespace"):
                name = _join(item["namespace"], name)
            raw = item.get("arguments") or item.get("input") or {}
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.startswith("{") else {"raw": raw}
            args = raw
            conv.calls.append((item.get("call_id") or item.get("id", ""), name, args))
        elif kind in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
            output = item.get("output")
            if kind == "tool_search_output":
                output = json.dumps(item.get("tools", output))
            conv.results[item.get("call_id", "")] = _received_blocks(item, output)
    _name_results(conv)
    return conv


def _join(namespace: str, name: str) -> str:
    return name if name.startswith(namespace) else f"{namespace}__{name}"


def _chat_view(body: dict[str, Any]) -> Conversation:
    conv = Conversation(
        tools={t["function"]["name"]: _size(t) for t in body.get("tools", []) if "function" in t},
        calls=[],
        results={},
        is_plan=_has_marker(body.get("messages", [])),
    )
    last_result: str | None = None
    for message in body.get("messages", []):
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                fn = call["function"]
                args = json.loads(fn.get("arguments") or "{}")
                conv.calls.append((call["id"], fn["name"], args))
        elif role == "tool":
            got = _received_blocks(message, message.get("content"))
            conv.results[message["tool_call_id"]] = got
            last_result = message["tool_call_id"]
        elif role == "user" and last_result is not None:
            # A host that cannot put images in a tool message sends them in the next user turn.
            images = _received_blocks(message, message.get("content")).images
            conv.results[last_result].images += images
    _name_results(conv)
    return conv


def _gemini_view(body: dict[str, Any]) -> Conversation:
    conv = Conversation(tools={}, calls=[], results={}, is_plan=_has_marker(body.get("contents")))
    for group in body.get("tools", []):
        for decl in group.get("functionDeclarations", []):
            conv.tools[decl["name"]] = _size(decl)
    counter = itertools.count()
    pending: list[str] = []
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            if "functionCall" in part:
                call = part["functionCall"]
                call_id = call.get("id") or f"g{next(counter)}"
                pending.append(call_id)
                conv.calls.append((call_id, call["name"], call.get("args") or {}))
            elif "functionResponse" in part:
                resp = part["functionResponse"]
                call_id = resp.get("id") or (pending.pop(0) if pending else resp["name"])
                if call_id in pending:
                    pending.remove(call_id)
                inner = resp.get("response", {})
                text = inner.get("output") if isinstance(inner.get("output"), str) else None
                images = sum(1 for p in resp.get("parts", []) if "inlineData" in p)
                conv.results[call_id] = Received(
                    tool="",
                    text=text if text is not None else json.dumps(inner),
                    images=images,
                    wire_bytes=_size(part),
                )
            elif "inlineData" in part and conv.results:
                last = list(conv.results.values())[-1]
                last.images += 1
    _name_results(conv)
    return conv


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> Iterator[bytes]:
    for event, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {event}\n" if event else ""
        yield f"{head}data: {payload}\n\n".encode()


class Standin:
    """The endpoint: a threaded HTTP server on 127.0.0.1 answering every host's format."""

    def __init__(self, plan_factory: Callable[[], Plan], log: Path | None = None) -> None:
        self.plan_factory = plan_factory
        #: Each request is appended here as one JSON line (path, body) as it arrives.
        self.log = log
        self.plan = plan_factory()
        #: Every request: (path, parsed body).
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Standin:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        self.plan = self.plan_factory()
        self.requests.clear()

    def plan_requests(self) -> list[tuple[str, dict[str, Any]]]:
        return [(p, b) for p, b in self.requests if _has_marker(b)]

    # -- request handling -------------------------------------------------------------------------

    def answer(self, path: str, body: dict[str, Any]) -> tuple[str, Any]:
        """The response for one request: ("sse", events) or ("json", object)."""
        self.requests.append((path, body))
        if self.log is not None:
            with self.log.open("a") as out:
                out.write(json.dumps({"t": time.time(), "path": path, "body": body}) + "\n")
        if "/messages" in path:
            return self._anthropic(path, body)
        if path.endswith("/responses"):
            return self._responses(body)
        if path.endswith("/chat/completions"):
            return self._chat(body)
        if ":streamGenerateContent" in path or ":generateContent" in path:
            return self._gemini(path, body)
        if ":countTokens" in path:
            return "json", {"totalTokens": 10}
        if path.endswith("/models") or "/models" in path:
            return "json", {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
        return "json", {}

    def _decide(self, conv: Conversation) -> Decision:
        if not conv.is_plan:
            return Decision(text="ok")
        if len(conv.calls) > MAX_CALLS:  # a host that keeps refusing must not loop forever
            return Decision(text="Plan abandoned: too many calls.")
        return self.plan.decide(conv)

    def _anthropic(self, path: str, body: dict[str, Any]) -> tuple[str, Any]:
        if path.split("?")[0].endswith("/count_tokens"):
            return "json", {"input_tokens": 10}
        decision = self._decide(_anthropic_view(body))
        msg_id = f"msg_{next(self.ids)}"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if decision.call:
            name, args = decision.call
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_{next(self.ids)}",
                "name": name,
                "input": args,
            }
            stop = "tool_use"
        else:
            block = {"type": "text", "text": decision.text or ""}
            stop = "end_turn"
        message = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stand-in"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return "json", message
        start_block = dict(block, input={}) if block["type"] == "tool_use" else dict(block, text="")
        delta = (
            {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            if block["type"] == "tool_use"
            else {"type": "text_delta", "text": block["text"]}
        )
        events: list[tuple[str | None, dict[str, Any] | str]] = [
            (
                "message_start",
                {"type": "message_start", "message": dict(message, content=[], stop_reason=None)},
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": start_block},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return "sse", events

    def _responses(self, body: dict[str, Any]) -> tuple[str, Any]:
        conv = _responses_view(body)
        decision = self._decide(conv)
        resp_id = f"resp_{next(self.ids)}"
        if decision.call:
            name, args = decision.call
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{next(self.ids)}",
                "call_id": f"call_{next(self.ids)}",
                "name": name,
                "arguments": json.dumps(args),
            }
            if name in conv.namespaced:
                item["namespace"], item["name"] = conv.namespaced[name]
            if name == "tool_search":
                item = {
                    "type": "tool_search_call",
                    "id": f"ts_{next(self.ids)}",
                    "call_id": item["call_id"],
                    "status": "completed",
                    "execution": "client",
                    "arguments": args,
                }
        else:
            item = {
                "type": "message",
                "id": f"msg_{next(self.ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": decision.text or "", "annotations": []}
                ],
            }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        return "sse", [
            ("response.created", {"type": "response.created", "response": {"id": resp_id}}),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {"id": resp_id, "usage": usage, "output": [item]},
                },
            ),
        ]

    def _chat(self, body: dict[str, Any]) -> tuple[str, Any]:
        decision = self._decide(_chat_view(body))
        chunk_id = f"chatcmpl-{next(self.ids)}"
        base = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", "stand-in"),
        }
        if decision.call:
            name, args = decision.call
            delta: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": f"call_{next(self.ids)}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": decision.text or ""}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message = {k: v for k, v in delta.items() if k != "tool_calls"}
            if "tool_calls" in delta:
                message["tool_calls"] = [
                    {k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]
                ]
            return "json", dict(
                base,
                object="chat.completion",
                choices=[{"index": 0, "message": message, "finish_reason": finish}],
                usage=usage,
            )
        return "sse", [
            (None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])),
            (
                None,
                dict(
                    base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}], usage=usage
                ),
            ),
            (None, "[DONE]"),
        ]

    def _gemini(self, path: str, body: dict[str, Any]) -> tuple[str, Any]:
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema"):
            # Side questions (next speaker, loop checks) ask for JSON: the user speaks next.
            text = json.dumps({"next_speaker": "user", "reasoning": "The plan is the user's turn."})
            part: dict[str, Any] = {"text": text}
        else:
            decision = self._decide(_gemini_view(body))
            if decision.call:
                name, args = decision.call
                part = {"functionCall": {"name": name, "args": args}}
            else:
                part = {"text": decision.text or ""}
        reply = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": "stand-in",
        }
        if ":streamGenerateContent" in path:
            return "sse", [(None, reply)]
        return "json", reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(*standin.answer(self.path, {}))

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else self._read_chunked()
                if self.headers.get("Content-Encoding") == "zstd":
                    self._send("json", {"error": "compressed bodies are not read"}, 415)
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": base64.b64encode(raw).decode()}
                self._send(*standin.answer(self.path, body))

            def _read_chunked(self) -> bytes:
                data = b""
                if "chunked" not in (self.headers.get("Transfer-Encoding") or ""):
                    return data
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()

            def _send(self, kind: str, payload: Any, status: int = 200) -> None:
                if kind == "sse":
                    body = b"".join(_sse(payload))
                    content_type = "text/event-stream"
                else:
                    body = json.dumps(payload).encode()
                    content_type = "application/json"
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
