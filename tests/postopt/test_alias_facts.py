"""alias-facts (sirius/postopt/alias_facts.py): `noalias` where the host model proves two pointer
arguments disjoint (distinct buffers, or disjoint ranges of one buffer), nothing where the ranges
of one buffer overlap or a kernel reads through a pointer table, and values against the original
on the CPU executor in three orders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sirius.pipeline import fuse, verify
from sirius.postopt import parse_pipeline

ORDERS = ("forward", "reverse", "random:3")
HEAD = "#include <cuda_runtime.h>\n#define N 1024\n"

# Every program also launches `bump` on a buffer of its own: the two launches are independent
# and fuse horizontally into one kernel (sirius_h0) with the parameters of both.
BUMP = r"""
__global__ void bump(float* e, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) e[i] = e[i] * 0.5f + 1.0f;
}
"""

# out = x[i + 16] read twice around a store through y: if y is x + 16 the second read sees the
# store (y[i] is x[i + 16]); a wrong noalias lets LLVM reuse the first read.
TWICE = r"""
__global__ void twice(float* x, float* y, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = x[i + 16];
        y[i] = 1.0f;
        out[i] = x[i + 16] + s;
    }
}
"""

MAIN = r"""
int main()
{
    static float h[3 * N];
    for (int i = 0; i < 3 * N; i++) h[i] = 0.25f * (i % 37);
    float *d, *o, *e;
    cudaMalloc(&d, 3 * N * sizeof(float));
    cudaMalloc(&o, N * sizeof(float));
    cudaMalloc(&e, N * sizeof(float));
    cudaMemcpy(d, h, 3 * N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(e, h, N * sizeof(float), cudaMemcpyHostToDevice);
    LAUNCHES
    bump<<<8, 128>>>(e, N);
    cudaMemcpy(h, o, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h + N, d, 2 * N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, e, N * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""


def _program(tmp_path: Path, kernels: str, launches: str, name: str = "p.cu") -> Path:
    src = tmp_path / name
    src.write_text(HEAD + kernels + BUMP + MAIN.replace("LAUNCHES", launches))
    return src


def _noalias(ir: str, kernel: str = "sirius_h0") -> dict[str, bool]:
    """Per parameter of a kernel in a module's text, by name: whether it is noalias."""
    m = re.search(rf"^define [^\n]*ptx_kernel void @{kernel}\((.*)\)[^\n]*{{$", ir, re.M)
    assert m is not None, kernel
    return {p.split()[-1].lstrip("%"): "noalias" in p for p in m.group(1).split(", ")}


def _fused(src: Path, pipeline: str):
    res = fuse([src], passes=parse_pipeline(pipeline))
    assert res.launches_after == 1  # twice (or gather) and bump in one kernel, sirius_h0
    return res


def test_distinct_buffers_get_noalias(tmp_path: Path):
    src = _program(tmp_path, TWICE, "twice<<<8, 128>>>(d, d + 2 * N, o, N);")
    flags = _noalias(_fused(src, "alias-facts").device_ir)
    assert flags == {"x": True, "y": True, "out": True, "n": False, "e": True}


def test_overlapping_views_of_one_buffer_get_nothing_and_verify(tmp_path: Path):
    src = _program(tmp_path, TWICE, "twice<<<8, 128>>>(d, d + 16, o, N);")
    flags = _noalias(_fused(src, "alias-facts").device_ir)
    assert flags == {"x": False, "y": False, "out": True, "n": False, "e": True}
    res = _fused(src, "alias-facts,llvm-opt")
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()


def test_a_wrong_noalias_would_be_caught(tmp_path: Path):
    """The program above with noalias forced onto every pointer computes something else: the
    value check of the previous test can fail."""
    from sirius.postopt import alias_facts

    src = _program(tmp_path, TWICE, "twice<<<8, 128>>>(d, d + 16, o, N);")
    real = alias_facts.noalias_params
    try:
        alias_facts.noalias_params = lambda view, an, info, ops: (  # type: ignore[assignment]
            {i for i, p in enumerate(info.params) if p.ir_type == "ptr"}, "")
        res = _fused(src, "alias-facts,llvm-opt")
    finally:
        alias_facts.noalias_params = real
    assert all(v for k, v in _noalias(res.device_ir).items() if k != "n")
    assert not verify(res, seed=5, orders=("forward",)).ok


def test_disjoint_views_of_one_buffer_get_noalias(tmp_path: Path):
    # x reads bytes [64, 4N + 64) of d, y writes [4N + 64, 8N + 64): disjoint
    src = _program(tmp_path, TWICE, "twice<<<8, 128>>>(d, d + N + 16, o, N);")
    flags = _noalias(_fused(src, "alias-facts").device_ir)
    assert flags["x"] and flags["y"]


def test_views_one_element_too_close_get_nothing(tmp_path: Path):
    # one element closer than above: byte 4N + 60 is read through x and written through y
    src = _program(tmp_path, TWICE, "twice<<<8, 128>>>(d, d + N + 15, o, N);")
    flags = _noalias(_fused(src, "alias-facts").device_ir)
    assert not flags["x"] and not flags["y"] and flags["out"]


TABLE = r"""
__global__ void gather(float** tab, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tab[i % 2][i] + 1.0f;
}
"""

TABLE_MAIN = r"""
int main()
{
    static float h[2 * N];
    for (int i = 0; i < 2 * N; i++) h[i] = 0.5f * (i % 11);
    float *d, *o;
    float** t;
    cudaMalloc(&d, 2 * N * sizeof(float));
    cudaMalloc(&o, N * sizeof(float));
    cudaMalloc(&t, 2 * sizeof(float*));
    cudaMemcpy(d, h, 2 * N * sizeof(float), cudaMemcpyHostToDevice);
    float* ht[2] = {d, d + N};
    cudaMemcpy(t, ht, 2 * sizeof(float*), cudaMemcpyHostToDevice);
    float* e;
    cudaMalloc(&e, N * sizeof(float));
    cudaMemcpy(e, h, N * sizeof(float), cudaMemcpyHostToDevice);
    gather<<<8, 128>>>(t, o, N);
    bump<<<8, 128>>>(e, N);
    cudaMemcpy(h, o, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, e, N * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""


def test_pointer_table_gets_nothing(tmp_path: Path):
    src = tmp_path / "table.cu"
    src.write_text(HEAD + TABLE + BUMP + TABLE_MAIN)
    res = _fused(src, "alias-facts,llvm-opt")
    flags = _noalias(_fused(src, "alias-facts").device_ir)
    assert flags == {"tab": False, "out": False, "n": False, "e": False}
    rep = verify(res, seed=5, orders=("forward",))
    assert rep.ok, rep.render()


CHAIN = r"""
__global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
__global__ void mix(const float* x, const float* y, float* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = x[i] * y[i] + x[i];
}
"""


@pytest.mark.slow
def test_fused_program_verifies_and_loads_less(tmp_path: Path):
    """Two launches fused vertically: x is read by both fragments; with noalias the second read
    of x[i] reuses the first one (the store to y[i] in between cannot touch it)."""
    src = _program(tmp_path, CHAIN, "scale<<<8, 128>>>(d, d + N, N);\n"
                   "    mix<<<8, 128>>>(d, d + N, o, N);")
    with_pass = fuse([src], passes=parse_pipeline("host-constants,alias-facts,llvm-opt"))
    without = fuse([src], passes=parse_pipeline("host-constants,llvm-opt"))
    assert with_pass.launches_after < 3
    # the fused kernels the host launches (one taken into another is no longer in the module)
    launched = [k for k in with_pass.fused
                if re.search(rf"ptx_kernel void @{k.name}\(", with_pass.device_ir)]
    assert launched and any(any(_noalias(with_pass.device_ir, k.name).values())
                            for k in launched)
    rep = verify(with_pass, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    ref = verify(without, seed=5, orders=("forward",))
    assert ref.ok, ref.render()
    assert rep.fused_counters is not None and ref.fused_counters is not None
    assert rep.fused_counters.global_load_bytes < ref.fused_counters.global_load_bytes
