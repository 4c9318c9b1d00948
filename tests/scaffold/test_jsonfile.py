"""In-place JSON member edits keep every other byte of the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipykeep.api.errors import ConfigError
from ipykeep.scaffold.jsonfile import detect_indent, parse_json_object, set_nested_member

VALUE = {"command": "ipykeep", "args": ["mcp-serve"]}


def _check(before: str, after: str) -> None:
    expected = json.loads(before or "{}")
    expected.setdefault("mcpServers", {})["ipykeep"] = VALUE
    assert json.loads(after) == expected
    assert list(json.loads(after)) == list(expected), "key order kept"


def test_tabs() -> None:
    before = '{\n\t"a": 1,\n\t"mcpServers": {\n\t\t"x": {}\n\t}\n}'
    after = set_nested_member(before, "mcpServers", "ipykeep", VALUE)
    _check(before, after)
    assert after == (
        '{\n\t"a": 1,\n\t"mcpServers": {\n\t\t"x": {},\n\t\t"ipykeep": {\n'
        '\t\t\t"command": "ipykeep",\n'
        '\t\t\t"args": [\n\t\t\t\t"mcp-serve"\n\t\t\t]\n\t\t}\n\t}\n}'
    )


def test_empty_servers_object_and_missing_parent() -> None:
    before = '{\n  "mcpServers": {}\n}\n'
    after = set_nested_member(before, "mcpServers", "ipykeep", VALUE)
    _check(before, after)
    assert after.startswith('{\n  "mcpServers": {\n    "ipykeep": {\n      "command"')
    before = '{\n    "a": [1, 2]\n}\n'
    after = set_nested_member(before, "mcpServers", "ipykeep", VALUE)
    _check(before, after)
    assert after.startswith(
        '{\n    "a": [1, 2],\n    "mcpServers": {\n        "ipykeep": {\n            "command"'
    )


def test_compact_and_empty_documents() -> None:
    for before in ("{}", '{"a":{"b":[1,2.50]}}', '{"mcpServers":{}}'):
        after = set_nested_member(before, "mcpServers", "ipykeep", VALUE)
        _check(before, after)
        assert "\n" not in after and after.startswith(before[:-2])
    assert set_nested_member('{"a":{"b":[1,2.50]}}', "mcpServers", "ipykeep", VALUE) == (
        '{"a":{"b":[1,2.50]}, "mcpServers": {"ipykeep": {"command": "ipykeep", "args": '
        '["mcp-serve"]}}}'
    )
    assert json.loads(set_nested_member("", "mcpServers", "ipykeep", VALUE)) == {
        "mcpServers": {"ipykeep": VALUE}
    }


def test_replace_keeps_neighbours() -> None:
    before = '{"mcpServers": {\n  "a": 1,\n  "ipykeep": {"command": "old"},\n  "z": 2\n}}'
    after = set_nested_member(before, "mcpServers", "ipykeep", VALUE)
    _check(before, after)
    assert after.startswith(
        '{"mcpServers": {\n  "a": 1,\n  "ipykeep": {"command": "ipykeep", "args": ["mcp-serve"]},'
        '\n  "z": 2'
    )


def test_detect_indent() -> None:
    assert detect_indent('{\n   "a": 1\n}') == "   "
    assert detect_indent('{"a": 1}') is None


@pytest.mark.parametrize(
    ("text", "line"), [('{\n"a": 1,\n}', 3), ("[1]", 1), ('{\n\n  "a": tru\n}', 3)]
)
def test_errors_name_file_and_line(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_json_object(text, Path("/p/x.json"))
    assert info.value.message.startswith(f"/p/x.json: line {line}")
