"""The daemon process with every collaborator: ``python -m ipykeep.daemon_main --root PROJECT``.

The same as ``python -m ipykeep.core.daemon`` (which the launcher runs today and which hands
over to this composition); once the launcher runs this module, ``core.daemon`` no longer needs
to import the composition root and the import-linter exception for it goes.
"""

from __future__ import annotations

from ipykeep._startup import trim_imports

trim_imports()  # before nbformat is imported (see _startup)

from .composition import compose_for_daemon  # noqa: E402
from .core.daemon import main as run_daemon  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    run_daemon(argv, compose=compose_for_daemon)


if __name__ == "__main__":
    main()
