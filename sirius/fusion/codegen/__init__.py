"""Code generation of fused kernels on LLVM IR (fragments, assembly, IR text)."""
