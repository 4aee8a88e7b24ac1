"""`llvm-opt{level=3,rounds=2}`: LLVM's default optimization pipeline on the NVPTX target machine.

The last step of fused-kernel code generation (docs/fusion-codegen.md, "Optimize"). It runs
`default<O{level}>` with the module's architecture (`PassContext.arch`) and PTX version, as
`rounds` separate runs: on a fused module the first round inlines the fragments and merges their
now-identical guards, and only a second round's GVN sees the merged blocks (the elementwise
chain: a load after a store to the same element in the same thread is forwarded only then,
global loads 81920 -> 49152 bytes, dynamic instructions 167168 -> 138240). Level 0 runs only
LLVM's global dead-code elimination (unused internal functions vanish).

Refused: a module for another target (its `target triple` is not NVPTX).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import llvmlite.binding as llvm

from sirius.backend.ptx import optimize, ptx_version_for, target_machine
from sirius.postopt.base import ModulePass, PassContext, PassInput, require_device, verify_ir

__all__ = ["LlvmOpt"]

@dataclass(frozen=True, slots=True)
class LlvmOpt(ModulePass):
    """LLVM's default<O{level}> pipeline for NVPTX, `rounds` times (verified after each)."""

    name: ClassVar[str] = "llvm-opt"
    level: Literal[0, 1, 2, 3] = 3
    rounds: int = 2

    def __post_init__(self) -> None:
        if self.level not in (0, 1, 2, 3):
            raise ValueError(f"level must be 0, 1, 2 or 3, not {self.level}")
        if not 1 <= self.rounds <= 8:
            raise ValueError(f"rounds must be between 1 and 8, not {self.rounds}")

    def run(self, module: PassInput, ctx: PassContext) -> llvm.ModuleRef:
        require_device(module.text, self.name, ctx.source,
                       "runs LLVM's pipeline for NVPTX and ")
        tm = target_machine(ctx.arch, ptx_version_for(module.text, ctx.arch))
        mod = module.parse()
        for i in range(self.rounds):
            optimize(mod, tm, self.level)
            if i + 1 < self.rounds:
                verify_ir(mod, f"the module after round {i + 1} of {self}", ctx.source)
        return mod
