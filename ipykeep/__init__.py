"""ipykeep: a persistent, dataflow-aware Jupyter kernel for coding agents."""

__version__ = "0.1.0"
