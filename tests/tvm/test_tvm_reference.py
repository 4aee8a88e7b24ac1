"""Committed TVM models run on the CPU executor with the inputs and parameters of their
reference .npz; outputs compared with TVM's own llvm (CPU) build of the same module.

Tolerance: |executor - reference| <= 1e-5 * max(1, |reference|) per element. The two builds
compute the same float32 operations in different orders (TVM's CUDA schedules split and tile
reductions, the llvm build does not; clang may contract a*b+c into an fma), so they differ by
reassociation only; measured differences are at most about 1e-6 relative (docs/tvm-import.md).

Every committed model runs; the large ones (tests/helpers.py LARGE_TVM) in `make test-all`.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import by_size
from tests.tvm.support import TVM_DIR, committed, meta

TOL = 1e-5


@pytest.mark.parametrize("name", by_size(committed()))
def test_executor_matches_tvm_reference(name):
    from sirius.runtime.interpreter import run_program

    doc = meta(name)
    ref = np.load(TVM_DIR / f"{name}.npz")
    outputs = [o["buffer"] for o in doc["outputs"]]
    inputs = {k: ref[k] for k in ref.files if k not in outputs}
    r = run_program([TVM_DIR / f"{name}.cu"], inputs=inputs)
    for out in outputs:
        expected = ref[out].reshape(-1)
        got = np.asarray(r.final[out]).view(np.float32).reshape(-1)[:expected.size]
        err = np.abs(got.astype(np.float64) - expected)
        bound = TOL * np.maximum(1.0, np.abs(expected.astype(np.float64)))
        assert np.all(err <= bound), f"{out}: max error {err.max():.3g}"
