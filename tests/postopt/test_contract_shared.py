"""contract-shared (sirius/postopt/contract_shared.py): a temporary that a vertical fusion writes
and reads back within each block (a BLOCK width dependence: threads read what other threads
of their block wrote, after a barrier), and that nothing else touches, moves into the block's
shared memory and loses its allocation. Kept when it is copied back, read by a later launch,
read before the block writes it (a memset's values), or too big; values against the original
on the CPU executor in three orders."""

from __future__ import annotations

from pathlib import Path

from sirius.analysis.host.model import Alloc, Launch, NullArg
from sirius.fusion.report import report_md
from sirius.pipeline import fuse, verify
from sirius.postopt import parse_pipeline

ORDERS = ("forward", "reverse", "random:3")
BEFORE = "host-constants,alias-facts,llvm-opt,contract"
PIPELINE = BEFORE + ",contract-shared,llvm-opt{rounds=1}"
WITHOUT = BEFORE + ",llvm-opt{rounds=1}"

KERNELS = r"""
#include <cuda_runtime.h>
#define N 4096
#define B 256
__global__ void produce(const float* x, float* t)
{
    int i = blockIdx.x * B + threadIdx.x;
    t[i] = x[i] * 2.0f + 1.0f;
}
// reads the element another thread of the block wrote: a BLOCK width dependence on produce
__global__ void consume(const float* t, float* y)
{
    int i = blockIdx.x * B + threadIdx.x;
    y[i] = t[blockIdx.x * B + (B - 1 - threadIdx.x)] + 0.5f * t[i];
}
// reads t before writing it: what the memset (or an earlier launch) left
__global__ void scale(const float* x, float* t)
{
    int i = blockIdx.x * B + threadIdx.x;
    t[i] = t[i] * x[i] + 1.0f;
}
__global__ void twice(const float* t, float* z)
{
    int i = blockIdx.x * B + threadIdx.x;
    z[i] = 2.0f * t[i];
}
"""

MAIN = r"""
int main()
{
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.25f * (i % 37);
    float *x, *t, *y, *z;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&t, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMalloc(&z, N * sizeof(float));
    cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(t, 0, N * sizeof(float));
    cudaMemset(z, 0, N * sizeof(float));
BODY
    cudaMemcpy(h, y, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, z, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(x); cudaFree(t); cudaFree(y); cudaFree(z);
    return 0;
}
"""

CHAIN = "    produce<<<N / B, B>>>(x, t);\n    consume<<<N / B, B>>>(t, y);\n"


def _program(tmp_path: Path, body: str) -> Path:
    src = tmp_path / "p.cu"
    src.write_text(KERNELS + MAIN.replace("BODY", body))
    return src


def _notes(res) -> list[str]:
    return [n for st in res.postopt for n in st.notes]


def test_a_block_temporary_moves_to_shared_memory(tmp_path: Path):
    """produce -> consume fuse vertically (a barrier between); t (16 KiB) leaves the host
    program, each block keeps its 1 KiB of it in shared memory, every value matches, and the
    global bytes fall by t's traffic (a store and two loads of each element)."""
    src = _program(tmp_path, CHAIN)
    res = fuse([src], passes=parse_pipeline(PIPELINE))
    assert res.launches_after == 1
    assert "t" not in {b.name for b in res.host.buffers}
    assert "t" not in [op.buffer for op in res.host.ops if isinstance(op, Alloc)]
    launch = next(op for op in res.host.ops if isinstance(op, Launch))
    assert isinstance(launch.args[1], NullArg)
    assert _notes(res) == [f"contracted t into shared memory: 16384 bytes no longer allocated; "
                           f"{launch.mangled} keeps each block's 1024 bytes of it in shared "
                           "memory (parameters 1)"]
    assert "addrspace(3) global [1024 x i8]" in res.device_ir
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    base = verify(fuse([src], passes=parse_pipeline(WITHOUT)), seed=5, orders=("forward",))
    assert base.ok
    got, was = rep.counters()["fused"], base.counters()["fused"]
    assert was["global_store_bytes"] - got["global_store_bytes"] == 16384
    assert was["global_load_bytes"] - got["global_load_bytes"] == 2 * 16384
    assert got["shared_bytes"] - was["shared_bytes"] == 3 * 16384
    assert f"  - contract-shared: {_notes(res)[0]}" in report_md(res).splitlines()


def _kept(tmp_path: Path, body: str) -> None:
    res = fuse([_program(tmp_path, body)], passes=parse_pipeline(PIPELINE))
    assert res.launches_after < res.launches_before  # fused: the pass had something to look at
    assert "t" in {b.name for b in res.host.buffers}, _notes(res)
    assert not [n for n in _notes(res) if n.startswith("contracted t")]
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()


def test_a_temporary_copied_back_is_kept(tmp_path: Path):
    _kept(tmp_path, CHAIN + "    cudaMemcpy(h, t, N * sizeof(float), cudaMemcpyDeviceToHost);\n")


def test_a_temporary_a_later_launch_reads_is_kept(tmp_path: Path):
    _kept(tmp_path, CHAIN + "    cudaDeviceSynchronize();\n    cudaMemcpy(h, y, 4, "
          "cudaMemcpyDeviceToHost);\n    twice<<<N / B, B>>>(t, z);\n")


def test_a_temporary_read_before_the_block_writes_it_is_kept(tmp_path: Path):
    """scale reads t[i] (the memset's zeros) before it writes it: in shared memory that read
    would see whatever the block's shared memory held."""
    _kept(tmp_path, "    scale<<<N / B, B>>>(x, t);\n    consume<<<N / B, B>>>(t, y);\n")


def test_a_wrong_contraction_would_be_caught(tmp_path: Path, monkeypatch):
    """scale -> consume contracted anyway (the order check blind: every barrier taken as
    separating the writes from the reads): the value check of the tests above fails."""
    from sirius.postopt import contract_shared

    monkeypatch.setattr(contract_shared, "_ordered", lambda *a: True)
    res = fuse([_program(tmp_path, "    scale<<<N / B, B>>>(x, t);\n"
                                    "    consume<<<N / B, B>>>(t, y);\n")],
               passes=parse_pipeline(PIPELINE))
    assert _notes(res) and _notes(res)[0].startswith("contracted t into shared memory")
    assert not verify(res, seed=5, orders=("forward",)).ok


def test_a_slice_over_the_limit_is_kept(tmp_path: Path):
    res = fuse([_program(tmp_path, CHAIN)],
               passes=parse_pipeline(BEFORE + ",contract-shared{limit=512},llvm-opt{rounds=1}"))
    assert "t" in {b.name for b in res.host.buffers} and not _notes(res)


def test_a_kernel_that_loads_a_pointer_reads_every_launch(tmp_path: Path, monkeypatch):
    """The fused kernel also reads through a pointer it loads from a host-filled table: the
    effect builder over the candidate kernels alone cannot resolve it, so the pass asks the
    builder over every launch (the points-to analysis), and t still moves to shared memory,
    every value as the original's."""
    src = tmp_path / "p.cu"
    src.write_text(KERNELS + r"""
__global__ void consume_tab(const float* t, float* y, float* const* tab)
{
    int i = blockIdx.x * B + threadIdx.x;
    y[i] = t[blockIdx.x * B + (B - 1 - threadIdx.x)] + tab[0][i];
}
int main()
{
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.25f * (i % 37);
    float *x, *t, *y, *w, *z;
    float **tab;
    cudaMalloc(&z, N * sizeof(float));
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&t, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMalloc(&w, N * sizeof(float));
    cudaMalloc(&tab, sizeof(float*));
    float* htab[1] = {w};
    cudaMemcpy(tab, htab, sizeof(htab), cudaMemcpyHostToDevice);
    cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(w, h, N * sizeof(float), cudaMemcpyHostToDevice);
    produce<<<N / B, B>>>(x, t);
    consume_tab<<<N / B, B>>>(t, y, tab);
    cudaMemcpy(h, y, N * sizeof(float), cudaMemcpyDeviceToHost);
    twice<<<N / B, B>>>(x, z);  // another launched kernel, after the copy: not fused
    cudaMemcpy(h, z, N * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
""")
    from sirius.postopt import contract_shared

    wholes = []
    real = contract_shared._Effects._builder

    def spy(self, kernels):
        wholes.append(set(kernels))
        return real(self, kernels)

    monkeypatch.setattr(contract_shared._Effects, "_builder", spy)
    res = fuse([src], passes=parse_pipeline(PIPELINE))
    assert res.launches_after == 2
    assert len(wholes) == 2 and wholes[0] < wholes[1], wholes  # the candidates, then all
    assert "t" not in {b.name for b in res.host.buffers}, _notes(res)
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
