"""Serving ipykeep's kernels to JupyterLab, Notebook 7 and IDEs (``--serve``, ``publish``).

The daemon starts one Jupyter server per project on demand (``launcher``); inside it, a kernel
manager adopts the daemon's running kernels from their connection files (``kernels``) instead
of starting its own, and a small set-up step (``server``) registers sessions and guards the
REST endpoints. ``service`` is the engine collaborator that ties it together. Nothing here imports
Jupyter server packages at module level except the modules that only run inside the server
process (``kernels``, ``server``): the core install works without the ``serve`` extra.
"""
