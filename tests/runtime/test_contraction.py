"""The GPU's multiply-add contraction modelled in the IR (sirius/runtime/cpu/contraction.py): the
rules on small functions, and a whole program whose executor run with the model equals, bit for
bit, an independent numpy model of FMA arithmetic, where the plain executor (every operation
rounded on its own) does not."""

from __future__ import annotations

import numpy as np
import pytest

from sirius.frontend import llvmctx
from sirius.runtime.cpu.contraction import contracted, like_nvptx
from tests.helpers import KERNELS

FN = """define float @f(float %x, float %y, float %z, float %w, i1 %c) {
entry:
  %m = fmul contract float %x, %y
  %a = fadd contract float %m, %z
  %b = fadd contract float %z, %m
  %s1 = fsub contract float %m, %z
  %s2 = fsub contract float %z, %m
  %p = fmul float %x, %w
  %n = fadd contract float %p, %z
  %q = fadd float %m, %w
  br i1 %c, label %other, label %done
other:
  %r = fadd contract float %m, %w
  br label %done
done:
  %v = phi float [ %a, %entry ], [ %r, %other ]
  ret float %v
}
"""


def _line(text: str, name: str) -> str:
    return next(ln.strip() for ln in text.splitlines() if ln.strip().startswith(f"%{name} ="))


def test_the_rules_on_one_function() -> None:
    out = like_nvptx(FN)
    llvmctx.parse(out)  # still a valid module
    assert _line(out, "a") == "%a = call contract float @llvm.fma.f32(float %x, float %y, float %z)"
    assert _line(out, "b") == "%b = call contract float @llvm.fma.f32(float %x, float %y, float %z)"
    # (x * y) - z = fma(x, y, -z); z - (x * y) = fma(-x, y, z)
    assert _line(out, "s1.neg") == "%s1.neg = fneg float %z"
    assert _line(out, "s1").endswith("(float %x, float %y, float %s1.neg)")
    assert _line(out, "s2.neg") == "%s2.neg = fneg float %x"
    assert _line(out, "s2").endswith("(float %s2.neg, float %y, float %z)")
    # not contracted: a multiply without `contract`, an add without it, another block's multiply
    assert _line(out, "n") == "%n = fadd contract float %p, %z"
    assert _line(out, "q") == "%q = fadd float %m, %w"
    assert _line(out, "r") == "%r = fadd contract float %m, %w"
    assert _line(out, "m") == "%m = fmul contract float %x, %y"  # kept for its other uses
    assert out.count("declare float @llvm.fma.f32(float, float, float)") == 1


def test_two_multiplies_the_one_with_fewer_uses() -> None:
    ir = """define float @g(float %x, float %y, float %u, float %v) {
entry:
  %m1 = fmul contract float %x, %y
  %m2 = fmul contract float %u, %v
  %t = fadd contract float %m1, %m2
  %e = fadd contract float %m1, %m2
  %k = fadd float %m1, %t
  %l = fadd float %k, %e
  ret float %l
}
"""
    out = like_nvptx(ir)
    llvmctx.parse(out)
    # %m1 has three uses, %m2 two: the add takes %m2 into the FMA
    assert _line(out, "t").endswith("(float %u, float %v, float %m1)")


def test_double_and_vector_types() -> None:
    ir = """define <2 x double> @h(<2 x double> %x, <2 x double> %y, double %a, double %b) {
entry:
  %m = fmul fast <2 x double> %x, %y
  %s = fadd fast <2 x double> %m, %x
  %d = fmul contract double %a, %b
  %e = fsub contract double %d, 1.000000e+00
  ret <2 x double> %s
}
"""
    out = like_nvptx(ir)
    llvmctx.parse(out)
    assert "@llvm.fma.v2f64(<2 x double> %x, <2 x double> %y, <2 x double> %x)" in out
    assert "%e.neg = fneg double 1.000000e+00" in out and "@llvm.fma.f64(" in out


@pytest.fixture(scope="module")
def two_mm():
    from sirius.analysis.program import analyse
    from sirius.runtime.cpu.device import CpuDevice
    from sirius.runtime.interpreter import run_host_program

    p, kernels, host = analyse([KERNELS / "two_mm.cu"])
    return {mode: run_host_program(host, prog, kernels, CpuDevice(progress=False), seed=3)
            for mode, prog in (("plain", p), ("nvptx", contracted(p)))}


def _numpy_2mm(initial: dict, fma: bool) -> np.ndarray:
    """PolyBench 2mm as two_mm.cu computes it, in float32, each multiply-add fused (rounded
    once, through float64, where the product of two floats is exact) or not."""
    f32, f64 = np.float32, np.float64
    a = initial["d_A"].reshape(32, 48)
    b = initial["d_B"].reshape(48, 40)
    c = initial["d_C"].reshape(40, 36)
    alpha, beta = f32(1.5), f32(1.2)

    def madd(x, y, acc):
        if fma:
            return (x.astype(f64) * y.astype(f64) + acc).astype(f32)
        return (x * y).astype(f32) + acc

    tmp = np.zeros((32, 40), f32)
    for k in range(48):
        tmp = madd((alpha * a[:, k])[:, None], b[k][None, :], tmp)
    acc = (initial["d_D"].reshape(32, 36) * beta).astype(f32)
    for j in range(40):
        acc = madd(tmp[:, j:j + 1], c[j][None, :], acc)
    return acc.ravel()


def test_a_program_rounds_like_fused_multiply_adds(two_mm) -> None:
    plain, nvptx = two_mm["plain"], two_mm["nvptx"]
    assert plain.initial["d_A"].tobytes() == nvptx.initial["d_A"].tobytes()
    with_fma = _numpy_2mm(nvptx.initial, fma=True)
    without = _numpy_2mm(plain.initial, fma=False)
    assert nvptx.final["d_D"].tobytes() == with_fma.tobytes()
    assert plain.final["d_D"].tobytes() == without.tobytes()
    assert (with_fma != without).sum() > 100  # the two roundings do differ on this program
