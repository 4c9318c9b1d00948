"""What every typer command shares: the ``--json`` and notebook options, and error reporting.

Each layer's commands (``cli``, ``serve.commands``, ``scaffold.commands``) declare their
options from here, so a notebook is spelled ``[NOTEBOOK]`` / ``-n, --notebook NOTEBOOK`` with the
same help everywhere, and an ipykeep error prints the same two lines (``cli_fast.report_error``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from ipykeep.api.errors import IpykeepError, UsageError
from ipykeep.cli.fast import NOTEBOOK_HELP, report_error

#: For ``start`` and ``init``, where the notebook is the one to bind rather than a kernel to use.
BIND_HELP = "Notebook to bind (default: `notebook` from ipykeep.toml)."


def json_option(help: str = "Print compact JSON.") -> Any:
    return typer.Option(False, "--json", help=help)


def notebook_option(help: str = NOTEBOOK_HELP) -> Any:
    return typer.Option(None, "--notebook", "-n", metavar="NOTEBOOK", help=help)


def notebook_argument(help: str = NOTEBOOK_HELP) -> Any:
    return typer.Argument(None, help=help, show_default=False)


_N = TypeVar("_N")


def pick_notebook(positional: _N | None, option: _N | None) -> _N | None:
    """The notebook given either way (``ipykeep status nb.ipynb`` or ``ipykeep status -n nb.ipynb``)."""
    if positional is not None and option is not None and positional != option:
        raise UsageError(
            f"two notebooks given: {positional!r} and --notebook {option!r}",
            hint="give the notebook once, as NOTEBOOK or as --notebook",
        )
    return positional if positional is not None else option


def fail(exc: IpykeepError) -> typer.Exit:
    """Print ``exc`` as every command does; the ``typer.Exit`` to raise with its exit code."""
    return typer.Exit(report_error(exc))


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ipykeep errors into their message, hint and exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except IpykeepError as exc:
            raise fail(exc) from None

    return wrapper
