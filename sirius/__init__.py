"""sirius: a whole-program CUDA kernel-fusion compiler (after SIRIUS, MLSys 2023)."""

__version__ = "0.1.0"
