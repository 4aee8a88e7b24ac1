"""Fusion: where to fuse (planner) and how (code generation of fused kernels on LLVM IR).

`sirius.fusion.codegen.emit.build(device_ir, specs)` generates fused kernels from
`sirius.fusion.spec.FusedKernelSpec`s; docs/fusion-codegen.md describes both.
"""
