"""Kernel facts (analysis/kernel/facts.py) on small CUDA programs, with values derived by hand."""

from __future__ import annotations

import json
from pathlib import Path

import llvmlite.binding as llvm
import pytest

from sirius.analysis.irtypes import type_align, type_size
from sirius.analysis.irview import build_view
from sirius.analysis.kernel.facts import KernelInfo, kernel_infos, kernel_to_json
from sirius.frontend.compile import compile_program


def kernels(tmp_path: Path, source: str, flags: list[str] | None = None) -> dict[str, KernelInfo]:
    """Kernel facts of `source`; the device flags ask for full debug info (parameter types)."""
    path = tmp_path / "k.cu"
    path.write_text(source)
    program = compile_program(path, extra_flags=flags)
    return {k.name: k for k in kernel_infos(build_view(program.device_module))}


def test_params_names_and_launch_bounds(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
extern "C" __global__ void __launch_bounds__(256, 2)
saxpy(const float *x, float *__restrict__ y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <int N> __global__ void __launch_bounds__(128) scale(float *x) { x[threadIdx.x] *= N; }
template __global__ void scale<4>(float *);
__device__ void not_a_kernel(float *x) { x[0] = 1; }
__global__ void plain(double *d) { d[0] = 1; }
""")
    assert list(ks) == ["saxpy", "scale<4>", "plain"]  # module order, only ptx_kernel functions
    saxpy = ks["saxpy"]
    assert saxpy.mangled == "saxpy"  # extern "C": no mangling
    assert (Path(saxpy.loc.file).name, saxpy.loc.line) == ("k.cu", 2)
    assert [(p.name, p.type, p.ir_type) for p in saxpy.params] == [
        ("x", "const float *", "ptr"), ("y", "float *__restrict__", "ptr"),
        ("n", "int", "i32"), ("a", "float", "float")]
    assert saxpy.launch_bounds == (256, 2)
    assert ks["scale<4>"].mangled == "_Z5scaleILi4EEvPf"
    assert ks["scale<4>"].launch_bounds == (128, None)  # no min-blocks argument
    assert ks["plain"].launch_bounds is None
    assert [(p.name, p.type, p.ir_type) for p in ks["plain"].params] == [("d", "double *", "ptr")]


def test_params_without_full_debug_info(tmp_path: Path) -> None:
    # Line tables only (what plain -g gives optimized device code; the last -debug-info-kind
    # wins): names still come from the IR (-fno-discard-value-names), types are "".
    ks = kernels(tmp_path, "__global__ void k(float *out, int n) { out[n] = 0; }\n",
                 flags=["-Xclang", "-debug-info-kind=line-directives-only"])
    assert [(p.name, p.type, p.ir_type) for p in ks["k"].params] == [
        ("out", "", "ptr"), ("n", "", "i32")]
    assert ks["k"].loc.line == 1


def test_shared_memory_and_barriers(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
__global__ void transpose(const float *in, float *out) {
    __shared__ float a[16][16];  // 16*16*4 = 1024 bytes
    __shared__ float b[16][17];  // 16*17*4 = 1088 bytes
    int x = threadIdx.x, y = threadIdx.y;
    a[y][x] = in[y * 16 + x];
    b[y][x] = in[256 + y * 16 + x];
    __syncthreads();
    out[y * 16 + x] = a[x][y] + b[x][y];
    __syncthreads();
    a[y][x] = 0;
}
__device__ __noinline__ void stage(float *p) {
    __shared__ float buf[32];  // 128 bytes, referenced only in this device function
    buf[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = buf[31 - threadIdx.x];
}
__global__ void with_helper(float *p) {
    extern __shared__ float dyn[];  // dynamic: size given at launch, counts 0
    dyn[threadIdx.x] = p[threadIdx.x];
    int c = __syncthreads_count(p[threadIdx.x] > 0);  // a barrier too
    stage(p);
    stage(p + 32);  // two calls, but the barrier inside `stage` is one call site
    __syncwarp();   // a warp op, not a block barrier
    p[threadIdx.x] += c + dyn[31 - threadIdx.x];
}
""")
    t = ks["transpose"]
    assert t.shared_arrays == (("a", 1024), ("b", 1088))
    assert t.static_smem_bytes == 2112
    assert not t.dynamic_smem
    assert t.barriers == 2
    h = ks["with_helper"]
    assert h.shared_arrays == (("buf", 128), ("dyn", 0))
    assert h.static_smem_bytes == 128
    assert h.dynamic_smem
    # __syncthreads_count in the kernel + __syncthreads in the (non-inlined) helper.
    assert h.barriers == 2
    assert h.calls == ("_Z5stagePf",)
    assert dict(h.warp_ops) == {"syncwarp": 1}


def test_warp_ops(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
__global__ void reduce(float *x, int n) {
    float v = x[threadIdx.x];
    // off = 16, 8, 4, 2, 1: fully unrolled, so the IR holds 5 shfl.sync.down call sites.
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffff, v, off);
    // Not unrolled: one call site however many times the loop runs.
    #pragma unroll 1
    for (int i = 0; i < n; ++i) v += __shfl_xor_sync(0xffffffff, v, i);
    unsigned b = __ballot_sync(__activemask(), v > 0);
    x[threadIdx.x] = v + b + __shfl_sync(0xffffffff, v, 0);
}
""")
    assert dict(ks["reduce"].warp_ops) == {
        "shfl.sync.down": 5, "shfl.sync.bfly": 1, "shfl.sync.idx": 1,
        "vote.ballot": 1, "activemask": 1}
    assert ks["reduce"].barriers == 0


def test_atomics(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
__device__ int hits;
__device__ int misses;
__global__ void count(float *out, int *flags) {
    __shared__ int block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    atomicAdd(&block_count, 1);  // shared variable: addrspace(3)
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&hits, block_count);  // __device__ variables: addrspace(1)
        atomicAdd(&misses, 1);
        atomicCAS(&hits, 0, 1);
    }
    atomicAdd(out, 1.0f);  // a kernel parameter is a generic pointer in the IR
}
""")
    assert dict(ks["count"].atomics) == {
        "atomicrmw add shared": 1, "atomicrmw add global": 2, "cmpxchg global": 1,
        "atomicrmw fadd generic": 1}
    assert ks["count"].shared_arrays == (("block_count", 4),)


def test_inline_asm_and_textures(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
__global__ void lane_ids(int *out) {
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    out[threadIdx.x] = lane;
}
__global__ void fetch(cudaTextureObject_t t, float *out) {
    out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}
""")
    # clang rewrites operand %0 to $0 and %% to % in the IR's asm string.
    assert ks["lane_ids"].inline_asm == ("mov.u32 $0, %laneid;",)
    assert not ks["lane_ids"].textures
    # clang's CUDA headers implement tex1Dfetch as inline PTX `tex.1d...`, not an intrinsic.
    f = ks["fetch"]
    assert f.textures
    assert any(a.startswith("tex.1d") for a in f.inline_asm)
    assert [(p.name, p.type, p.ir_type) for p in f.params][0] == ("t", "cudaTextureObject_t", "i64")


def test_calls_libdevice_indirect_and_recursion(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
#include <cstdio>
// Not a tail call (two recursive calls are added), so -O2 cannot turn it into a loop.
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ float twice(float x) { return 2 * x; }
__device__ float (*op)(float) = twice;
__global__ void busy(float *x, int n) {
    float v = expf(x[0]) + fib(n);
    v = op(v);  // loaded from a global: an indirect call
    printf("%f\\n", v);
    x[0] = v;
}
__global__ void simple(float *x) { x[0] = sqrtf(x[1]); }
""")
    b = ks["busy"]
    assert b.calls == ("_Z3fibi", "vprintf")  # twice is only reached indirectly
    assert b.libdevice == ("__nv_expf",)
    assert b.indirect_calls == 1
    assert b.recursive
    s = ks["simple"]
    assert (s.calls, s.libdevice, s.indirect_calls, s.recursive) == ((), ("__nv_sqrtf",), 0, False)


def test_json(tmp_path: Path) -> None:
    ks = kernels(tmp_path, """\
__global__ void __launch_bounds__(64, 4) k(float *x) {
    __shared__ float s[64];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    atomicAdd(&s[0], 1.0f);
    x[threadIdx.x] = s[63 - threadIdx.x];
}
""")
    doc = json.loads(json.dumps(kernel_to_json(ks["k"])))
    assert doc["name"] == "k" and doc["mangled"] == "_Z1kPf"
    assert doc["loc"].endswith("k.cu:1")
    assert doc["params"] == [{"name": "x", "type": "float *", "ir_type": "ptr"}]
    assert doc["launch_bounds"] == {"max_threads": 64, "min_blocks": 4}
    assert (doc["static_smem_bytes"], doc["dynamic_smem"]) == (256, False)
    assert doc["shared_arrays"] == [{"name": "s", "bytes": 256}]
    assert doc["barriers"] == 1
    assert doc["atomics"] == {"atomicrmw fadd shared": 1}
    assert doc["warp_ops"] == {} and doc["inline_asm"] == [] and doc["textures"] is False
    assert (doc["calls"], doc["libdevice"], doc["indirect_calls"], doc["recursive"]) == (
        [], [], 0, False)


NVPTX_LAYOUT = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
TYPES = ["i1", "i8", "i16", "i24", "i32", "i48", "i64", "i128", "half", "bfloat", "float",
         "double", "ptr", "ptr addrspace(3)", "ptr addrspace(6)", "[16 x [17 x float]]",
         "{ i8, double }", "<{ i8, double }>", "{ i8, [3 x i16] }", "<4 x float>", "<3 x float>",
         "<2 x half>", "%struct.S", "[2 x %struct.S]", "{}", "{ i8, { i32, i8 } }", "[0 x float]"]


@pytest.mark.parametrize("ty", TYPES)
def test_type_size_matches_llvm(ty: str) -> None:
    structs = {"%struct.S": "{ float, i8, i64 }"}
    module = llvm.parse_assembly(
        f'target datalayout = "{NVPTX_LAYOUT}"\n%struct.S = type {structs["%struct.S"]}\n'
        f"@g = global {ty} zeroinitializer\n")
    td = llvm.create_target_data(NVPTX_LAYOUT)
    vt = module.get_global_variable("g").global_value_type
    assert (type_size(ty, structs), type_align(ty, structs)) == (
        td.get_abi_size(vt), td.get_abi_alignment(vt))
