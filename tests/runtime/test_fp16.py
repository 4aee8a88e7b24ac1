"""fp16 programs on the CPU executor: cuda_fp16.h's inline PTX lifted to LLVM IR
(sirius/runtime/cpu/ptxlift.py) gives the values numpy's float16 gives, and TVM's fp16 prelude
compiles with no extra flags (sirius/frontend/toolchain.py, `prelude_flags`)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from sirius.diagnostics import FrontendError
from sirius.frontend.compile import compile_program
from sirius.frontend.toolchain import cuda_version, prelude_flags, toolchain
from sirius.runtime.cpu import ptxlift
from tests.runtime.execsupport import run

N = 256


def edge_halves(seed: int) -> np.ndarray:
    """Random halves with edge values mixed in: zeros, subnormals, max normal, infinities, NaN,
    values whose sum or product rounds at a tie."""
    r = np.random.default_rng(seed)
    v = (r.standard_normal(N) * 4).astype(np.float16)
    edges = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
                      0x7E00, 0x3C00, 0x3C01, 0x4000, 0x6400], np.uint16).view(np.float16)
    v[r.choice(N, len(edges), replace=False)] = edges
    return v


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_half_program_matches_numpy_float16(order: str) -> None:
    x, y = edge_halves(1), edge_halves(2)
    r = np.random.default_rng(3)
    f = (r.standard_normal(N) * 1000).astype(np.float32)
    f[:6] = [65519.0, 65520.0, 1e-8, 2.0 ** -25, 3 * 2.0 ** -25, np.nan]
    res = run("programs/fp16_ops.cu", order=order, inputs={"d_x": x, "d_y": y, "d_f": f})
    out = res.final["d_out"].reshape(8, N)
    assert out.dtype == np.float16
    lane = np.arange(N) ^ 1
    with np.errstate(all="ignore"):
        want = np.stack([x + y, x * y, x - y, -np.abs(x), _hmax(x, y), f.astype(np.float16),
                         (x < y).astype(np.float16), x[lane] + y[lane]])
    for k, name in enumerate(["hadd", "hmul", "hsub", "hneg(habs)", "hmax", "float2half",
                              "hlt", "shuffled hadd"]):
        got, ref = out[k], want[k]
        same = (got.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(got) & np.isnan(ref))
        assert same.all(), f"{name}: {np.flatnonzero(~same)[:5]} {got[~same][:5]} {ref[~same][:5]}"
    g = res.final["d_g"]
    ref = x.astype(np.float32) + y.astype(np.float32)
    assert ((g == ref) | (np.isnan(g) & np.isnan(ref))).all()
    assert [s.stats.mode for s in res.launches] == ["loops"]  # the shuffle: a work-item loop


def _hmax(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """PTX max.f16: the number if one input is NaN; +0 > -0."""
    m = np.fmax(x, y)
    zeros = (x == 0) & (y == 0)
    return np.where(zeros, np.where(np.signbit(x) & np.signbit(y), x, np.float16(0)), m)


def test_lifted_asm_keeps_the_instruction_counts() -> None:
    """An asm call counts as one instruction, as in the original IR: the lifted bodies are not
    counted. Every thread runs every block of half_ops but one of the two arms of `hlt ? 1 : 0`
    (blocks of equal size)."""
    res = run("programs/fp16_ops.cu")
    program = compile_program(Path(__file__).parent / "programs" / "fp16_ops.cu")
    kernel = next(part for part in program.device_ir.split("\ndefine ")
                  if "half_ops" in part.split("(")[0])
    blocks: dict[str, int] = {}
    label = "entry"
    for ln in kernel.splitlines()[1:]:
        if m := re.match(r"([\w.]+):", ln):
            label = m.group(1)
        elif ln.startswith("  ") and not ln.strip().startswith(("#dbg_", ";")):
            blocks[label] = blocks.get(label, 0) + 1
    asm_calls = sum(1 for ln in kernel.splitlines() if " asm " in ln)
    assert ptxlift.lift(program.device_ir).lifted == asm_calls > 10
    assert blocks["cond.true"] == blocks["cond.false"]
    per_thread = sum(blocks.values()) - blocks["cond.false"]
    assert res.launches[0].stats.instructions == N * per_thread


def test_tvm_prelude_gets_the_toolkit_version(tmp_path: Path) -> None:
    """TVM's fp16 prelude compiles as it is: without nvcc's version macros it would define its
    own htanh, a redefinition of CUDA 13's."""
    src = tmp_path / "tvm_prelude.cu"
    src.write_text(PRELUDE)
    tc = toolchain()
    major, minor = cuda_version(tc.cuda_path)
    flags = prelude_flags(tc, PRELUDE, [])
    assert flags == [f"-D__CUDACC_VER_MAJOR__={major}", f"-D__CUDACC_VER_MINOR__={minor}"]
    assert prelude_flags(tc, PRELUDE, ["-D__CUDACC_VER_MAJOR__=12"]) == []
    assert prelude_flags(tc, "__global__ void k() {}", []) == []
    program = compile_program(src, use_cache=False)
    assert "tanh_kernel" in program.device_ir
    if (major, minor) >= (12, 8):  # without the macros: htanh defined twice
        with pytest.raises(FrontendError, match="htanh"):
            compile_program(src, extra_flags=["-U__CUDACC_VER_MAJOR__"], use_cache=False)


# The part of TVM 0.27's CUDA prelude that depends on the toolkit version, and a kernel using it.
PRELUDE = r"""
#include <cuda_fp16.h>
#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}
#if defined(__CUDA_ARCH__)
#if (__CUDA_ARCH__ >= 530)
#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && (__CUDACC_VER_MINOR__ < 8)))
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
#endif
#endif
#endif
extern "C" __global__ void __launch_bounds__(64) tanh_kernel(half* __restrict__ y,
                                                             half* __restrict__ x) {
  y[threadIdx.x] = htanh(x[threadIdx.x]);
}
"""
