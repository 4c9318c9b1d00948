"""A client of a served notebook's collaboration room, speaking what JupyterLab speaks.

It asks ``PUT /api/collaboration/session/PATH`` for the file id, opens the room's websocket
(``/api/collaboration/room/json:notebook:ID``), syncs a ``pycrdt`` document with it through
``pycrdt.Provider`` (the Y sync protocol) and sends the room's ``save`` request, a RAW message
JupyterLab sends for Ctrl+S, reading the server's JSON reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nbformat
from jupyter_ydoc import YNotebook
from pycrdt import Decoder, Doc, Encoder, Provider
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

RAW = 2  # jupyter_server_ydoc.utils.MessageType.RAW


class RoomChannel:
    """The room's websocket as a ``pycrdt`` channel; RAW messages (save replies) kept aside."""

    def __init__(self, conn: WebSocketClientConnection, path: str) -> None:
        self._conn = conn
        self._path = path
        self.raw: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> RoomChannel:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.recv()
        except ConnectionError:
            raise StopAsyncIteration from None

    async def send(self, message: bytes) -> None:
        await self._conn.write_message(message, binary=True)

    async def recv(self) -> bytes:
        while True:
            message = await self._conn.read_message()
            if message is None:
                raise ConnectionError("the room closed its websocket")
            data = message.encode() if isinstance(message, str) else message
            if data and data[0] == RAW:
                decoder = Decoder(data[1:])
                self.raw.put_nowait(json.loads(decoder.read_var_string()))
                continue
            return data


async def open_session(base: str, token: str, path: str) -> tuple[int, dict[str, Any]]:
    """The room session of ``path``: (HTTP status, body) of JupyterLab's first request."""
    request = HTTPRequest(
        f"{base}/api/collaboration/session/{quote(path)}",
        method="PUT",
        headers={"Authorization": f"token {token}"},
        body=json.dumps({"format": "json", "type": "notebook"}),
        request_timeout=60,
    )
    try:
        response = await AsyncHTTPClient().fetch(request)
    except HTTPClientError as exc:
        return exc.code, {}
    return response.code, json.loads(response.body or b"{}")


class RoomClient:
    """One participant of the room: ``notebook`` is its live view (a ``YNotebook``)."""

    def __init__(self, channel: RoomChannel, doc: Doc) -> None:
        self.channel = channel
        self.doc = doc
        self.notebook = YNotebook(doc)
        self._save_ids = itertools.count(1)

    def sources(self) -> list[str]:
        return [str(cell["source"]) for cell in self.notebook.ycells]

    def ids(self) -> list[str]:
        return [str(cell.get("id")) for cell in self.notebook.ycells]

    def type_into(self, index: int, text: str) -> None:
        """Keystrokes at the end of cell ``index`` (a Y text insert, as the editor makes)."""
        source = self.notebook.ycells[index]["source"]
        source.insert(len(source), text)

    async def save(self) -> dict[str, Any]:
        """Ctrl+S: the room's ``save`` request and the server's reply to it."""
        return await self.reply_to(await self.send_save())

    async def send_save(self) -> int:
        """Send the room's ``save`` request; its id, for ``reply_to``."""
        save_id = next(self._save_ids)
        encoder = Encoder()
        encoder.write_var_uint(RAW)
        encoder.write_var_string("save")
        encoder.write_var_uint(save_id)
        await self.channel.send(encoder.to_bytes())
        return save_id

    async def reply_to(self, save_id: int) -> dict[str, Any]:
        while True:
            reply = await asyncio.wait_for(self.channel.raw.get(), 60)
            if reply.get("type") == "save" and reply.get("responseTo") == save_id:
                return reply


@contextlib.asynccontextmanager
async def room_client(base: str, token: str, path: str) -> AsyncIterator[RoomClient]:
    status, session = await open_session(base, token, path)
    assert status in (200, 201), (status, session)
    room = f"json:notebook:{session['fileId']}"
    ws = base.replace("http://", "ws://")
    url = f"{ws}/api/collaboration/room/{room}?sessionId={session['sessionId']}&token={token}"
    conn = await websocket_connect(url, connect_timeout=60)
    channel = RoomChannel(conn, room)
    doc = Doc()
    client = RoomClient(channel, doc)
    try:
        async with Provider(doc, channel) as provider:
            await asyncio.wait_for(provider.synced.wait(), 60)
            yield client
    finally:
        conn.close()


def write_like_a_file_tool(path: Path, index: int, source: str) -> None:
    """Read the notebook, change one cell, write a temporary file and rename it over."""
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[index].source = source
    tmp = path.with_name(f".{path.name}.tool-tmp")
    nbformat.write(nb, str(tmp))
    os.replace(tmp, path)


def file_sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(str(path), as_version=4).cells]
