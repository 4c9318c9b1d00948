"""The debugger: post-mortem frames, breakpoints and stepping, replay from a checkpoint."""
