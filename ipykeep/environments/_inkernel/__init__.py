"""Code sent into kernels as source text (standard library only; never imports ipykeep)."""
