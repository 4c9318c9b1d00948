"""Environments: which Python environment a kernel runs in, and adding packages to it.

``discovery.py`` finds the project's environment (the order is in docs/environments.md),
``installer.py`` runs the one installer (``_inkernel/envtools.py``) with an environment's
interpreter or inside a running kernel, ``service.py`` serves ``add_packages`` and gives each
kernel the in-kernel ``import_path``.
"""
