"""loop-fuse (sirius/postopt/loop_fuse.py): three projections of one input, fused vertically,
become one loop that loads the input once per iteration; values against the original on the CPU
executor in three orders, counts against the same pipeline without the pass. Kernels whose
threads may communicate are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse, verify
from sirius.postopt import parse_pipeline
from sirius.postopt.loop_fuse import functions_of, unsafe_reason

ORDERS = ("forward", "reverse", "random:3")
WITH = "host-constants,alias-facts,llvm-opt,loop-fuse,llvm-opt{rounds=1}"
WITHOUT = "host-constants,alias-facts,llvm-opt,llvm-opt{rounds=1}"

QKV = r"""
#include <cuda_runtime.h>
#define S 8
#define H 64
__global__ void proj(const float* x, const float* w, float* y)
{
    int o = threadIdx.x, s = blockIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < H; ++k) acc += x[s * H + k] * w[k * H + o];
    y[s * H + o] = acc;
}
int main()
{
    static float h[H * H];
    for (int i = 0; i < H * H; i++) h[i] = 0.125f * (i % 13) - 0.5f;
    float *x, *wq, *wk, *wv, *q, *k, *v;
    cudaMalloc(&x, S * H * sizeof(float));
    cudaMalloc(&wq, H * H * sizeof(float));
    cudaMalloc(&wk, H * H * sizeof(float));
    cudaMalloc(&wv, H * H * sizeof(float));
    cudaMalloc(&q, S * H * sizeof(float));
    cudaMalloc(&k, S * H * sizeof(float));
    cudaMalloc(&v, S * H * sizeof(float));
    cudaMemcpy(x, h, S * H * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(wq, h, H * H * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(wk, h + 1, (H * H - 1) * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(wv, h + 2, (H * H - 2) * sizeof(float), cudaMemcpyHostToDevice);
    proj<<<S, H>>>(x, wq, q);
    proj<<<S, H>>>(x, wk, k);
    proj<<<S, H>>>(x, wv, v);
    cudaMemcpy(h, q, S * H * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, k, S * H * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, v, S * H * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""


def _notes(res) -> list[str]:
    return [n for st in res.postopt for n in st.notes]


@pytest.fixture(scope="module")
def qkv(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("qkv") / "qkv.cu"
    src.write_text(QKV)
    return src


def test_vertical_projections_share_their_input_loads(qkv: Path):
    opts = Options(arrangement="vertical")
    res = fuse([qkv], opts, passes=parse_pipeline(WITH))
    assert res.launches_after == 1
    assert any(n.endswith(": 3 loops -> 1") for n in _notes(res)), \
        _notes(res)
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    base = verify(fuse([qkv], opts, passes=parse_pipeline(WITHOUT)), seed=5, orders=("forward",))
    assert base.ok
    got, was = rep.counters()["fused"], base.counters()["fused"]
    # x[s][k] once per k instead of three times: 2 of 3 loads of x go (8 blocks x 64 threads
    # x 64 k x 4 bytes each)
    assert was["global_load_bytes"] - got["global_load_bytes"] == 2 * 8 * 64 * 64 * 4
    assert got["instructions"] < 0.85 * was["instructions"]


def test_horizontal_fusion_has_no_loops_to_merge(qkv: Path):
    res = fuse([qkv], Options(arrangement="horizontal"), passes=parse_pipeline(WITH))
    assert not [n for n in _notes(res) if n.startswith("loop-fuse")]
    assert verify(res, seed=5, orders=("forward", "reverse")).ok


DECLS = {"llvm.nvvm.barrier.cta.sync.aligned.all": "convergent nocallback nounwind",
         "llvm.nvvm.read.ptx.sreg.tid.x": "nocallback nofree nosync nounwind speculatable "
                                          "willreturn memory(none)",
         "llvm.nvvm.ldu.global.f": "nounwind memory(argmem: read)"}


@pytest.mark.parametrize("line, why", [
    ("  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)",
     "a call to llvm.nvvm.barrier.cta.sync.aligned.all"),
    ("  %v = atomicrmw add ptr %p, i32 1 monotonic, align 4", "atomicrmw"),
    ("  %v = cmpxchg ptr %p, i32 0, i32 1 monotonic monotonic, align 4", "cmpxchg"),
    ("  fence syncscope(\"block\") seq_cst", "fence"),
    ("  %v = load volatile float, ptr %p, align 4", "a volatile access"),
    ("  call void asm sideeffect \"membar.gl;\", \"\"()", "inline asm"),
    ("  %v = call float @helper(float %x)", "a call to helper"),
    ("  %v = call float %fp(float %x)", "an indirect call"),
    ("  %v = call float @llvm.nvvm.ldu.global.f(ptr %p, i32 4)",
     "a call to llvm.nvvm.ldu.global.f"),
])
def test_kernels_whose_threads_may_communicate_are_refused(line: str, why: str):
    assert unsafe_reason([line], DECLS) == why


@pytest.mark.parametrize("line", [
    "  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
    "  %e = call float @__nv_expf(float %x)",
    "  %m = call float @llvm.fmuladd.f32(float %a, float %b, float %c)",
    "  %v = load float, ptr %p, align 4",
])
def test_plain_code_is_not_refused(line: str):
    assert unsafe_reason([line], DECLS) is None


def test_functions_of_finds_every_definition():
    lines = ["define void @a() {", "  ret void", "}", "declare void @b()",
             'define internal ptx_kernel void @"c.d"(ptr %p) #0 {', "e:", "  ret void", "}"]
    assert functions_of(lines) == {"a": (0, 2), "c.d": (4, 7)}
