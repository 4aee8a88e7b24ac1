"""`sirius inspect` on bad inputs: exit status 2, the offending line as FILE.cu:LINE, a message
that says what is wrong, and no traceback.

Each program in tests/bad/ marks its offending line with an `// OFFENDING` comment; the files'
header comments say whether clang compiles them (syntax_error, missing_include and texture_ref
are rejected by clang; the others compile and must be rejected by host analysis).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, run_cli

BAD = ROOT / "tests" / "bad"

# kind -> phrase the error message must contain
CASES = {
    "syntax_error": "cannot compile",
    "missing_include": "file not found",
    "fnptr_launch": "launch through a function pointer",
    "nonconst_alloc": "not a compile-time constant",
    "managed": "managed memory",
    "texture_ref": "texture",
    "texture_object": "texture",
    "recursion": "recursi",
    "unknown_scalar": "argument 'n' of k is not known",
    "gpu_under_condition": "condition",
}


def offending_line(path: Path) -> int:
    lines = [i for i, text in enumerate(path.read_text().splitlines(), 1) if "// OFFENDING" in text]
    assert len(lines) == 1, f"{path.name} must mark exactly one line // OFFENDING"
    return lines[0]


def test_every_bad_program_has_a_case() -> None:
    assert sorted(p.stem for p in BAD.glob("*.cu")) == sorted(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_bad_input_is_reported(kind: str) -> None:
    path = BAD / f"{kind}.cu"
    proc = run_cli("inspect", str(path.relative_to(ROOT)))
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{err}"
    assert "Traceback" not in err, err
    assert f"{path.name}:{offending_line(path)}" in err, err
    assert CASES[kind] in err, err


# host programs that once crashed or misled the host model ---------------------------------------
# A `switch` prints its cases one per line; the IR view once paired every instruction after it
# with the wrong text (an icmp read as "i32 7, label %sw.bb2": `KeyError: ''` in compare_ints),
# and LLVM 22 keeps the case values out of the operand list, so every switch took its default.

GAUSSIAN_SWITCH = r"""#include <cuda_runtime.h>
#include <stdio.h>
__global__ void Fan1(float *m, const float *a, int size, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size - 1 - t) m[size * (i + t + 1) + t] = a[size * (i + t + 1) + t] / a[size * t + t];
}
__attribute__((noinline)) int matrix_size(int scale) { return 16 * scale; }
int main() {
  int size = matrix_size(1);
  switch (size) {
    case 1: puts("one"); break;
    case 2: printf("%d\n", size * 7); break;
    case 3: fflush(stdout); break;
    default: break;
  }
  if (size < 4) { puts("too small"); return 1; }
  float *m, *a;
  cudaMalloc(&m, size * size * 4);
  cudaMalloc(&a, size * size * 4);
  for (int t = 0; t < size - 1; t++)
    Fan1<<<1, 32>>>(m, a, size, t);
  static float h[64 * 64];
  cudaMemcpy(h, m, size * size * 4, cudaMemcpyDeviceToHost);
  return 0;
}
"""

SWITCH_TAKES_A_CASE = r"""#include <cuda_runtime.h>
#include <stdio.h>
#define N 256
__global__ void k1(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }
__attribute__((noinline)) int mode_of(int v) { return v * 3 + 1; }
int main() {
  int size;
  switch (mode_of(1)) {
    case 4: size = N; puts("four"); break;
    case 7: size = N / 2; puts("seven"); break;
    case 9: size = N / 4; puts("nine"); break;
    default: size = 1; puts("other"); break;
  }
  float *a; cudaMalloc(&a, N * 4);
  if (size > 8) k1<<<size / 64, 64>>>(a, size);
  static float h[N]; cudaMemcpy(h, a, N * 4, cudaMemcpyDeviceToHost);
  return 0;
}
"""


def _inspect_json(tmp_path: Path, name: str, text: str) -> dict:
    import json

    path = tmp_path / name
    path.write_text(text)
    proc = run_cli("inspect", str(path), "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_helper_computed_size_compared_after_a_switch(tmp_path: Path) -> None:
    # size = matrix_size(1) = 16: not too small, 15 launches of Fan1 with size 16
    doc = _inspect_json(tmp_path, "gaussian_switch.cu", GAUSSIAN_SWITCH)
    ops = doc["host"]["ops"]
    assert [op["op"] for op in ops] == ["alloc", "alloc", "loop", "copy"]
    assert [b["bytes"] for b in doc["host"]["buffers"]] == [16 * 16 * 4] * 2
    loop = ops[2]
    assert (loop["lo"], loop["hi"], loop["step"]) == (0, 15, 1)
    (launch,) = loop["body"]
    assert launch["kernel"] == "Fan1"
    assert [a.get("value") for a in launch["args"][2:]] == [16, loop["var"]]
    assert launch["loc"].endswith("gaussian_switch.cu:21:9")  # the launch's own line


def test_switch_on_a_known_value_takes_its_case(tmp_path: Path) -> None:
    # mode_of(1) = 4: size = 256 > 8, so k1 runs on 4 blocks of 64 with n = 256
    doc = _inspect_json(tmp_path, "switch_case.cu", SWITCH_TAKES_A_CASE)
    (launch,) = [op for op in doc["host"]["ops"] if op["op"] == "launch"]
    assert (launch["kernel"], launch["grid"], launch["block"]) == ("k1", [4, 1, 1], [64, 1, 1])
    assert launch["args"][1]["value"] == 256
    assert launch["loc"].endswith("switch_case.cu:15:19")


def test_refusal_names_the_source_variable(tmp_path: Path) -> None:
    path = tmp_path / "argc.cu"
    path.write_text("#include <cuda_runtime.h>\n"
                    "__global__ void k(float *a, int n) { if (threadIdx.x < n) a[0] = 1.0f; }\n"
                    "int main(int argc, char **argv) {\n"
                    "  float *a; cudaMalloc(&a, 1024 * 4);\n"
                    "  k<<<4, 256>>>(a, argc);\n"
                    "  return 0;\n"
                    "}\n")
    proc = run_cli("inspect", str(path), "-q")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "argc.cu:5" in proc.stderr
    assert "'argc' is a parameter of main" in proc.stderr and "%argc" not in proc.stderr
