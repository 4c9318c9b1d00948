"""The layers that extend the engine (staleness, inspection, serving), installed in the daemon.

A plugin is an object with optional hooks the engine calls (``kernel_started``,
``after_cell``, ``after_scratch``, ``kernel_restarted``, ``kernel_lost``,
``kernel_closing``, ``foreign_message``, ``stale_reasons``), optional ``cell_expressions`` and
``scratch_expressions`` returning probe expressions evaluated with each execution (their results
are in ``Execution.expression_results``), and an optional ``rpc_methods()``
returning extra engine methods to expose over RPC.
"""

from __future__ import annotations

from .engine import Engine


def install_plugins(engine: Engine) -> None:
    """Attach every layer to ``engine`` (idempotent)."""
    if engine.plugins:
        return
    from ..serve.plugin import ServePlugin
    from .inspection_layer import InspectionLayer
    from .staleness_layer import StalenessLayer

    from ..checkpoints.layer import CheckpointLayer

    # CheckpointLayer reads what StalenessLayer recorded for a cell: it comes after it
    engine.plugins.extend([StalenessLayer(engine), InspectionLayer(engine), ServePlugin(engine), CheckpointLayer(engine)])
