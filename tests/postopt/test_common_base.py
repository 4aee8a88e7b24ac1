"""common-base (sirius/postopt/common_base.py): two pointers into one buffer at a constant
distance become one base plus an offset; values against the original on the CPU executor
(three orders), and the PTX loads the second pointer's data at an immediate offset of the
first instead of loading a second parameter."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sirius.analysis.host.model import HostProgram
from sirius.analysis.program import analyse
from sirius.backend import compile_ir
from sirius.postopt import LlvmOpt, PassContext, run_pipeline
from sirius.postopt.common_base import SUFFIX, CommonBase
from sirius.verify.differential import verify_fused

SRC = r"""
#include <cuda_runtime.h>
#define N 1000
__global__ void add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] * 2.0f + b[i];
}
int main()
{
    static float h[3 * N];
    for (int i = 0; i < 3 * N; i++) h[i] = 0.001f * i;
    float *d, *o;
    cudaMalloc(&d, 3 * N * sizeof(float));
    cudaMalloc(&o, 2 * N * sizeof(float));
    cudaMemcpy(d, h, 3 * N * sizeof(float), cudaMemcpyHostToDevice);
    add<<<8, 128>>>(d, d + N, o, N);
    add<<<8, 128>>>(d + N, d + 2 * N, o + N, N);
    cudaMemcpy(h, o, 2 * N * sizeof(float), cudaMemcpyDeviceToHost);
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


def test_one_base_same_values_immediate_offsets(tmp_path: Path):
    src = tmp_path / "add.cu"
    src.write_text(SRC)
    program, kernels, host = analyse([src])
    ctx = PassContext(host_program=host, source=str(src))
    with_pass = run_pipeline(program.device_ir, (CommonBase(), LlvmOpt()), ctx).text
    without = run_pipeline(program.device_ir, (LlvmOpt(),), ctx).text
    k = host.launches()[0].mangled
    assert f"@{k}{SUFFIX}" in run_pipeline(program.device_ir, (CommonBase(),), ctx).text
    rep = verify_fused(Original(program, tuple(kernels), host), Optimized(with_pass, host),
                       seed=4, orders=("forward", "reverse", "random:2"))
    assert rep.ok, rep.render()
    assert rep.fused_counters is not None and rep.original_counters is not None
    assert rep.fused_counters.global_bytes == rep.original_counters.global_bytes
    ptx_with, ptx_without = (compile_ir(t, "sm_80")[0].text for t in (with_pass, without))
    # b is a + 4000 bytes: a and out are loaded, b not; b[i] is [rd + 4000]
    assert ptx_with.count("ld.param.b64") == ptx_without.count("ld.param.b64") - 1 == 2
    assert re.search(r"ld\.global[.\w]*\s+%\w+, \[%rd\d+\+4000\]", ptx_with)
    assert not re.search(r"\+4000\]", ptx_without)
