"""Precompiled headers (sirius/frontend/pch.py): the same code as without them, the same
diagnostics, and a damaged header costs only time."""

from __future__ import annotations

import re

import pytest

from sirius.diagnostics import FrontendError
from sirius.frontend import compile_program
from sirius.frontend.toolchain import toolchain

pytestmark = pytest.mark.xdist_group("pch")

PROGRAM = """#include <cuda_runtime.h>
#include <cstdio>
__global__ void k(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = sqrtf(a[i]) + 1.0f;
}
int main() {
  float *a; cudaMalloc(&a, 4096 * 4);
  k<<<16, 256>>>(a, 4096);
  cudaDeviceSynchronize();
  printf("done\\n");
  cudaFree(a); return 0;
}
"""


@pytest.fixture(autouse=True, scope="module")
def own_cache(tmp_path_factory):
    """A cache (and so a pch/ directory) of these tests' own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIRIUS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        toolchain.cache_clear()
        yield
        toolchain.cache_clear()


def _pch_dir():
    return toolchain().private_include.parent / "pch"


def _code(ir: str) -> list[str]:
    """The IR without metadata lines and with metadata numbers erased: what the program does."""
    return [re.sub(r"!\d+", "!N", ln) for ln in ir.splitlines() if not ln.startswith("!")]


def test_same_code_with_and_without(tmp_path, monkeypatch):
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    monkeypatch.setenv("SIRIUS_PCH", "0")
    plain = compile_program(src, use_cache=False)
    monkeypatch.setenv("SIRIUS_PCH", "1")
    compile_program(src, use_cache=False)  # the first compile with these flags marks them
    fast = compile_program(src, use_cache=False)  # the second builds the headers and uses them
    assert any(p.suffix == ".pch" for p in _pch_dir().iterdir())
    assert _code(fast.device_ir) == _code(plain.device_ir)
    assert _code(fast.host_ir) == _code(plain.host_ir)
    # the kernel's parameters keep their names and types in the debug info
    for name in ('name: "a"', 'name: "n"'):
        assert name in fast.device_ir


def test_an_error_reads_the_same(tmp_path, monkeypatch):
    src = tmp_path / "bad.cu"
    src.write_text(PROGRAM.replace("sqrtf(a[i])", "sqrtf(a[i], 2)"))
    errors = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SIRIUS_PCH", mode)
        with pytest.raises(FrontendError) as e:
            compile_program(src, use_cache=False)
        errors[mode] = e.value.render()
    assert errors["0"] == errors["1"]
    assert "bad.cu:5:" in errors["1"]


def test_a_damaged_header_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("SIRIUS_PCH", "1")
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    compile_program(src, use_cache=False)
    first = compile_program(src, use_cache=False)
    headers = sorted(_pch_dir().glob("*.pch"))
    assert headers
    for h in headers:
        h.write_bytes(b"not a precompiled header")
    again = compile_program(src, use_cache=False)  # falls back, and drops the damaged ones
    assert _code(again.device_ir) == _code(first.device_ir)
    assert not any(h.exists() and h.read_bytes().startswith(b"not a") for h in headers)
    compile_program(src, use_cache=False)  # builds them again
    assert all(h.exists() and h.stat().st_size > 1_000_000 for h in headers)


def test_user_macros_get_a_header_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv("SIRIUS_PCH", "1")
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    compile_program(src, use_cache=False)
    compile_program(src, use_cache=False)
    before = set(_pch_dir().glob("*.pch"))
    # a macro clang's CUDA headers react to: the program still compiles, with its own headers
    # from its second compile on
    flags = ["-D__CUDA_NO_HALF_OPERATORS__"]
    compile_program(src, use_cache=False, extra_flags=flags)
    assert set(_pch_dir().glob("*.pch")) == before
    compile_program(src, use_cache=False, extra_flags=flags)
    assert len(set(_pch_dir().glob("*.pch")) - before) == 2


def test_flags_used_once_build_no_header(tmp_path, monkeypatch):
    # a header costs more to build than one compile saves: a set of flags gets one only when
    # a second compile uses it
    monkeypatch.setenv("SIRIUS_PCH", "1")
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    flags = ["-DSIRIUS_TEST_ONCE=1"]
    before = set(_pch_dir().glob("*.pch"))
    once = compile_program(src, use_cache=False, extra_flags=flags)
    assert set(_pch_dir().glob("*.pch")) == before
    assert len(list(_pch_dir().glob("*.wanted"))) >= 2  # the host and the device side
    twice = compile_program(src, use_cache=False, extra_flags=flags)
    assert len(set(_pch_dir().glob("*.pch")) - before) == 2
    assert _code(twice.device_ir) == _code(once.device_ir)
