"""The ``ipykeep`` console script: the hot commands without typer, everything else through it."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from ipykeep._startup import trim_imports

    trim_imports()  # before nbformat is imported (see _startup)
    from ipykeep.cli.fast import normalize_argv, run

    args = normalize_argv(sys.argv[1:] if argv is None else argv)
    code = run(args)
    if code is not None:
        sys.exit(code)
    from ipykeep.cli.app import main as full_main

    full_main(args)
