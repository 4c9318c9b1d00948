"""The notebook view's MCP side without a kernel: links, capability checks, the shipped page."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp_types import ClientCapabilities

from ipykeep.client.notebook_view import failing_line
from ipykeep.mcp_server import notebook_app
from ipykeep.mcp_server.server import _tools
from ipykeep.project.config import Config

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app"
#: What app/build.mjs hashes (its SOURCES), in the same way.
SOURCES = ("package.json", "package-lock.json", "build.mjs", "src", "test-host")

CAPABILITIES: list[dict[str, Any]] = [
    {},
    {"extensions": {}},
    {"extensions": {notebook_app.EXTENSION_ID: {}}},
    {"extensions": {notebook_app.EXTENSION_ID: {"mimeTypes": ["text/html"]}}},
    {"extensions": {notebook_app.EXTENSION_ID: {"mimeTypes": [notebook_app.APP_MIME_TYPE]}}},
    {"extensions": {"other/ext": {"mimeTypes": [notebook_app.APP_MIME_TYPE]}}},
]


def test_the_extension_identifiers_are_the_sdks() -> None:
    from mcp.server import apps

    assert notebook_app.EXTENSION_ID == apps.EXTENSION_ID
    assert notebook_app.APP_MIME_TYPE == apps.APP_MIME_TYPE


@pytest.mark.parametrize("capabilities", CAPABILITIES)
def test_apps_support_is_decided_as_the_sdk_decides(
    capabilities: dict[str, Any],
) -> None:
    from mcp.server.apps import client_supports_apps

    parsed = ClientCapabilities.model_validate(capabilities)
    ctx: Any = SimpleNamespace(session=SimpleNamespace(client_capabilities=parsed))
    expected = client_supports_apps(ctx)
    assert notebook_app.supports_apps(ctx) is expected


def test_the_view_is_linked_from_the_chosen_tools_and_nothing_else_changes() -> None:
    plain = _tools(Config())
    linked = notebook_app.link(plain)
    assert [t.name for t in linked] == [t.name for t in plain]
    for before, after in zip(plain, linked):
        dumped = after.model_dump(by_alias=True, exclude_none=True)
        meta = dict(dumped.pop("_meta", None) or {})
        ui = meta.pop("ui", None)
        if before.name in notebook_app.LINKED_TOOLS:
            assert ui == {"resourceUri": notebook_app.VIEW_URI}
        else:
            assert ui is None
        if meta:
            dumped["_meta"] = meta
        assert dumped == before.model_dump(by_alias=True, exclude_none=True)
    assert {t.name for t in plain} >= notebook_app.LINKED_TOOLS
    state = notebook_app.STATE_TOOL_SPEC.model_dump(by_alias=True, exclude_none=True)
    assert state["_meta"]["ui"]["visibility"] == ["app"]
    assert notebook_app.STATE_TOOL not in {t.name for t in plain}


def _source_hash() -> str:
    files = sorted(
        p.relative_to(APP).as_posix()
        for name in SOURCES
        for p in ([APP / name] if (APP / name).is_file() else (APP / name).rglob("*"))
        if p.is_file()
    )
    digest = hashlib.sha256()
    for rel in files:
        digest.update(f"{rel}\n{hashlib.sha256((APP / rel).read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


@pytest.mark.parametrize(
    "built", ["ipykeep/mcp_server/app/notebook.html", "tests/mcp_server/app_host/host.html"]
)
def test_the_shipped_pages_are_the_build_of_the_sources(built: str) -> None:
    page = (REPO / built).read_text()
    stamp = re.search(r'<meta name="ipykeep-app-source" content="([0-9a-f]{64})">', page)
    assert stamp is not None, "the page was not built by app/build.mjs"
    assert stamp.group(1) == _source_hash(), "rebuild: cd app && npm ci && npm run build"


def test_the_view_page_loads_nothing_from_outside() -> None:
    page = notebook_app.html()
    assert page == (REPO / "ipykeep/mcp_server/app/notebook.html").read_text()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = dict(
        (part.split()[0], part.split()[1:]) for part in csp.group(1).split(";") if part.strip()
    )
    assert policy["default-src"] == ["'none'"] and policy["connect-src"] == ["'none'"]
    assert policy["img-src"] == ["data:"]
    # everything is inline: no element that fetches
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=", page)
    assert not re.search(r"<link[^>]*href=", page)
    read = notebook_app.read_view().contents[0]
    assert read.mime_type == "text/html;profile=mcp-app"
    assert read.meta == {"ui": notebook_app.RESOURCE_UI}
    assert all(v == [] for v in notebook_app.RESOURCE_UI["csp"].values())


def test_a_standalone_page_embeds_its_snapshot_safely() -> None:
    snapshot = {"kernel": {"kernel_id": "k1"}, "cells": [], "text": "</script><b>x</b>"}
    page = notebook_app.standalone(snapshot)
    found = re.search(
        r'<script type="application/json" id="ipykeep-snapshot">(.*?)</script>', page, re.S
    )
    assert found is not None
    assert json.loads(found.group(1)) == snapshot
    assert page.count("</body>") == 1 and page.index(found.group(0)) < page.index("</body>")


def test_the_failing_line_is_the_last_frames_arrow() -> None:
    traceback = (
        "\x1b[31mZeroDivisionError\x1b[39m Traceback (most recent call last)\n"
        "Cell In[3], line 2\n      1 a = 1\n----> 2 helper(a)\n\n"
        "Cell In[1], line 2, in helper(x)\n      1 def helper(x):\n----> 2     return x / 0\n"
    )
    assert failing_line(traceback) == "2: return x / 0"
    assert failing_line("no arrows here") is None
