"""Names of the C library and LLVM intrinsics the host model knows without modelling them: calls
that only read memory, allocators, and intrinsics that do nothing to the program's values. The
CUDA runtime itself is cudaapi.py."""

from __future__ import annotations

IGNORED_INTRINSICS = ("llvm.lifetime.", "llvm.dbg.", "llvm.assume", "llvm.experimental.noalias",
                      "llvm.stacksave", "llvm.stackrestore", "llvm.invariant.", "llvm.prefetch")

READONLY = {"printf", "fprintf", "puts", "fputs", "putchar", "fputc", "fwrite", "fflush",
            "perror", "strlen", "strcmp", "strncmp", "memcmp", "free", "_ZdlPv", "_ZdaPv",
            "_ZdlPvm", "_ZdaPvm", "cudaGetErrorString", "cudaGetErrorName", "atoi", "atof",
            "strtol", "strtod", "fabs", "fabsf", "sqrt", "sqrtf", "exp", "expf", "tanh",
            "tanhf", "abs", "rand", "srand", "time", "clock"}
ALLOCATORS = {"malloc", "calloc", "realloc", "aligned_alloc", "_Znwm", "_Znam", "valloc"}


def is_readonly(name: str) -> bool:
    return name in READONLY


def is_allocator(name: str) -> bool:
    return name in ALLOCATORS
