"""host-constants (sirius/postopt/host_constants.py): the program with the pass against the
original on the CPU executor (forward, reverse, random orders), clones per distinct constants,
and fewer executed instructions."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sirius.analysis.host.model import HostProgram
from sirius.analysis.program import analyse
from sirius.backend import compile_ir
from sirius.postopt import LlvmOpt, PassContext, run_pipeline
from sirius.postopt.host_constants import CLONE, HostConstants, scalar_constant
from sirius.verify.differential import verify_fused

SRC = r"""
#include <cuda_runtime.h>
#define N 1000
__global__ void scale(float* x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * s + 1.0f;
}
int main()
{
    float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.001f * i;
    float* d;
    cudaMalloc(&d, N * sizeof(float));
    cudaMemcpy(d, h, N * sizeof(float), cudaMemcpyHostToDevice);
    scale<<<8, 128>>>(d, 0.5f, N);
    scale<<<8, 128>>>(d, 2.0f, N);
    for (int t = 0; t < 3; t++)
        scale<<<8, 128>>>(d, 1.5f, N - 100 * t);
    cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return 0;
}
"""


@dataclasses.dataclass(frozen=True)
class Original:
    program: object
    kernels: tuple
    host: HostProgram


@dataclasses.dataclass(frozen=True)
class Optimized:
    device_ir: str
    host: HostProgram


def test_clones_per_constant_and_same_values(tmp_path: Path):
    src = tmp_path / "scale.cu"
    src.write_text(SRC)
    program, kernels, host = analyse([src])
    ctx = PassContext(host_program=host, source=str(src))
    r = run_pipeline(program.device_ir, (HostConstants(), LlvmOpt()), ctx)
    base = run_pipeline(program.device_ir, (LlvmOpt(),), ctx)
    names = [op.mangled for op in r.host_program.launches()]
    k = host.launches()[0].mangled
    # three configurations: s = 0.5, s = 2.0 (both n = 1000), s = 1.5 with n from the loop
    assert names == [k, f"{k}{CLONE}1", f"{k}{CLONE}2"]
    assert re.search(rf"define .*ptx_kernel void @{re.escape(k + CLONE)}2\(", r.text)
    compile_ir(r.text, "sm_80")  # PTX and ptxas take the clones (a dot in an .entry name: no)
    orig = Original(program, tuple(kernels), host)
    rep = verify_fused(orig, Optimized(r.text, r.host_program), seed=3,
                       orders=("forward", "reverse", "random:5"))
    assert rep.ok, rep.render()
    ref = verify_fused(orig, Optimized(base.text, host), seed=3, orders=("forward",))
    assert ref.ok
    with_pass, without = rep.fused_counters, ref.fused_counters
    assert with_pass is not None and without is not None
    assert with_pass.launches == without.launches == 5
    assert with_pass.instructions < without.instructions
    assert with_pass.global_bytes == without.global_bytes


def test_max_clones_keeps_only_what_all_launches_agree_on(tmp_path: Path):
    src = tmp_path / "scale.cu"
    src.write_text(SRC)
    program, kernels, host = analyse([src])
    ctx = PassContext(host_program=host)
    r = run_pipeline(program.device_ir, (HostConstants(max_clones=2),), ctx)
    assert [op.mangled for op in r.host_program.launches()] == \
        [op.mangled for op in host.launches()]
    assert CLONE not in r.text
    # n and s differ between launches; blockDim 128 is common to all
    assert "add i32 128, 0" in r.text and "sreg.ntid.x()," not in r.text
    rep = verify_fused(Original(program, tuple(kernels), host), Optimized(r.text, host),
                       seed=3, orders=("forward",))
    assert rep.ok, rep.render()


def test_scalar_constants():
    from sirius.analysis.expr import Expr
    from sirius.analysis.host.model import NullArg, ScalarArg

    assert scalar_constant(ScalarArg("i32", Expr(-1)), "i32") == "i32 -1"
    assert scalar_constant(ScalarArg("i8", Expr(255)), "i8") == "i8 -1"
    assert scalar_constant(ScalarArg("float", 0.1), "float") == "float 0x3FB99999A0000000"
    assert scalar_constant(ScalarArg("double", 0.1), "double") == "double 0x3FB999999999999A"
    assert scalar_constant(ScalarArg("i32", Expr.var("t")), "i32") is None
    assert scalar_constant(ScalarArg("i64", Expr(1)), "i32") is None  # types disagree
    assert scalar_constant(NullArg(), "ptr") == "ptr null"
    assert scalar_constant(ScalarArg("half", 1.0), "half") is None
