"""contract-shared at THREAD width (sirius/postopt/contract_shared.py): a temporary that each
thread of a fused kernel writes and then reads back itself, with no barrier in between (a
transpose re-indexed into its producer's threads, whose addresses LLVM cannot match, so
`contract` keeps the loads), moves into shared memory. Here two producer -> transpose pairs
fuse into one horizontal kernel (LLVM merges the members' identical tails, the temporaries'
pointers meeting in a phi): both temporaries move, every value as the original's in three
orders, global bytes down by exactly their traffic. Kept where a thread reads bytes no thread
of the launch writes; contracting it anyway would be caught by verify. Slices that need a
per-block base move only with `thread=on`."""

from __future__ import annotations

from pathlib import Path

from sirius.pipeline import fuse, verify
from sirius.postopt import parse_pipeline

ORDERS = ("forward", "reverse", "random:3")
BEFORE = "host-constants,alias-facts,llvm-opt,contract"
PIPELINE = BEFORE + ",contract-shared,llvm-opt{rounds=1}"
WITHOUT = BEFORE + ",llvm-opt{rounds=1}"
EVERYWHERE = BEFORE + ",contract-shared{thread=on},llvm-opt{rounds=1}"
ROOT = Path(__file__).resolve().parents[2]

PAIRS = r"""
#include <cuda_runtime.h>
#define R 32
#define C 64
// one block of 128 threads; each thread writes 16 consecutive elements of t (R x C, row-major)
__global__ void produce(const float* x, const float* w, float* t)
{
    __shared__ float s[128];
    int tx = threadIdx.x;
    s[tx] = x[tx];
    __syncthreads();
    for (int j = 0; j < 16; j++)
        t[tx * 16 + j] = s[(tx + j) % 128] * w[j] + (float)j;
}
// y (C x R) = t^T, one element a thread
__global__ void transpose(const float* t, float* y)
{
    int i = blockIdx.x * 1024 + threadIdx.x;
    y[i] = t[(i % R) * C + i / R];
}
int main()
{
    static float h[R * C];
    for (int i = 0; i < R * C; i++) h[i] = 0.125f * (i % 29) - 1.0f;
    float *x, *w, *t1, *t2, *y1, *y2;
    cudaMalloc(&x, 128 * sizeof(float));
    cudaMalloc(&w, 17 * sizeof(float));
    cudaMalloc(&t1, R * C * sizeof(float));
    cudaMalloc(&t2, R * C * sizeof(float));
    cudaMalloc(&y1, R * C * sizeof(float));
    cudaMalloc(&y2, R * C * sizeof(float));
    cudaMemcpy(x, h, 128 * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(w, h + 200, 17 * sizeof(float), cudaMemcpyHostToDevice);
    produce<<<1, 128>>>(x, w, t1);
    transpose<<<2, 1024>>>(t1, y1);
    produce<<<1, 128>>>(x, w + 1, t2);
    transpose<<<2, 1024>>>(t2, y2);
    cudaMemcpy(h, y1, R * C * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, y2, R * C * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""

# half writes the first half of t; other reads it and the second half, which only the
# memset wrote
HALVES = r"""
#include <cuda_runtime.h>
#define N 2048
__global__ void half(const float* x, float* t)
{
    int i = blockIdx.x * 256 + threadIdx.x;
    t[i] = 2.0f * x[i];
}
__global__ void other(const float* t, float* y)
{
    int i = blockIdx.x * 256 + threadIdx.x;
    y[i] = t[i] + t[N / 2 + i];
}
int main()
{
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.5f * (i % 13);
    float *x, *t, *y;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&t, N * sizeof(float));
    cudaMalloc(&y, N / 2 * sizeof(float));
    cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(t, 0x3f, N * sizeof(float));
    half<<<N / 2 / 256, 256>>>(x, t);
    other<<<N / 2 / 256, 256>>>(t, y);
    cudaMemcpy(h, y, N / 2 * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""


def _fuse(tmp_path: Path, text: str, pipeline: str = PIPELINE):
    src = tmp_path / "p.cu"
    src.write_text(text)
    return fuse([src], passes=parse_pipeline(pipeline))


def _notes(res) -> list[str]:
    return [n for st in res.postopt for n in st.notes]


def test_transposed_temporaries_move_to_shared_memory(tmp_path: Path):
    res = _fuse(tmp_path, PAIRS)
    assert res.launches_after == 1
    kernel = res.host.launches()[0].mangled
    assert _notes(res) == [
        f"contracted {t} into shared memory: 8192 bytes no longer allocated; {kernel} keeps "
        f"each block's 8192 bytes of it in shared memory (parameters {j})"
        for t, j in (("t1", 2), ("t2", 5))]
    assert not {"t1", "t2"} & {b.name for b in res.host.buffers}
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    base = verify(_fuse(tmp_path, PAIRS, WITHOUT), seed=5, orders=("forward",))
    assert base.ok
    got, was = rep.counters()["fused"], base.counters()["fused"]
    # each temporary: 2048 floats stored once and loaded once, now in shared memory
    assert was["global_store_bytes"] - got["global_store_bytes"] == 2 * 8192
    assert was["global_load_bytes"] - got["global_load_bytes"] == 2 * 8192
    assert got["shared_bytes"] - was["shared_bytes"] == 2 * 2 * 8192


def test_without_the_thread_order_the_temporaries_stay(tmp_path: Path, monkeypatch):
    """The same program with the THREAD width path closed: nothing moves (no barrier orders
    the writes before the reads), so the path above is what moved them."""
    from sirius.postopt import contract_shared

    monkeypatch.setattr(contract_shared, "_stores_first", lambda *a: False)
    res = _fuse(tmp_path, PAIRS)
    assert not _notes(res) and {"t1", "t2"} <= {b.name for b in res.host.buffers}


def test_a_read_of_bytes_no_thread_writes_is_kept(tmp_path: Path):
    res = _fuse(tmp_path, HALVES, EVERYWHERE)
    assert res.launches_after == 1
    assert "t" in {b.name for b in res.host.buffers} and not _notes(res)
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()


def test_a_wrong_contraction_would_be_caught(tmp_path: Path, monkeypatch):
    """The ownership check blinded: t moves to shared memory though `other` reads what only
    the memset wrote, and verify reports the wrong values."""
    from sirius.postopt import contract_shared

    monkeypatch.setattr(contract_shared, "_own_bytes", lambda *a: None)
    res = _fuse(tmp_path, HALVES, EVERYWHERE)
    assert _notes(res) and _notes(res)[0].startswith("contracted t into shared memory")
    assert not verify(res, seed=5, orders=("forward",)).ok


def test_per_block_slices_only_when_asked():
    """elementwise_chain's temporaries are each thread's own, in 32 blocks: each block's slice
    needs its base computed from the block index (instructions added), so the default
    (`thread=free`) leaves them, and `thread=on` moves them, every value as the original's."""
    src = ROOT / "kernels" / "elementwise_chain.cu"
    assert not _notes(fuse([src], passes=parse_pipeline(PIPELINE)))
    res = fuse([src], passes=parse_pipeline(EVERYWHERE))
    assert _notes(res) and all(n.startswith("contracted ") for n in _notes(res))
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
