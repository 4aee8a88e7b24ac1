"""Static SASS instruction counts (sirius/backend/sass.py): the listing parser on a fixed
nvdisasm listing, and ptxas + nvdisasm on a small kernel (no GPU needed)."""

from __future__ import annotations

import pytest

from sirius.backend.ptx import emit_ptx
from sirius.backend.ptxas import find_ptxas
from sirius.backend.sass import count_sass, find_nvdisasm, sass_counts
from sirius.diagnostics import ToolchainError

LISTING = """\
\t.target\tsm_80

//--------------------- .text._Z1kPf            --------------------------
\t.section\t.text._Z1kPf,"ax",@progbits
_Z1kPf:
.text._Z1kPf:
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/              @!P0 LDG.E R2, [R2.64] ;
        /*0030*/                   EXIT ;
.L_x_0:
        /*0040*/                   BRA `(.L_x_0) ;
        /*0050*/                   NOP;
        /*0060*/                   NOP;

//--------------------- .text.other              --------------------------
other:
        /*0000*/                   NOP;
        /*0010*/                   RET.REL.NODEC R20 `(k) ;
        /*0020*/                   NOP;
"""


def test_counts_instructions_per_function_without_trailing_nops():
    # a NOP inside the code counts; the padding after the last instruction does not
    assert count_sass(LISTING) == {"_Z1kPf": 5, "other": 2}


IR = """
target triple = "nvptx64-nvidia-cuda"
define ptx_kernel void @scale(ptr %x) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %t to i64
  %p = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %p, align 4
  %w = fmul float %v, 3.0
  store float %w, ptr %p, align 4
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
"""


def test_sass_of_a_small_kernel():
    try:
        find_ptxas(), find_nvdisasm()
    except ToolchainError as e:
        pytest.skip(str(e))
    counts = sass_counts(emit_ptx(IR, "sm_80").text, "sm_80")
    # a load, a multiply, a store, the thread id and address arithmetic: a handful of
    # instructions, not zero and not hundreds
    assert set(counts) == {"scale"} and 4 <= counts["scale"] <= 20
