"""The daemon's API, declared once: every RPC method's name, parameters, result and errors.

- ``names``: the method names as constants (standard library only: the thin CLI uses them).
- ``errors``: the one error tree; ``error_codes``: the registry of codes -> classes that
  rebuilds errors on the client side, whatever modules the client happened to import.
- ``spec``: ``Method`` (name + params model + result type + error codes) and ``Binding``.
- ``kernels``, ``execution``, ``staleness``, ``editing``, ``inspection``, ``serve``,
  ``checkpoints``, ``environments``, ``debugger``: the declarations; ``records``,
  ``summaries``: the result models they share; ``bounding``: the one rule that cuts long text.
- ``methods``: all of them, by name.

The daemon dispatches through ``Binding``s of these methods (each service lists its own; the
daemon's ``method_table`` gathers them), the client sends their names and params, the MCP
catalog derives each tool from one of them and the CLI calls them by name:
``grep names.EXECUTE`` finds every hop of an ``execute`` call.

The public surface is these modules (the ``__all__`` below, pinned by
``tests/api/test_exported_members.py``); nothing is imported here so that ``ipykeep.api.names``
and ``ipykeep.api.error_codes`` stay cheap.
"""

__all__ = [
    "bounding",
    "checkpoints",
    "debugger",
    "editing",
    "environments",
    "error_codes",
    "errors",
    "execution",
    "inspection",
    "kernels",
    "methods",
    "names",
    "records",
    "serve",
    "spec",
    "staleness",
    "summaries",
]
