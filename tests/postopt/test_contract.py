"""contract (sirius/postopt/contract.py): a temporary that a vertical fusion writes and reads back
in the same thread, and that nothing else reads, loses its stores and its allocation; it is
kept when it is copied back, read by a later launch, read in the next iteration of a host loop,
reached through a pointer table, or when the program copies nothing back. Values against the
original on the CPU executor in three orders."""

from __future__ import annotations

import re
from pathlib import Path

from sirius.analysis.host.model import Alloc, Free, Launch, NullArg
from sirius.fusion.report import report_md
from sirius.pipeline import fuse, verify
from sirius.postopt import parse_pipeline

ORDERS = ("forward", "reverse", "random:3")
BEFORE = "host-constants,alias-facts,llvm-opt"
PIPELINE = BEFORE + ",contract,llvm-opt{rounds=1}"
WITHOUT = BEFORE + ",llvm-opt{rounds=1}"

KERNELS = r"""
#include <cuda_runtime.h>
#define N 1024
__global__ void f(const float* x, float* t, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = x[i] * 2.0f + 1.0f;
}
__global__ void g(const float* t, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = t[i] * t[i] - 3.0f;
}
// reads two elements of t that other threads write: not fused with f at thread width
__global__ void mix(const float* t, float* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = t[(i * 7) % n] + t[(i + 1) % n];
}
__global__ void gather(float** tab, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tab[0][i] + 1.0f;
}
"""

MAIN = r"""
int main()
{
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.25f * (i % 37);
    float *x, *t, *y, *z;
    float** tab;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&t, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMalloc(&z, N * sizeof(float));
    cudaMalloc(&tab, sizeof(float*));
    cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(z, 0, N * sizeof(float));
    cudaMemset(t, 0, N * sizeof(float));
BODY
    cudaMemcpy(h, y, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, z, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(x); cudaFree(t); cudaFree(y); cudaFree(z); cudaFree(tab);
    return 0;
}
"""

CHAIN = "    f<<<8, 128>>>(x, t, N);\n    g<<<8, 128>>>(t, y, N);\n"


def _program(tmp_path: Path, body: str, main: str = MAIN) -> Path:
    src = tmp_path / "p.cu"
    src.write_text(KERNELS + main.replace("BODY", body))
    return src


def _names(host) -> set[str]:
    return {b.name for b in host.buffers}


def _notes(res) -> list[str]:
    return [n for st in res.postopt for n in st.notes]


def _allocs(ops) -> list[str]:
    return [op.buffer for op in ops if isinstance(op, Alloc)]


def test_chain_temporary_is_contracted(tmp_path: Path):
    src = _program(tmp_path, CHAIN)
    res = fuse([src], passes=parse_pipeline(PIPELINE))
    assert res.launches_after == 1
    assert "t" not in _names(res.host) and "t" not in _allocs(res.host.ops)
    assert not any(isinstance(op, Free) and op.address.buffer == "t" for op in res.host.ops)
    launch = next(op for op in res.host.ops if isinstance(op, Launch))
    assert isinstance(launch.args[1], NullArg)  # where t was passed
    assert _notes(res) == [f"contracted t: 4096 bytes no longer allocated, its stores in "
                           f"{launch.mangled} (parameter 1) removed"]
    # the fused kernel stores only y: one store left
    m = re.search(rf"^define [^\n]*@{launch.mangled}\(.*?^}}$", res.device_ir, re.M | re.S)
    assert m is not None and len(re.findall(r"^\s*store ", m.group(0), re.M)) == 1
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    base = verify(fuse([src], passes=parse_pipeline(WITHOUT)), seed=5, orders=("forward",))
    assert base.ok
    got, was = rep.counters()["fused"], base.counters()["fused"]
    assert was["global_store_bytes"] - got["global_store_bytes"] == 4096  # t's 1024 floats
    assert got["global_load_bytes"] == was["global_load_bytes"]
    assert f"  - contract: {_notes(res)[0]}" in report_md(res).splitlines()


def _kept(tmp_path: Path, body: str, main: str = MAIN) -> None:
    res = fuse([_program(tmp_path, body, main)], passes=parse_pipeline(PIPELINE))
    assert "t" in _names(res.host) and "t" in _allocs(res.host.ops)
    assert not [n for n in _notes(res) if n.startswith("contracted t:")], _notes(res)
    rep = verify(res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()


def test_temporary_copied_back_is_kept(tmp_path: Path):
    _kept(tmp_path, CHAIN + "    cudaMemcpy(h, t, N * sizeof(float), cudaMemcpyDeviceToHost);\n")


def test_temporary_read_by_a_later_launch_is_kept(tmp_path: Path):
    res = fuse([_program(tmp_path, CHAIN + "    mix<<<8, 128>>>(t, z, N);\n")],
               passes=parse_pipeline(WITHOUT))
    assert res.launches_after == 2  # mix stays a launch of its own: it reads t from memory
    _kept(tmp_path, CHAIN + "    mix<<<8, 128>>>(t, z, N);\n")


def test_temporary_read_in_the_next_loop_iteration_is_kept(tmp_path: Path):
    # g reads the t that f wrote in the iteration before
    _kept(tmp_path, "    for (int k = 0; k < 3; k++) {\n        g<<<8, 128>>>(t, y, N);\n"
                    "        f<<<8, 128>>>(y, t, N);\n    }\n")


def test_temporary_reached_through_a_pointer_table_is_kept(tmp_path: Path):
    _kept(tmp_path, "    float* ht[1] = {t};\n"
                    "    cudaMemcpy(tab, ht, sizeof(float*), cudaMemcpyHostToDevice);\n"
                    "    f<<<8, 128>>>(x, t, N);\n    gather<<<8, 128>>>(tab, y, N);\n")


def test_nothing_copied_back_contracts_nothing(tmp_path: Path):
    """Without copies back every buffer is the program's result (verify compares them all):
    the pass keeps every one."""
    main = re.sub(r"    cudaMemcpy\(h, [yz],[^\n]*\n", "", MAIN)
    _kept(tmp_path, CHAIN, main)


def test_a_wrong_contraction_would_be_caught(tmp_path: Path, monkeypatch):
    """The temporary that `mix` reads in a later launch contracted anyway (the pass blind to
    that launch, and t left allocated, so that the run reads t's seeded contents instead of
    faulting): the value check of the tests above can fail."""
    from sirius.postopt import contract

    real = contract.buffer_uses
    monkeypatch.setattr(contract, "buffer_uses", lambda host: {
        b: [u for u in us if not (isinstance(u, tuple) and "mix" in u[0])]
        for b, us in real(host).items()})
    monkeypatch.setattr(contract, "rewrite_host", lambda host, gone, nulls: host)
    src = _program(tmp_path, CHAIN + "    mix<<<8, 128>>>(t, z, N);\n")
    res = fuse([src], passes=parse_pipeline(PIPELINE))
    assert _notes(res) and _notes(res)[0].startswith("contracted t:")
    assert not verify(res, seed=5, orders=("forward",)).ok
