"""PTX emission through llvmlite's NVPTX target, ptxas resource reports, resource limits."""

from __future__ import annotations

import functools
import re
from math import prod
from pathlib import Path

import pytest

from sirius.backend import (
    LIMITS,
    KernelResources,
    PtxasError,
    ResourceLimitError,
    assemble,
    check,
    compile_ir,
    emit_ptx,
    violations,
)
from sirius.backend.ptxas import parse_report

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "kernels").glob("*.cu"))
ARCHS = ("sm_80", "sm_90")


@functools.cache
def analysed(name: str):
    from sirius.analysis.program import analyse

    return analyse([ROOT / "kernels" / name])


@functools.cache
def compiled(name: str, arch: str):
    return compile_ir(analysed(name)[0].device_ir, arch)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_kernels_assemble_for_sm80_and_sm90(path: Path):
    program, kernels, host = analysed(path.name)
    names = {k.mangled for k in kernels}
    assert names
    for arch in ARCHS:
        ptx, report = compiled(path.name, arch)
        assert f".target {arch}\n" in ptx.text  # line info only: no ", debug" target
        assert set(report.kernels) == names
        assert set(ptx.kernels) == names  # read from the text (functions with attributes too)
        for res in report.kernels.values():
            assert 0 < res.registers <= 255
            assert res.spill_stores == res.spill_loads == 0
        for launch in host.launches():
            block = prod(e.const for e in launch.block)
            check(report[launch.mangled], arch, block_threads=block,
                  dynamic_smem=launch.smem.const)


def test_static_shared_memory_is_the_kernels_shared_arrays():
    # matmul: As and Bs, 16x16 floats each; transpose: a 32x33 float tile; reduce_sum: 32 floats;
    # histogram: 64 unsigned bins; the elementwise kernels have none.
    want = {("matmul_bias_act.cu", "_Z6matmulPKfS0_Pfiii"): 2 * 16 * 16 * 4,
            ("matmul_bias_act.cu", "_Z8bias_addPfPKfii"): 0,
            ("matmul_bias_act.cu", "_Z8act_tanhPKfPfi"): 0,
            ("transpose_elementwise.cu", "_Z9transposePKfPfii"): 32 * 33 * 4,
            ("block_reduce.cu", "_Z10reduce_sumPKfPfi"): 32 * 4,
            ("histogram_atomics.cu", "_Z9histogramPKjPji"): 64 * 4}
    for arch in ARCHS:
        for (prog, kernel), smem in want.items():
            assert compiled(prog, arch)[1][kernel].smem == smem, (prog, kernel, arch)


def test_barriers_and_parameter_bytes():
    # matmul synchronizes on barrier 0 only; the 1-D kernels have no barrier. On sm_80 the
    # parameters sit in cmem[0] after a fixed area: matmul (3 pointers, 3 ints) = 36 bytes,
    # bias_add (2 pointers, 2 ints) = 24, act_tanh (2 pointers, 1 int) = 20, so the banks differ
    # by 12 and 4 (ptxas for sm_90 reports no cmem[0]: parameters live elsewhere).
    for arch in ARCHS:
        r = compiled("matmul_bias_act.cu", arch)[1]
        mm, bias, act = (r["_Z6matmulPKfS0_Pfiii"], r["_Z8bias_addPfPKfii"],
                         r["_Z8act_tanhPKfPfi"])
        assert (mm.barriers, bias.barriers, act.barriers) == (1, 0, 0)
        if arch == "sm_80":
            assert mm.cmem_bank(0) - bias.cmem_bank(0) == 12
            assert bias.cmem_bank(0) - act.cmem_bank(0) == 4


def test_libdevice_is_linked_and_inlined():
    ptx, _ = compiled("matmul_bias_act.cu", "sm_80")  # act_tanh calls tanhf -> __nv_tanhf
    assert ptx.libdevice
    code = [ln for ln in ptx.text.splitlines() if not ln.lstrip().startswith((".file", "//"))]
    assert not [ln for ln in code if "__nv_" in ln or re.match(r"\s*call", ln)]
    ptx, _ = compiled("qkv_branches.cu", "sm_80")
    assert not ptx.libdevice


def test_retarget_and_line_info():
    ir = analysed("matmul_bias_act.cu")[0].device_ir
    assert '"target-cpu"="sm_80"' in ir
    ptx = emit_ptx(ir, "sm_90")
    assert ".target sm_90\n" in ptx.text and ptx.ptx_version >= 78
    assert re.search(r"^\s*\.loc\s", ptx.text, re.M)  # nvcc -lineinfo style
    bare = emit_ptx(ir, "sm_80", lineinfo=False)
    assert not re.search(r"^\s*\.loc\s", bare.text, re.M)


def test_spilling_kernel_is_rejected():
    ptx, _ = compiled("lstm_cell.cu", "sm_80")
    squeezed = assemble(ptx.text, "sm_80", extra=("--maxrregcount", "16"))
    (res,) = squeezed.kernels.values()
    assert res.spill_stores > 0 and res.spill_loads > 0
    with pytest.raises(ResourceLimitError, match=r"kernel _Z9lstm_cell\S* spills registers"):
        check(res, "sm_80")


def test_ptxas_errors_are_reported():
    with pytest.raises(PtxasError, match="ptxas rejected the PTX for sm_80"):
        assemble(".version 8.0\n.target sm_80\n.address_size 64\nthis is not ptx\n", "sm_80")


LOG = """\
ptxas info    : 0 bytes gmem, 24 bytes cmem[3]
ptxas info    : Function properties for _Z6helperf
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 2 barriers, 4224 bytes smem, 388 bytes cmem[0], \
8 bytes cmem[2], 16 bytes lmem
ptxas info    : Compile time = 1.5 ms
"""


def test_parse_report():
    r = parse_report(LOG, "sm_90")
    assert set(r.kernels) == {"k"}
    k = r["k"]
    assert (k.registers, k.barriers, k.smem, k.lmem, k.stack_frame) == (40, 2, 4224, 16, 32)
    assert k.cmem == ((0, 388), (2, 8))
    h = r["_Z6helperf"]
    assert not h.entry and (h.spill_stores, h.spill_loads, h.stack_frame) == (8, 4, 16)


def test_limits():
    assert set(LIMITS) == {"sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    for lim in LIMITS.values():
        assert (lim.max_threads_per_block, lim.max_registers_per_thread) == (1024, 255)
        assert lim.max_static_smem_per_block == 48 * 1024 and lim.registers_per_sm == 65536
    assert LIMITS["sm_80"].max_smem_per_block_optin == 163 * 1024
    assert LIMITS["sm_90"].max_smem_per_block_optin == 227 * 1024
    ok = KernelResources("k", True, registers=64, smem=1024)
    assert violations(ok, "sm_80", block_threads=1024) == []  # 64 * 1024 = 65536 registers
    fat = KernelResources("k", True, registers=72, smem=48 * 1024 + 4)
    msgs = violations(fat, "sm_80", block_threads=1024, dynamic_smem=120 * 1024)
    assert any("73728 registers per block" in m and "65536" in m for m in msgs)
    assert any("49156 bytes of static shared memory" in m for m in msgs)
    assert any("172036 bytes of shared memory" in m and "166912" in m for m in msgs)
    assert violations(fat, "sm_90", dynamic_smem=120 * 1024) == [
        "kernel k has 49156 bytes of static shared memory; sm_90 allows 49152 per block"]
    with pytest.raises(ResourceLimitError, match="kernel k is launched with 2048 threads"):
        check(ok, "sm_75", block_threads=2048)
