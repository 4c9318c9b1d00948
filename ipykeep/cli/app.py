"""The typer app, built from the command table: help, argument errors, completion, every command."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ipykeep.api.errors import IpykeepError
from ipykeep.cli.commands import APP_HELP, COMMANDS, ROOT_PARAMS
from ipykeep.cli.declare import Command, Param, run_handler
from ipykeep.cli.output import echo, report_error, version_line

_TYPES: dict[str, type] = {"str": str, "int": int, "path": Path, "bool": bool}


def _type_of(param: Param) -> type:
    if param.type in _TYPES:
        return _TYPES[param.type]
    module, _, name = param.type.partition(":")
    kind: type = getattr(importlib.import_module(module), name)
    return kind


def _typer_parameter(param: Param, **extra: Any) -> inspect.Parameter:
    """``param`` as a typer function parameter: its annotation and ``typer.Option``/``Argument``."""
    kind = _type_of(param)
    annotation: Any = list[kind] if param.multiple else kind  # type: ignore[valid-type]
    default = param.default
    if default is not None and not isinstance(default, kind) and not param.multiple:
        default = kind(default)  # an enum's value, declared without importing the enum
    if default is None and not param.required:
        annotation = annotation | None
    first = ... if param.required else default
    info = (
        typer.Argument(
            first, help=param.help, metavar=param.metavar, show_default=param.show_default
        )
        if param.positional
        else typer.Option(
            first,
            *param.flags,
            help=param.help,
            metavar=param.metavar,
            show_default=param.show_default,
            **extra,
        )
    )
    return inspect.Parameter(
        param.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=info, annotation=annotation
    )


def _with_signature(fn: Any, parameters: list[inspect.Parameter], doc: str | None) -> None:
    # typer reads a callback's parameters from its signature and type hints.
    fn.__signature__ = inspect.Signature(parameters)
    fn.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    fn.__doc__ = doc


def typer_callback(command: Command) -> Any:
    """A typer callback for ``command``: the table's rules and handler, errors as the CLI prints
    them, the handler's exit code as the process's."""

    def callback(**values: Any) -> None:
        try:
            code = run_handler(command, values)
        except IpykeepError as exc:
            raise typer.Exit(report_error(exc)) from None
        if code:
            raise typer.Exit(code)

    callback.__name__ = callback.__qualname__ = command.name.replace("-", "_")
    _with_signature(callback, [_typer_parameter(p) for p in command.params], command.help)
    return callback


def examples_epilog(command: Command) -> str | None:
    """The command's examples as its help's epilog, one per line as written."""
    if not command.examples:
        return None
    # One line each (kept under 80 columns in the table): the help renderer keeps line breaks.
    return "Examples:\n" + "\n".join(f"  $ {line}" for line in command.examples)


def _show_version(value: bool) -> None:
    if value:
        echo(version_line())
        raise typer.Exit()


def _as_flags(params: Any) -> Any:
    # click (vendored by typer) shows a flag with a ``<bool>`` placeholder, as if it took a value
    for param in params:
        if getattr(param, "is_flag", False) and not param.metavar:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> Any:
        return _as_flags(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> Any:
        return _as_flags(super().get_params(ctx))


def build_app() -> typer.Typer:
    """The ``ipykeep`` typer app with every command of the table."""
    app = typer.Typer(
        name="ipykeep",
        help=APP_HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        cls=_Group,
    )

    def root(**values: Any) -> None:
        # Global options only: a --json here was moved after the command's name (normalize_argv).
        del values

    version, as_json = ROOT_PARAMS
    _with_signature(
        root,
        [
            _typer_parameter(version, callback=_show_version, is_eager=True),
            _typer_parameter(as_json),
        ],
        None,
    )
    app.callback()(root)
    for command in COMMANDS:
        app.command(command.name, cls=_Command, epilog=examples_epilog(command))(
            typer_callback(command)
        )
    return app


def main(args: list[str]) -> None:
    """Run the typer app on ``args`` (already normalized); exits with the command's code."""
    build_app()(args=args, prog_name="ipykeep")
