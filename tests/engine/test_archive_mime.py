"""Artifacts are served with the MIME type they were stored under (one table both ways)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ipykeep.engine.archive import KernelArchive
from ipykeep.project.stored import ARTIFACT_MIME, MIME_SUFFIX, read_artifact

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 64 + b"\xff\xd9"
GIF = b"GIF89a" + b"\x00" * 32
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _stored_uri(archive: KernelArchive, mime: str, payload: bytes) -> str:
    # The path an image a cell displayed takes into the record.
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {mime: base64.b64encode(payload).decode()},
    }
    compact = archive._compact(output)
    return compact["data"][mime]["artifact"]


@pytest.mark.parametrize(
    ("mime", "payload"), [("image/jpeg", JPEG), ("image/png", PNG), ("image/gif", GIF)]
)
def test_images_are_served_with_their_type(tmp_path: Path, mime: str, payload: bytes) -> None:
    archive = KernelArchive(tmp_path / "kernels" / "k1", "k1")
    uri = _stored_uri(archive, mime, payload)
    got = read_artifact(tmp_path, uri)
    assert got["mime"] == mime
    assert base64.b64decode(got["blob"]) == payload


def test_text_and_unknown_types(tmp_path: Path) -> None:
    archive = KernelArchive(tmp_path / "kernels" / "k1", "k1")
    text = archive.store_text("line\n" * 10)
    got = read_artifact(tmp_path, text.uri)
    assert got["text"] == "line\n" * 10 and got["mime"] == "text/plain"
    html = archive.store(b"<b>big table</b>", "text/html")
    assert read_artifact(tmp_path, html.uri) | {"path": ""} == {
        "uri": html.uri,
        "path": "",
        "text": "<b>big table</b>",
        "mime": "text/html",
    }
    other = archive.store(b"\x00\x01", "application/x-something")
    assert other.path.suffix == ".bin"
    assert read_artifact(tmp_path, other.uri)["mime"] == "application/octet-stream"


def test_every_stored_suffix_maps_back_to_its_type() -> None:
    for mime, suffix in MIME_SUFFIX.items():
        assert ARTIFACT_MIME[suffix] == mime
