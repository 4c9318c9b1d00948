"""ipykeep: a persistent, dataflow-aware Jupyter kernel for coding agents."""

__all__ = ["__version__"]

__version__ = "0.1.0"
