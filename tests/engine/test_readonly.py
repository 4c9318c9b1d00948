"""Which scratch code skips the namespace probe: only code that can do nothing but read."""

from __future__ import annotations

import pytest

from ipykeep.engine.readonly import MAX_CHARS, is_read_only


@pytest.mark.parametrize(
    "code",
    ["1+1", "df.shape", "x", "df['a'][:5]", "(a, b.c, {1: [2]})", "f'{x!r}'", "a if b else c", ""],
)
def test_quick_looks_are_read_only(code: str) -> None:
    assert is_read_only(code)


@pytest.mark.parametrize(
    "code",
    [
        "x = 1",
        "x += 1",
        "df.head()",
        "print(1)",
        "import os",
        "del x",
        "(y := 2)",
        "[i for i in range(3)]",
        "lambda: 0",
        "%time x",
        "!ls",
        "x?",
        "await f()",
        "x.append(1)",
        "def f(): pass",
        "for i in a: pass",
        "not python (",
    ],
)
def test_code_that_may_change_state_is_not(code: str) -> None:
    assert not is_read_only(code)


def test_long_code_is_never_parsed_as_a_quick_look() -> None:
    assert not is_read_only("x + " * MAX_CHARS + "x")
