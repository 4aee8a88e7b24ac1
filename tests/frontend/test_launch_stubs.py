"""The host side keeps each kernel's launch stub a function of its own (`-finline-hint-functions`,
docs/host-model.md "Launch stubs"): written-out launches call it instead of each holding a copy,
and the host model follows the calls, every launch with its own arguments and location."""

from __future__ import annotations

import re

from sirius.analysis.host.extract import extract_host_program
from sirius.analysis.host.model import Launch
from sirius.analysis.irview import build_view
from sirius.frontend import compile_program

PROGRAM = """#include <cuda_runtime.h>
#include <vector>
__global__ void scale(float *a, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
__global__ void shift(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.0f; }
int main() {
  std::vector<float> h(4096, 1.0f);
  int n = (int)h.size();
  float *a; cudaMalloc(&a, n * 4);
  cudaMemcpy(a, h.data(), n * 4, cudaMemcpyHostToDevice);
  scale<<<n / 256, 256>>>(a, 2.0f, n);
  shift<<<8, 256>>>(a + 2048, 2048);
  scale<<<4, 256>>>(a + 1024, 3.0f, 1024);
  scale<<<2, 256>>>(a, 0.5f, 512);
  cudaMemcpy(h.data(), a, n * 4, cudaMemcpyDeviceToHost);
  return 0;
}
"""


def test_stubs_are_called_not_copied_and_every_launch_is_modelled(tmp_path, monkeypatch):
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "stubs.cu"
    src.write_text(PROGRAM)
    prog = compile_program(src)
    host_ir = prog.host_ir
    stub = re.search(r"^define [^\n]*@(\w*__device_stub__\w*scale\w*)\(", host_ir, re.M)
    assert stub is not None, "the stub of `scale` is not a function of the host module"
    main = re.search(r"^define [^\n]*@main\(.*?^}", host_ir, re.M | re.S).group(0)
    assert len(re.findall(rf"(?:call|invoke) [^\n]*@{stub.group(1)}\(", main)) == 3
    assert "cudaLaunchKernel" not in main  # only the stubs launch
    # std::vector's members (implicitly inline) are still inlined: n is the constant 4096
    host = extract_host_program(build_view(prog.host_module), build_view(prog.device_module),
                                "main")
    launches = [op for op in host.ops if isinstance(op, Launch)]
    assert [op.mangled for op in launches] == \
        ["_Z5scalePffi", "_Z5shiftPfi", "_Z5scalePffi", "_Z5scalePffi"]
    assert [op.grid[0].const for op in launches] == [16, 8, 4, 2]
    offsets = [str(op.args[0].address.offset) for op in launches]
    assert offsets == ["0", "8192", "4096", "0"]
    assert [str(op.args[-1].value) for op in launches] == ["4096", "2048", "1024", "512"]
    assert [op.loc.line for op in launches] == [12, 13, 14, 15]
