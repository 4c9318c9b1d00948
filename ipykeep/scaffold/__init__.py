"""``ipykeep init`` (register ipykeep with coding-agent hosts) and ``ipykeep doctor``.

The typer layer is :mod:`.commands` (``register(app)``); the logic lives in :mod:`.init` and
:mod:`.doctor` as plain functions returning typed results.
"""
