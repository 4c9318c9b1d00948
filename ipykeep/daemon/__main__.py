"""The daemon process with every collaborator: ``python -m ipykeep.daemon --root PROJECT``.

``client.ensure_daemon`` launches this module. It is the composition root's process entry:
core never imports the services it composes (the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

from ipykeep._startup import trim_imports

trim_imports()  # before nbformat is imported (see _startup)

from ipykeep.daemon.composition import compose_for_daemon  # noqa: E402
from ipykeep.daemon.server import main as run_daemon  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    run_daemon(argv, compose=compose_for_daemon)


if __name__ == "__main__":
    main()
