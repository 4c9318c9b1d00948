"""pdb-style command text -> debugger operations (pure: no kernel)."""

from __future__ import annotations

import pytest

from ipykeep.api.errors import UsageError
from ipykeep.debugger.commands import Breakpoint, Command, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("w", Command("where")),
        ("bt", Command("where")),
        ("up", Command("up", 1)),
        ("u 2", Command("up", 2)),
        ("down", Command("down", 1)),
        ("frame 0", Command("frame", 0)),
        ("p df.shape", Command("p", "df.shape")),
        ("pp  x + 1 ", Command("p", "x + 1")),
        ("!x[0]", Command("p", "x[0]")),
        ("locals", Command("locals")),
        ("l", Command("list")),
        ("b", Command("break")),
        ("b loop:3", Command("break", Breakpoint(location="loop", line=3))),
        ("break 2:1", Command("break", Breakpoint(location="2", line=1))),
        ("b src/lib.py:12", Command("break", Breakpoint(location="src/lib.py", line=12))),
        ("b helpers.scale", Command("break", Breakpoint(function="helpers.scale"))),
        ("b /model.fit(/", Command("break", Breakpoint(text="model.fit("))),
        ('b "x = 1"', Command("break", Breakpoint(text="x = 1"))),
        ("clear", Command("clear")),
        ("cl 2", Command("clear", 2)),
        ("clear loop:3", Command("clear", Breakpoint(location="loop", line=3))),
        ("clear helpers.double", Command("clear", Breakpoint(function="helpers.double"))),
        ("clear /fit(/", Command("clear", Breakpoint(text="fit("))),
        ("catch on", Command("catch", True)),
        ("catch OFF", Command("catch", False)),
        ("s", Command("step")),
        ("n", Command("next")),
        ("r", Command("return")),
        ("c", Command("continue")),
        ("q", Command("quit")),
        ("status", Command("status")),
        ("replay", Command("replay", (None, None))),
        ("replay later", Command("replay", ("later", None))),
        ("replay 5 3", Command("replay", ("5", 3))),
    ],
)
def test_parse(text: str, expected: Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("frobnicate", "unknown debugger command"),
        ("p", "needs an expression"),
        ("up x", "takes a number"),
        ("frame", "needs a frame number"),
        ("catch maybe", "on or off"),
        ("b loop:0", "numbered from 1"),
        ("b 1+1", "cannot read breakpoint"),
        ("b //", "needs text"),
        ("clear 1+1", "cannot read breakpoint"),
        ("next 3", "takes no argument"),
        ("replay a b", "cannot read replay target"),
    ],
)
def test_bad_commands_say_what_is_accepted(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        parse(text)
    assert caught.value.hint
