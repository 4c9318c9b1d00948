"""Checkpoints: each notebook cell's values saved in the background, restored into a new kernel
when they are still fresh, and named checkpoints to roll the namespace back to."""
