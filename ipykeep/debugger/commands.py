"""pdb-style command text -> the debugger operation it names (pure: no kernel, no I/O).

Agents know pdb, so the vocabulary is pdb's (``w``, ``u``, ``d``, ``p``, ``b``, ``s``, ``n``,
``r``, ``c``, ``q``) plus what a notebook needs: ``locals`` (the frame's variables through the
typed summarizers), ``catch on|off`` (stop on raised exceptions) and ``replay`` (re-run a failed
cell from the state it started from). A breakpoint's target is kept as written here; which
cell or file it names is decided by the service, which knows the notebook and the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ipykeep.api.errors import UsageError

#: op -> the spellings that name it
_ALIASES: dict[str, tuple[str, ...]] = {
    "where": ("where", "w", "bt", "backtrace", "frames"),
    "up": ("up", "u"),
    "down": ("down", "d"),
    "frame": ("frame", "f"),
    "p": ("p", "pp", "print", "eval", "evaluate"),
    "locals": ("locals", "a", "args", "vars"),
    "list": ("list", "l", "ll"),
    "break": ("break", "b"),
    "clear": ("clear", "cl"),
    "catch": ("catch", "exceptions"),
    "step": ("step", "s"),
    "next": ("next", "n"),
    "return": ("return", "r"),
    "continue": ("continue", "c", "cont"),
    "quit": ("quit", "q"),
    "status": ("status", "info"),
    "replay": ("replay", "debug"),
}
_OPS = {spelling: op for op, spellings in _ALIASES.items() for spelling in spellings}

#: Ops that move a paused execution (the reply waits for it to pause again or finish).
RESUMING = frozenset({"step", "next", "return", "continue", "quit"})

_HINT = (
    "use a pdb command: where, up, down, frame N, p EXPR, locals, list, break SPEC, "
    "clear [N|SPEC], "
    "catch on|off, step, next, return, continue, quit, status, replay [CELL] [LINE]"
)


@dataclass(frozen=True)
class Breakpoint:
    """A breakpoint as written: exactly one of the targets is set."""

    #: ``CELL:LINE`` or ``FILE:LINE``: left of the colon, told apart by the service
    location: str | None = None
    line: int | None = None
    function: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Command:
    op: str
    #: the op's argument: a count, an expression, ``Breakpoint`` (or a breakpoint's number, for
    #: ``clear``), a flag, or replay's target
    arg: Any = None


_IDENT = re.compile(r"^[A-Za-z_][\w.]*$")


def parse(text: str) -> Command:
    """The command ``text`` names; a ``UsageError`` saying what is accepted otherwise."""
    stripped = text.strip()
    if stripped.startswith("!"):  # pdb's "evaluate this", as an expression
        return Command("p", _expression(stripped[1:], text))
    word, _, rest = stripped.partition(" ")
    op = _OPS.get(word.lower())
    rest = rest.strip()
    if op is None:
        raise UsageError(f"unknown debugger command {word!r}", hint=_HINT)
    if op in ("up", "down"):
        return Command(op, _count(rest, op, default=1))
    if op == "frame":
        return Command(op, _count(rest, op, default=None))
    if op == "p":
        return Command(op, _expression(rest, text))
    if op == "break":
        return Command(op, _breakpoint(rest) if rest else None)
    if op == "clear":  # one breakpoint, by the number the listing gives or as it was set
        return Command(op, (int(rest) if rest.isdigit() else _breakpoint(rest)) if rest else None)
    if op == "catch":
        if rest.lower() not in ("on", "off"):
            raise UsageError("catch takes on or off", hint="catch on  (stop on raised exceptions)")
        return Command(op, rest.lower() == "on")
    if op == "replay":
        return Command(op, _replay_target(rest))
    if rest:
        raise UsageError(f"{word} takes no argument, got {rest!r}", hint=_HINT)
    return Command(op)


def _count(rest: str, op: str, *, default: int | None) -> int:
    if not rest:
        if default is None:
            raise UsageError(f"{op} needs a frame number", hint="frame 0  (the outermost frame)")
        return default
    if not rest.isdigit():
        raise UsageError(f"{op} takes a number, got {rest!r}", hint=f"{op} 1")
    return int(rest)


def _expression(rest: str, text: str) -> str:
    if not rest.strip():
        raise UsageError(f"{text.strip()!r} needs an expression", hint="p df.shape")
    return rest.strip()


def _breakpoint(spec: str) -> Breakpoint:
    if len(spec) >= 2 and spec[0] == spec[-1] and spec[0] in "/\"'":
        if not spec[1:-1].strip():
            raise UsageError("a text breakpoint needs text", hint="break /model.fit(/")
        return Breakpoint(text=spec[1:-1])
    location, colon, line = spec.rpartition(":")
    if colon and line.strip().isdigit() and location.strip():
        number = int(line)
        if number < 1:
            raise UsageError("lines are numbered from 1", hint="break CELL:1")
        return Breakpoint(location=location.strip(), line=number)
    if _IDENT.match(spec):
        return Breakpoint(function=spec)
    raise UsageError(
        f"cannot read breakpoint {spec!r}",
        hint="break CELL:LINE (cell id or index), break FUNCTION, break /TEXT/, break FILE:LINE",
    )


def _replay_target(rest: str) -> tuple[str | None, int | None]:
    parts = rest.split()
    if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise UsageError(f"cannot read replay target {rest!r}", hint="replay [CELL] [LINE]")
    cell = parts[0] if parts else None
    line = int(parts[1]) if len(parts) == 2 else None
    return cell, line
