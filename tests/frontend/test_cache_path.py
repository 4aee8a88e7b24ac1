"""The IR cache key does not include the file's path (unless quoted #includes make it matter),
and a hit from another path reports that path."""

from __future__ import annotations

import pytest

from sirius.diagnostics import SiriusError
from sirius.frontend import compile_program

PROGRAM = """#include <cuda_runtime.h>
__global__ void k(float *a, int n) { int i = threadIdx.x; if (i < n) a[i] = 2.0f * a[i]; }
int main() {
  float *a; cudaMalloc(&a, 1024 * 4);
  k<<<1, 1024>>>(a, 1024);
  float *p = (float *)malloc(16); k<<<1, 4>>>(p, 4);
  cudaFree(a); return 0;
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SIRIUS_CACHE_DIR", str(d))
    return d


def _two_copies(tmp_path, text: str):
    a, b = tmp_path / "one" / "prog.cu", tmp_path / "two" / "other.cu"
    for p in (a, b):
        p.parent.mkdir(parents=True)
        p.write_text(text)
    return a, b


def test_same_program_at_two_paths_is_one_entry_with_the_right_path(tmp_path, cache_dir):
    a, b = _two_copies(tmp_path, PROGRAM)
    pa = compile_program(a)
    pb = compile_program(b)
    assert not pa.cache_hit and pb.cache_hit
    assert len([e for e in (cache_dir / "ir").iterdir() if not e.name.startswith(".")]) == 1
    assert str(b) in pb.device_ir and str(a) not in pb.device_ir
    assert str(b) in pb.host_ir and str(a) not in pb.host_ir


def test_an_error_found_after_a_hit_names_the_new_file(tmp_path, cache_dir):
    from sirius.analysis.program import analyse

    a, b = _two_copies(tmp_path, PROGRAM)
    with pytest.raises(SiriusError) as first:
        analyse([a])
    with pytest.raises(SiriusError) as second:
        analyse([b])
    assert "prog.cu:6" in first.value.render()   # a host pointer passed to a kernel, line 6
    assert "other.cu:6" in second.value.render() and "prog.cu" not in second.value.render()


def test_quoted_include_keeps_the_path_in_the_key(tmp_path, cache_dir):
    text = '#include "scale.h"\n' + PROGRAM.replace("2.0f", "SCALE")
    a, b = _two_copies(tmp_path, text)
    (a.parent / "scale.h").write_text("#define SCALE 2.0f\n")
    (b.parent / "scale.h").write_text("#define SCALE 3.0f\n")
    pa, pb = compile_program(a), compile_program(b)
    assert not pb.cache_hit
    assert "2.000000e+00" in pa.device_ir and "3.000000e+00" in pb.device_ir
