"""The host values of inputs and parameters: the C loop in every generated program and
`fill_values` (numpy, used for the reference .npz) must agree bit for bit."""

from __future__ import annotations

import re
import subprocess

import numpy as np

from sirius.frontend.toolchain import find_clang
from sirius.frontend.tvm_model import Fill, fill_values
from tests.tvm.support import TVM_DIR


def test_fill_values_by_hand():
    # k(i) = ((i % 2001) * 7919 + seed) % 2001 - 1000, value = k * scale (float32)
    # seed 3: i=0 -> 3 - 1000 = -997; i=1 -> 7922 % 2001 = 1919 -> 919;
    # i=2 -> 15841 % 2001 = 15841 - 7 * 2001 = 1834 -> 834; i=2001 repeats i=0.
    scale = np.float32(0.001)
    v = fill_values(2002, Fill(3, float(scale)))
    assert v.dtype == np.float32
    assert v[0] == np.float32(-997) * scale
    assert v[1] == np.float32(919) * scale
    assert v[2] == np.float32(834) * scale
    assert v[2001] == v[0]
    k = v / scale
    assert np.all(np.abs(np.round(k)) <= 1000)


def test_generated_c_fill_matches_numpy(tmp_path):
    source = (TVM_DIR / "mlp.cu").read_text()
    fill_fn = re.search(r"static void sirius_fill\(.*?\n}\n", source, re.S)
    assert fill_fn is not None
    seed, scale = 1234, float(np.float32(1.0 / 3000.0))
    n = 5000
    program = tmp_path / "fill.cpp"
    program.write_text(
        "#include <cstdio>\n#include <cstring>\n" + fill_fn.group(0) +
        f"int main() {{ static float p[{n}]; sirius_fill(p, {n}, {seed}, "
        f"{float(np.float32(scale)).hex()}f);\n"
        f"  for (int i = 0; i < {n}; ++i) {{ unsigned u; memcpy(&u, &p[i], 4); "
        "printf(\"%08x\\n\", u); }\n  return 0; }\n")
    exe = tmp_path / "fill"
    subprocess.run([find_clang(), "-x", "c++", "-O2", str(program), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = np.array([int(h, 16) for h in out.split()], dtype=np.uint32)
    assert np.array_equal(got, fill_values(n, Fill(seed, scale)).view(np.uint32))
