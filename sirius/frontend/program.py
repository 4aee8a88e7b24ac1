"""`Program`: a whole CUDA program as two verified LLVM modules (device NVPTX, host x86-64)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import llvmlite.binding as llvm


@dataclass(frozen=True)
class Program:
    files: tuple[Path, ...]
    arch: str
    device_ir: str
    host_ir: str
    cache_hit: bool = False
    compile_seconds: float = 0.0
    device_module: llvm.ModuleRef = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    host_module: llvm.ModuleRef = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    @property
    def name(self) -> str:
        return self.files[0].stem
