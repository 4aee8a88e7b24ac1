"""FLOP counting (the executor's FLOP counters, checked against counting by augmented IR),
footprints, region attribution; the bound the model and the report name for a memory-bound
chain, a tiled matmul and tiny kernels (CPU executor counts)."""

from __future__ import annotations

from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

from sirius.runtime.cpu.flops import block_flops, flop_site
from sirius.tune.counts import _program, _run, footprint
from sirius.tune.gpus import gpu
from sirius.tune.model import Assumptions, estimate_program
from sirius.tune.report import report_md
from sirius.tune.tuner import TuneResult, estimate_variant
from sirius.tune.variants import Request, Source, build, session

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "programs"

IR = """
define float @f(float %a, float %b, <2 x half> %h, double %d) {
  %x = fadd contract float %a, %b
  %y = tail call float @llvm.fmuladd.f32(float %x, float %a, float %b)
  %z = call noundef float @__nv_tanhf(float %y)
  %v = fmul <2 x half> %h, %h
  %e = fdiv double %d, %d
  %m = call float @llvm.maxnum.f32(float %z, float %a)
  ret float %m
}
declare float @llvm.fmuladd.f32(float, float, float)
declare float @llvm.maxnum.f32(float, float)
declare float @__nv_tanhf(float)
"""


def _instructions(text: str) -> int:
    m = llvm.parse_assembly(text)
    return sum(len(list(b.instructions)) for f in m.functions for b in f.blocks)


def test_flop_sites_by_precision():
    lines = [ln for ln in IR.splitlines() if ln.strip().startswith("%")]
    # f16: two lanes; f32: fadd 1 + fmuladd 2 + a libdevice call 1 (maxnum is not a FLOP);
    # f64: fdiv 1
    assert block_flops(lines) == (2, 4, 1)
    assert flop_site("  %c = fcmp olt float %a, %b") is None
    assert flop_site("  %f = fpext float %a to double") is None
    assert flop_site("  %g = tail call double @llvm.fma.f64(double %a, double %b, double %c)") \
        == ("f64", 2)


def _augment(ir: str, precision: str) -> str:
    """An independent count: one dead instruction after each FLOP of `precision`, so that the
    executor's instruction counter counts the FLOPs on top of the instructions."""
    out, n = [], 0
    for line in ir.splitlines():
        out.append(line)
        site = flop_site(line)
        if site and site[0] == precision:
            for _ in range(site[1]):
                out.append(f"  %__test_flop{n} = add i8 0, 0")
                n += 1
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("prog,megakernel", [("kernels/tvm/lstm.cu", None),
                                             ("kernels/tvm/lstm.cu", "counters"),
                                             ("kernels/matmul_bias_act.cu", None)])
def test_executor_flop_counters_match_augmented_ir(prog, megakernel):
    """One run with the FLOP counters gives, per launch (and per megakernel segment), what
    running an augmented module gives as extra instructions; the other counters do not move."""
    src = Source((str(ROOT / prog),), "sm_90")
    s = session(src)
    host, ir = s.original.host, s.original.program.device_ir
    if megakernel:
        _, res = build(Request(src, "mk", True, "auto", megakernel=megakernel), measure=False)
        host, ir = res.host, res.device_ir
    kernels = s.original.kernels

    def run(text, flops):
        return _run(host, _program(text, src.files), kernels, 7, s.dtypes, count_flops=flops)

    plain, counted = run(ir, False), run(ir, True)
    key = ("instructions", "global_load_bytes", "global_store_bytes", "shared_load_bytes",
           "shared_store_bytes", "barriers", "segments")
    for a, b in zip(plain.launches, counted.launches, strict=True):
        assert [getattr(a.stats, k) for k in key] == [getattr(b.stats, k) for k in key]
        assert not any(a.stats.flops)
    assert any(r.stats.flops[1] for r in counted.launches)  # f32 FLOPs were counted
    for i, p in enumerate(("f16", "f32", "f64")):
        aug = run(_augment(ir, p), False)
        for a, b in zip(aug.launches, counted.launches, strict=True):
            assert b.stats.flops[i] == a.stats.instructions - b.stats.instructions
            for sa, sb, fb in zip(a.stats.segments, b.stats.segments, b.stats.segment_flops,
                                  strict=True):
                assert fb[i] == sa[0] - sb[0]
    if megakernel:
        mk = [r for r in counted.launches if r.stats.segments]
        assert mk and all(len(r.stats.segment_flops) == len(r.stats.segments) for r in mk)
        assert all(tuple(sum(f[i] for f in r.stats.segment_flops) for i in range(3))
                   == r.stats.flops for r in mk)


def test_footprint_counts_distinct_bytes_loaded_and_stored():
    rec = np.zeros(6, dtype=[("space", "u1"), ("buffer", "<i4"), ("offset", "<i8"),
                             ("size", "<i4"), ("kind", "u1")])
    rec["space"] = [0, 0, 0, 0, 1, 0]
    rec["buffer"] = [1, 1, 2, 1, 0, 3]
    rec["offset"] = [0, 0, 4, 0, 0, 8]
    rec["size"] = 4
    rec["kind"] = [0, 0, 0, 1, 0, 2]  # two loads of one word, a load, a store, shared, atomic
    # loads: (1,0) (2,4) (3,8 atomic) = 12 B; stores: (1,0) (3,8 atomic) = 8 B
    assert footprint(rec) == 20


def _original(path: Path):
    vr, _ = build(Request(Source((str(path),), "sm_90"), "original", False, "original",
                          original=True))
    assert vr.ok, vr.error
    return vr


def _report(vr, gpu_name: str = "H100 SXM") -> str:
    """report.md of a tune result holding only the original program."""
    g = gpu(gpu_name)
    base = estimate_variant(vr, g, Assumptions())
    res = TuneResult(Source(("p.cu",), "sm_90"), g, Assumptions(), base, [], None, None, {},
                     [], "in process", {})
    return report_md(res)


def _original_section(md: str) -> list[str]:
    """The 'Bound:' line and the kernel rows of the report's original-program section."""
    sec = md.split("## Original program")[1].split("\n## ")[0].splitlines()
    bound = [ln for ln in sec if ln.startswith("Bound: ")]
    rows = [ln.split(" | ") for ln in sec if ln.startswith("| ") and "---" not in ln][1:]
    return bound + [r[3] for r in rows]


def test_memory_bound_chain_names_dram():
    vr = _original(PROGRAMS / "chain_2m.cu")
    n = 1 << 21
    scale = vr.counts[0]
    assert scale.kernel == "scale" and scale.flops == (("f32", n),)
    assert scale.dram_bytes == 8 * n  # reads x, writes y
    for g in ("H100 SXM", "A100 SXM 80GB", "L4"):
        est = estimate_program(list(vr.counts), gpu(g))
        assert [e.bound for e in est.launches] == ["dram"] * 4, g
        assert all(e.explain().startswith("DRAM-bound") for e in est.launches)
    bound, *kernels = _original_section(_report(vr))
    assert bound == "Bound: DRAM bandwidth bounds 4 of 4 launches (100% of the estimated time)."
    assert kernels == ["DRAM bandwidth"] * 4


def test_tiled_matmul_names_issue_or_compute():
    vr = _original(PROGRAMS / "matmul_320.cu")
    mm = vr.counts[0]
    assert mm.kernel == "matmul"
    assert mm.flops == (("f32", 2 * 320**3),)  # one fmuladd per (row, col, k)
    assert mm.registers and mm.static_smem == 2048  # ptxas: two 16x16 float tiles
    est = estimate_program(list(vr.counts), gpu("H100 SXM"))
    assert est.launches[0].bound in ("issue", "compute")
    bound, *kernels = _original_section(_report(vr))
    name = {"issue": "instruction issue", "compute": "compute (FLOPs)"}[est.launches[0].bound]
    assert bound.startswith(f"Bound: {name} bounds 1 of ")
    assert kernels[0] == name


def test_tiny_kernels_name_launch_overhead():
    vr = _original(ROOT / "kernels" / "elementwise_chain.cu")
    est = estimate_program(list(vr.counts), gpu("H100 SXM"))
    assert [e.bound for e in est.launches] == ["launch"] * 4
    assert all(e.body_bound == "dram" for e in est.launches)
    bound, *kernels = _original_section(_report(vr))
    assert bound == "Bound: launch overhead bounds 4 of 4 launches (100% of the estimated time)."
    assert kernels == ["launch overhead"] * 4
    # footprints are exact here (traced): scale reads x and writes y, 16 KiB each
    assert vr.counts[0].footprint == 2 * 16384 and vr.counts[0].footprint_exact


@pytest.mark.parametrize("prog", ["elementwise_chain.cu"])
def test_fused_launches_are_attributed_to_regions(prog):
    src = Source((str(ROOT / "kernels" / prog),), "sm_90")
    vr, res = build(Request(src, "auto", True, "auto"))
    assert vr.ok and vr.regions == 1 and vr.launches_after == 1
    assert [c.region for c in vr.counts] == [0]
    assert res is not None and res.launches_after == 1


def test_report_html_without_matplotlib(monkeypatch):
    """`pip install 'sirius[scale]'` alone has no matplotlib: the HTML report is still
    written, each plot replaced by a note saying why."""
    from sirius.diagnostics import SiriusError
    from sirius.tune import plots
    from sirius.tune.report import report_html

    def missing():
        raise SiriusError("matplotlib is not installed: pip install 'sirius[tune]'")

    monkeypatch.setattr(plots, "_plt", missing)
    vr = _original(ROOT / "kernels" / "elementwise_chain.cu")
    g = gpu("H100 SXM")
    res = TuneResult(Source(("p.cu",), "sm_90"), g, Assumptions(),
                     estimate_variant(vr, g, Assumptions()), [], None, None, {}, [],
                     "in process", {})
    page = report_html(res)
    assert "data:image/png" not in page
    assert page.count("Plot not drawn") == 3
    assert "matplotlib is not installed: pip install &#x27;sirius[tune]&#x27;" in page
