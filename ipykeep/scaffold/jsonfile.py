"""Set one member of a nested JSON object by editing the text in place.

Host config files such as ``~/.claude.json`` hold far more than ipykeep's entry, written by the
host in its own style. Re-serializing the whole document would reformat numbers, escapes and
compact arrays the host wrote, so instead the edit touches only the bytes of the one member it
sets (or inserts it after the last sibling, indented like its siblings). Everything else in the
file stays byte for byte as it was.

Some hosts read their files as JSON with comments (VS Code's ``mcp.json``, opencode's
``opencode.json``, Gemini CLI's ``settings.json``): with ``comments=True`` the file is read with
its ``//`` and ``/* */`` comments and trailing commas blanked out (same length, same offsets), and
the edit is spliced into the original text, so the comments stay where they were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # exported, but typeshed omits it
from pathlib import Path
from typing import Any

from ipykeep.api.errors import ConfigError

_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class _Object:
    start: int  # index of "{"
    end: int  # index of "}"
    members: tuple[_Member, ...]

    def get(self, key: str) -> _Member | None:
        found = None
        for member in self.members:  # json.loads keeps the last duplicate; so do we
            if member.key == key:
                found = member
        return found


def blank_comments(text: str) -> str:
    """``text`` with JSONC comments and trailing commas replaced by spaces (newlines kept).

    The result has the same length and every JSON token at the same offset, so spans found in
    it are spans of ``text``. Strings are left alone (a ``//`` inside a URL is not a comment).
    """
    out = list(text)
    i, n = 0, len(text)
    last_comma = -1  # offset of a comma not yet followed by a value
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            last_comma = -1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] in "/*":
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i + 2)
            end = n if end < 0 else (end if text[i + 1] == "/" else end + 2)
            for k in range(i, end):
                if out[k] != "\n":
                    out[k] = " "
            i = end
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]":
            if last_comma >= 0:
                out[last_comma] = " "
            last_comma = -1
        elif ch not in _WS:
            last_comma = -1
        i += 1
    return "".join(out)


def parse_json_object(text: str, path: Path, *, comments: bool = False) -> dict[str, Any]:
    """Parse ``text`` (the contents of ``path``) as a JSON object, or raise ConfigError.

    ``comments``: the host reads the file as JSON with comments (see the module docstring).
    """
    if not text.strip():
        return {}
    try:
        data = json.loads(blank_comments(text) if comments else text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})",
            hint=f"fix the syntax of {path} (nothing was written)",
            details={"file": str(path), "line": exc.lineno, "column": exc.colno},
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: line 1: expected a JSON object at the top level",
            hint=f"fix {path} (nothing was written)",
            details={"file": str(path), "line": 1},
        )
    return data


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _scan_object(text: str, start: int) -> _Object:
    """Member spans of the (valid) JSON object whose ``{`` is at ``start``."""
    members: list[_Member] = []
    i = _skip_ws(text, start + 1)
    if text[i] == "}":
        return _Object(start, i, ())
    while True:
        key_start = i
        key, i = scanstring(text, i + 1)
        i = _skip_ws(text, i)
        i = _skip_ws(text, i + 1)  # past ":"
        _, value_end = _DECODER.raw_decode(text, i)
        members.append(_Member(key, key_start, i, value_end))
        i = _skip_ws(text, value_end)
        if text[i] == "}":
            return _Object(start, i, tuple(members))
        i = _skip_ws(text, i + 1)  # past ","


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    line = text[line_start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def detect_indent(text: str) -> str | None:
    """The file's indentation unit ("  ", "    ", "\\t"), or None for single-line JSON."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return None


def _render(value: Any, unit: str | None, base: str) -> str:
    if unit is None:
        return json.dumps(value, ensure_ascii=False)
    rendered = json.dumps(value, indent=unit, ensure_ascii=False)
    return rendered.replace("\n", "\n" + base)


def _insert_member(text: str, obj: _Object, key: str, value: Any, unit: str | None) -> str:
    """Text with ``key: value`` added as the last member of ``obj``."""
    multiline = unit is not None
    if obj.members:
        last = obj.members[-1]
        first = obj.members[0]
        inline_obj = "\n" not in text[obj.start : first.key_start]
        if not multiline or inline_obj:
            member = f"{json.dumps(key)}: {_render(value, None, '')}"
            return text[: last.value_end] + ", " + member + text[last.value_end :]
        indent = _line_indent(text, first.key_start)
        member = f"{json.dumps(key)}: {_render(value, unit, indent)}"
        return text[: last.value_end] + ",\n" + indent + member + text[last.value_end :]
    if not multiline:
        member = f"{json.dumps(key)}: {_render(value, None, '')}"
        return text[: obj.start + 1] + member + text[obj.end :]
    assert unit is not None
    outer = _line_indent(text, obj.start)
    indent = outer + unit
    member = f"{json.dumps(key)}: {_render(value, unit, indent)}"
    return text[: obj.start + 1] + "\n" + indent + member + "\n" + outer + text[obj.end :]


def set_nested_member(
    text: str,
    parent_key: str,
    key: str,
    value: Any,
    default_indent: str = "  ",
    *,
    comments: bool = False,
) -> str:
    """Return ``text`` with ``document[parent_key][key] = value``, all other bytes unchanged.

    ``text`` must already have been validated with :func:`parse_json_object`, and
    ``document[parent_key]`` (if present) must be an object. An empty or blank text becomes a
    fresh document indented with ``default_indent``.
    """
    if not text.strip():
        doc = {parent_key: {key: value}}
        return json.dumps(doc, indent=default_indent, ensure_ascii=False) + "\n"
    unit = detect_indent(text)
    scan = blank_comments(text) if comments else text
    top = _scan_object(scan, _skip_ws(scan, 0))
    parent = top.get(parent_key)
    if parent is None:
        return _insert_member(text, top, parent_key, {key: value}, unit)
    inner = _scan_object(scan, parent.value_start)
    existing = inner.get(key)
    if existing is None:
        return _insert_member(text, inner, key, value, unit)
    # The replaced value keeps the layout of the one it replaces: one line stays one line.
    inline = "\n" not in text[existing.value_start : existing.value_end]
    rendered = _render(value, None if inline else unit, _line_indent(text, existing.key_start))
    return text[: existing.value_start] + rendered + text[existing.value_end :]


def set_top_member(
    text: str, key: str, value: Any, default_indent: str = "  ", *, comments: bool = False
) -> str:
    """Return ``text`` with ``document[key] = value``, all other bytes unchanged.

    ``text`` must already have been validated with :func:`parse_json_object`.
    """
    if not text.strip():
        return json.dumps({key: value}, indent=default_indent, ensure_ascii=False) + "\n"
    unit = detect_indent(text)
    scan = blank_comments(text) if comments else text
    top = _scan_object(scan, _skip_ws(scan, 0))
    existing = top.get(key)
    if existing is None:
        return _insert_member(text, top, key, value, unit)
    inline = "\n" not in text[existing.value_start : existing.value_end]
    rendered = _render(value, None if inline else unit, _line_indent(text, existing.key_start))
    return text[: existing.value_start] + rendered + text[existing.value_end :]
