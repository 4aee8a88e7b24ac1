"""The frontend: clang-22 compiles, verified modules, the compile cache, compile errors."""

from __future__ import annotations

import re

import pytest

from sirius.diagnostics import FrontendError
from sirius.frontend import compile_program

SIMPLE = """
#include <cuda_runtime.h>
__global__ void inc(float* x) { x[threadIdx.x] += 1.0f; }
int main() {
  float* d;
  cudaMalloc(&d, 32 * sizeof(float));
  inc<<<1, 32>>>(d);
  cudaThreadSynchronize();   // removed in CUDA 13: sirius's compatibility header maps it
  cudaFree(d);
  cudaThreadExit();
  return 0;
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(d))
    return d


def test_compiles_device_and_host_modules(tmp_path, cache_dir):
    src = tmp_path / "simple.cu"
    src.write_text(SIMPLE)
    p = compile_program(src)
    assert "target triple = \"nvptx64-nvidia-cuda\"" in p.device_ir
    assert "x86_64" in p.host_ir
    kernels = [f.name for f in p.device_module.functions if not f.is_declaration]
    assert kernels == ["_Z3incPf"]
    assert p.host_module.get_function("main") is not None
    # Old runtime calls compile (mapped to cudaDeviceSynchronize / cudaDeviceReset).
    assert "@cudaDeviceSynchronize" in p.host_ir and "@cudaDeviceReset" in p.host_ir
    # -g: debug locations exist, so diagnostics can name source lines.
    assert re.search(r"!DILocation\(line: 7,", p.host_ir)


def test_arch_selects_target_cpu(tmp_path, cache_dir):
    src = tmp_path / "simple.cu"
    src.write_text(SIMPLE)
    assert '"target-cpu"="sm_90"' in compile_program(src, arch="sm_90").device_ir
    assert '"target-cpu"="sm_80"' in compile_program(src).device_ir
    with pytest.raises(FrontendError, match="bad --arch"):
        compile_program(src, arch="ampere")


def test_second_compile_hits_the_cache(tmp_path, cache_dir):
    src = tmp_path / "simple.cu"
    src.write_text(SIMPLE)
    first = compile_program(src)
    second = compile_program(src)
    assert not first.cache_hit and second.cache_hit
    assert second.device_ir == first.device_ir and second.host_ir == first.host_ir
    assert second.compile_seconds < first.compile_seconds
    # Different flags or arch are different entries.
    assert not compile_program(src, arch="sm_90").cache_hit
    assert not compile_program(src, extra_flags=["-DX=1"]).cache_hit
    assert not compile_program(src, use_cache=False).cache_hit


def test_cache_notices_changed_source_and_headers(tmp_path, cache_dir):
    hdr = tmp_path / "size.h"
    hdr.write_text("#define N 32\n")
    src = tmp_path / "uses_header.cu"
    src.write_text('#include "size.h"\n' + SIMPLE.replace("32 * sizeof", "N * sizeof"))
    assert not compile_program(src).cache_hit
    assert compile_program(src).cache_hit
    hdr.write_text("#define N 64\n")
    p = compile_program(src)
    assert not p.cache_hit and "i64 noundef 256" in p.host_ir
    src.write_text(src.read_text() + "\n// edited\n")
    assert not compile_program(src).cache_hit


def test_compile_error_carries_clang_diagnostics(tmp_path, cache_dir):
    src = tmp_path / "broken.cu"
    src.write_text("__global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n")
    with pytest.raises(FrontendError) as info:
        compile_program(src)
    e = info.value
    assert e.loc is not None and e.loc.line == 2 and e.loc.col == 10
    assert e.loc.file.endswith("broken.cu")
    assert "undeclared identifier 'undefined_name'" in e.message
    assert "broken.cu:2:10: error:" in e.diagnostics
    assert "x[0] = undefined_name;" in e.render()


def test_several_files_are_linked(tmp_path, cache_dir):
    a = tmp_path / "kern.cu"
    a.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    b = tmp_path / "host.cu"
    b.write_text(SIMPLE)
    p = compile_program([a, b])
    names = {f.name for f in p.device_module.functions if not f.is_declaration}
    assert {"_Z5twicePf", "_Z3incPf"} <= names
    assert p.host_module.get_function("main") is not None


def test_missing_file(tmp_path, cache_dir):
    with pytest.raises(FrontendError, match="no such file"):
        compile_program(tmp_path / "nope.cu")
