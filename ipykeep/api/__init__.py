"""The daemon's API, declared once: every RPC method's name, parameters, result and errors.

- ``names``: the method names as constants (standard library only: the thin CLI uses them).
- ``errors``: the registry of error codes -> exception classes that rebuilds errors on the
  client side, whatever modules the client happened to import.
- ``spec``: ``Method`` (name + params model + result type + error codes) and ``Binding``.
- ``kernels``, ``execution``, ``staleness``, ``inspection``, ``serve``: the declarations.
- ``methods``: all of them, by name.

The daemon dispatches through ``Binding``s of these methods (each service lists its own; the
daemon's ``method_table`` gathers them), the client sends their names and params, the MCP
catalog derives each tool from one of them and the CLI calls them by name: ``grep names.EXECUTE`` finds every hop of an ``execute`` call.

Nothing is imported here so that ``ipykeep.api.names`` and ``ipykeep.api.error_codes`` stay cheap.
"""
