"""Soundness of the dependence analysis against what the CPU executor actually does.

Every corpus program (hand-written and TVM-generated), and every program of issue 12
(tests/soundness/programs: loaded pointers, module globals, non-inlined device functions), runs
on the executor in trace mode, which records every global, shared and module-global access of
every thread with its statement instance; each must lie inside the static access relation of
that instance (sirius.analysis.uar.soundness). A single access outside is an
under-approximation, the one bug the analysis must never have.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sirius.analysis.irview import build_view
from sirius.analysis.program import analyse
from sirius.analysis.uar.build import build_uar
from sirius.analysis.uar.soundness import check_trace
from sirius.runtime.cpu.device import CpuDevice
from sirius.runtime.interpreter import LaunchTrace, run_host_program
from tests.helpers import ROOT, by_size

HAND = sorted((ROOT / "kernels").glob("*.cu"))
TVM = sorted((ROOT / "kernels" / "tvm").glob("*.cu"))
# issue 12: pointer tables, __device__ globals, __noinline__ functions, inline PTX stores
# (tests/soundness)
ISSUE12 = sorted((ROOT / "tests" / "soundness" / "programs").glob("*.cu"))
# hand-written kernels whose every access is affine: the analysis must be exact on them
NON_AFFINE = {"histogram_atomics.cu": "the bin index is data (data[i] % NBINS)",
              "converge_loop.cu": "`*flag = 1` runs under a data-dependent test (a may-write)"}


def _traces(path: Path, order: str = "forward"):
    program, kernels, host_program = analyse([path])
    uar = build_uar(build_view(program.device_module), kernels, host_program)
    device = CpuDevice(order=order, trace=True)
    result = run_host_program(host_program, program, kernels, device, seed=1)
    # check_trace maps the executor's shared-array numbering through LaunchTrace.shared
    return uar, result.traces


# op_conv2d's trace (15-17 s, the longest of the small TVM programs) and mlp's (10 s) are in
# make test-all
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow)
                                  if getattr(p, "name", "") == "op_conv2d.cu" else p
                                  for p in by_size(HAND + TVM + ISSUE12, medium=True)],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_dynamic_access_is_inside_its_static_relation(path):
    uar, traces = _traces(path)
    report = check_trace(uar, traces)
    assert report.records > 0
    assert report.ok, report.summary()
    if path in HAND and path.name not in NON_AFFINE:
        assert report.exact_share == 1.0, report.summary()


def test_a_planted_under_approximation_is_caught():
    """The check can fail: a trace record moved outside the relation is reported."""
    uar, traces = _traces(ROOT / "kernels" / "elementwise_chain.cu")
    t = traces[0]
    rec = t.records.copy()
    glob = np.nonzero(rec["space"] == 0)[0]
    rec["offset"][glob[0]] = 1 << 20  # far past every buffer of the program
    report = check_trace(uar, [LaunchTrace(t.launch_index, t.env, rec, t.shared)])
    assert report.violation_count == 1
    assert report.violations[0].offset == 1 << 20


def test_a_planted_under_approximation_of_a_module_global_is_caught():
    """Records of module globals (space 2) are checked too: program B's read of `g` moved to a
    byte past it is reported, the real one is not."""
    uar, traces = _traces(ROOT / "tests" / "soundness" / "programs" / "noinline_global.cu")
    t = traces[1]  # k2: every thread reads g
    assert check_trace(uar, [t]).ok
    rec = t.records.copy()
    var = np.nonzero(rec["space"] == 2)[0]
    assert len(var) == 4096 and set(t.globals[i] for i in rec["buffer"][var]) == {"g"}
    rec["offset"][var[7]] = 4
    report = check_trace(uar, [LaunchTrace(t.launch_index, t.env, rec, t.shared, t.globals)])
    assert report.violation_count == 1
    assert (report.violations[0].space, report.violations[0].buffer) == ("variable", "@g")
