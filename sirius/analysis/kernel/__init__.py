"""Kernel access analysis: affine values over LLVM IR, isl access relations, kernel facts."""
