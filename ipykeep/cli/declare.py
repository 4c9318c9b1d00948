"""The vocabulary of the CLI's command table: commands, their parameters and the rules between them.

Standard library only, and no handler is imported here: the fast path reads the table on every
call, the typer app builds its commands from it, and both check the rules and call the
handler through :func:`run_handler`, so a rule is written once and holds on both paths.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, cast

from ipykeep.api.errors import UsageError


# Plain slotted classes rather than NamedTuple or dataclass: the fast path imports this module on
# every call, and defining a NamedTuple class costs as much as the rest of the module.
class Param:
    """One argument (no ``flags``) or option of a command, passed to its handler as ``dest``."""

    __slots__ = (
        "dest",
        "help",
        "flags",
        "type",
        "default",
        "required",
        "multiple",
        "metavar",
        "show_default",
    )

    def __init__(
        self,
        dest: str,
        help: str,
        flags: tuple[str, ...] = (),
        type: str = "str",
        default: Any = None,
        *,
        required: bool = False,
        multiple: bool = False,
        metavar: str | None = None,
        show_default: bool = True,
    ) -> None:
        self.dest = dest
        self.help = help
        self.flags = flags
        #: "str", "int", "path", "bool", or "module:Enum" (imported only by the typer app)
        self.type = type
        self.default = default
        self.required = required
        #: an argument taking one or more values, or an option that may be repeated
        self.multiple = multiple
        self.metavar = metavar
        self.show_default = show_default

    @property
    def positional(self) -> bool:
        return not self.flags


class Requires:
    """``option`` is refused unless ``needs`` is set too (``--fresh`` needs ``--execute``)."""

    __slots__ = ("option", "needs", "message", "hint")

    def __init__(self, option: str, needs: str, message: str, hint: str) -> None:
        self.option = option
        self.needs = needs
        self.message = message
        self.hint = hint


class EitherWay:
    """One value given as the argument ``positional`` or the option ``option``, not two.

    The handler gets it as ``positional``; the option's own name is not passed on.
    """

    __slots__ = ("positional", "option", "flag", "noun")

    def __init__(self, positional: str, option: str, flag: str, noun: str) -> None:
        self.positional = positional
        self.option = option
        self.flag = flag
        self.noun = noun


Rule = Requires | EitherWay


class Command:
    """A CLI command: its name, help (the first line is the summary), parameters and rules."""

    __slots__ = ("name", "help", "handler", "params", "rules", "hot", "examples")

    def __init__(
        self,
        name: str,
        help: str,
        handler: str,
        params: tuple[Param, ...] = (),
        rules: tuple[Rule, ...] = (),
        *,
        hot: bool = False,
        examples: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.help = help
        #: "module:function", imported when the command runs; it returns the exit code
        self.handler = handler
        self.params = params
        self.rules = rules
        #: parsed by the standard-library fast path too (agents call these in a loop)
        self.hot = hot
        #: command lines shown under "Examples" in the command's help, each with a ``  # why``
        self.examples = examples


def checked(command: Command, values: Mapping[str, Any]) -> dict[str, Any]:
    """The handler's keyword arguments from the parsed ``values``, once the rules hold."""
    out = dict(values)
    for rule in command.rules:
        if isinstance(rule, Requires):
            if out.get(rule.option) and not out.get(rule.needs):
                raise UsageError(rule.message, hint=rule.hint)
        else:
            given, option = out.get(rule.positional), out.pop(rule.option, None)
            if given is not None and option is not None and given != option:
                raise UsageError(
                    f"two {rule.noun}s given: {given!r} and {rule.flag} {option!r}",
                    hint=f"give the {rule.noun} once, as {rule.noun.upper()} or as {rule.flag}",
                )
            out[rule.positional] = given if given is not None else option
    return out


def handler_of(command: Command) -> Callable[..., int]:
    module, _, name = command.handler.partition(":")
    return cast("Callable[..., int]", getattr(importlib.import_module(module), name))


def run_handler(command: Command, values: Mapping[str, Any]) -> int:
    """Check the rules and run the command; its exit code (ipykeep errors propagate)."""
    return handler_of(command)(**checked(command, values))
