"""`sirius fuse` / `sirius verify` on the corpus: every hand-written and TVM program fuses, the
fused program computes what the original does under forward, reverse and random block/thread
orders (bitwise where no float operation is reordered: fusion moves whole kernel bodies into
one thread, it does not reassociate), and every emitted PTX kernel assembles with ptxas for
sm_80 and sm_90.

Expected launch counts are derived from the programs' sources (comments below), not from what
the planner printed."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest

from sirius.backend import compile_ir, violations
from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import LARGE_TVM, MEDIUM_TVM, ROOT, by_size, run_cli

KERNELS = ROOT / "kernels"
HAND = sorted(p.name for p in KERNELS.glob("*.cu"))
TVM = sorted(p.name for p in (KERNELS / "tvm").glob("*.cu"))
# The three largest TVM models take 30-100 s each to fuse and verify on 2 cores; they run with
# SIRIUS_FUSE_ALL=1 (BENCHMARKS.md lists their results).
SLOW = {"bert_base.cu", "nasnet.cu", "resnext50.cu"}
ORDERS = ("forward", "reverse", "random:3")


def fused(path: str, arrangement: str = "auto") -> FuseResult:
    return _fused(path, arrangement)  # one cache key however the arrangement is given


@functools.cache
def _fused(path: str, arrangement: str) -> FuseResult:
    return fuse([ROOT / path], Options(arrangement=arrangement))


def verified(path: str, arrangement: str = "auto") -> FuseResult:
    res = fused(path, arrangement)
    rep = verify_fused(res.original, res, seed=5, orders=ORDERS)
    assert rep.ok, rep.render()
    # bitwise: fusion does not reorder float operations
    assert all(r.bitwise for r in rep.rows), rep.render()
    return res


@pytest.mark.parametrize("name", HAND)
def test_hand_written_program_verifies(name: str) -> None:
    res = verified(f"kernels/{name}")
    assert res.launches_after <= res.launches_before


@pytest.mark.parametrize("name", by_size(TVM, medium=True))
def test_tvm_program_verifies(name: str) -> None:
    if name in SLOW and not os.environ.get("SIRIUS_FUSE_ALL"):
        pytest.skip("large model: set SIRIUS_FUSE_ALL=1")
    res = verified(f"kernels/tvm/{name}")
    assert res.launches_after <= res.launches_before


# launch counts derived from the sources --------------------------------------------------------
@pytest.mark.xdist_group("elementwise_chain.cu")  # shares the fusion (tests/conftest.py)
def test_elementwise_chain_becomes_one_kernel() -> None:
    # scale -> add_bias -> relu -> square: each reads only the element its thread wrote
    # (THREAD); block shapes differ (128 vs 64 threads), so the global-linear map aligns them.
    res = fused("kernels/elementwise_chain.cu")
    assert (res.launches_before, res.launches_after) == (4, 1)
    assert [r.arrangement for r in res.fused] == ["vertical"]


@pytest.mark.xdist_group("matmul_bias_act.cu")  # shares the fusion (tests/conftest.py)
def test_matmul_bias_act_becomes_one_kernel_by_map_reindexing() -> None:
    # tiled matmul (16x16 tiles) -> bias_add (256-thread 1-D blocks) -> act_tanh (128): bias
    # and tanh are pure maps, evaluated in the matmul threads that wrote their element.
    res = fused("kernels/matmul_bias_act.cu")
    assert (res.launches_before, res.launches_after) == (3, 1)
    reasons = " ".join(res.fused[0].reasons)
    assert "re-indexed" in reasons


@pytest.mark.xdist_group("qkv_branches.cu")  # shares the fusion (tests/conftest.py)
def test_qkv_branches_become_one_kernel() -> None:
    # three independent dense_bias launches (shared input X only): one horizontal kernel
    res = fused("kernels/qkv_branches.cu")
    assert (res.launches_before, res.launches_after) == (3, 1)
    assert [r.arrangement for r in res.fused] == ["horizontal"]


@pytest.mark.parametrize("arrangement", ["vertical", "horizontal"])
def test_qkv_arrangements_verify(arrangement: str) -> None:
    res = verified("kernels/qkv_branches.cu", arrangement)
    assert res.launches_after == 1
    assert [r.arrangement for r in res.fused] == [arrangement]


@pytest.mark.xdist_group("elementwise_chain.cu")  # shares the fusion (tests/conftest.py)
def test_horizontal_arrangement_does_no_vertical_fusion() -> None:
    res = verified("kernels/elementwise_chain.cu", "horizontal")
    assert res.launches_after == 4  # a chain has no independent launches


@pytest.mark.xdist_group("bert_qkv.cu")  # shares the fusion (tests/conftest.py)
def test_tvm_bert_qkv_six_launches_become_one() -> None:
    # matmul_q, transpose_q, matmul_k, ... all through one storage d_storage0: splitting it
    # (+2 x 8192 B) leaves three independent branches. matmul -> transpose is GLOBAL (each
    # transpose block reads rows written by every matmul thread), but the transpose's read
    # index permutes the digits of its thread id and each of the 128 matmul threads (one block
    # of 8x16) writes 16 floats (8 float2 at offsets 0, 2, 64, 66, 128, 130, 192, 194 from
    # 256*tx + 4*ty): permutation re-indexing runs the 16 transpose instances that read them in
    # that thread. The three vertical branches then form one mixed kernel: 6 -> 1.
    res = fused("kernels/tvm/bert_qkv.cu")  # verified: test_tvm_program_verifies
    assert (res.launches_before, res.launches_after) == (6, 1)
    assert res.storage.extra_bytes == 2 * 8192
    # records: the three vertical branches, then the mixed kernel that holds them
    assert [r.arrangement for r in res.fused] == ["vertical"] * 3 + ["mixed"]
    assert all("permutation re-indexed (16 instances per thread)" in " ".join(r.reasons)
               for r in res.fused[:3])


@pytest.mark.xdist_group("lstm_cell.cu")  # shares the fusion (tests/conftest.py)
def test_lstm_loop_nest_fused_along_wavefronts() -> None:
    # for l in [0,2): for t in [0,4): cell(l, t), with (l,t) depending on (l-1,t) and (l,t-1):
    # wavefronts w = l + t hold 1,2,2,2,1 cells; each stage of two is one horizontal kernel in a
    # host loop over w (loops stay loops): 5 launches.
    res = fused("kernels/lstm_cell.cu")  # verified: test_hand_written_program_verifies
    assert (res.launches_before, res.launches_after) == (8, 5)
    nest = res.wavefront.rewritten[0]
    assert nest.skew == "w = l + t" and list(nest.stages) == [1, 2, 2, 2, 1]
    loops = [op for op in res.host.ops if type(op).__name__ == "Loop"]
    assert loops and loops[0].var == "w"


@pytest.mark.xdist_group("stencil_pingpong.cu")  # shares the fusion (tests/conftest.py)
def test_stencil_time_loop_not_fused_and_report_says_why() -> None:
    # every time step reads the whole previous grid (neighbours in other blocks): GLOBAL
    res = fused("kernels/stencil_pingpong.cu")
    assert res.launches_after == res.launches_before
    from sirius.fusion.report import not_fused

    why = " ".join(not_fused(res))
    assert "loop t" in why and "GLOBAL" in why, why


@pytest.mark.xdist_group("transpose_elementwise.cu")  # shares the fusion (tests/conftest.py)
def test_transpose_consumer_fused_by_permutation_reindexing() -> None:
    # transpose (tiles 32x32, block 32x8: each thread writes T at 4 rows, 8 apart) ->
    # scale_shift (1-D, 256 threads, reads T[g] once per thread): GLOBAL (each scale_shift
    # block reads rows four transpose blocks wrote), but the read index is the identity, a
    # trivial permutation: each transpose thread runs the 4 scale_shift instances that read
    # the elements it wrote. 2 -> 1.
    res = fused("kernels/transpose_elementwise.cu")  # verified: test_hand_written_program_verifies
    assert (res.launches_before, res.launches_after) == (2, 1)
    assert "permutation re-indexed (4 instances per thread)" in " ".join(res.fused[0].reasons)


# PTX for both architectures ---------------------------------------------------------------------
def _ptx_cases() -> list:
    """(program, arch) for every corpus program but the largest (mlp's in make test-all too);
    the TVM programs' sm_90 runs
    (ptxas on their big kernels again, 5-25 s each) are in `make test-all`: sm_80 checks the same
    fused kernels, the hand-written programs check sm_90 in `make test`."""
    cases = []
    for arch in ("sm_80", "sm_90"):
        for name in HAND + [f"tvm/{n}" for n in TVM if n not in SLOW]:
            slow = Path(name).stem in LARGE_TVM | MEDIUM_TVM or \
                (arch == "sm_90" and name.startswith("tvm/"))
            cases.append(pytest.param(name, arch, id=f"{arch}-{name}",
                                      marks=[pytest.mark.slow] if slow else []))
    return cases


@pytest.mark.parametrize("name,arch", _ptx_cases())
def test_fused_ptx_assembles(name: str, arch: str) -> None:
    """Every fused kernel of every corpus program assembles for both targets within their
    limits. For the target fuse was asked for (sm_80) the module fuse wrote was assembled by
    fuse itself, and its ptxas report is checked (the driver undoes a kernel that breaks a
    limit, so this checks that what is left is whole); sm_90 assembles it again."""
    res = fused(f"kernels/{name}")
    if not res.fused:
        pytest.skip("nothing fused")
    if arch == res.options.arch:  # fuse assembled this very module for it: ptxas's report
        report_kernels = res.resources
    else:
        report_kernels = compile_ir(res.device_ir, arch)[1].kernels
    launched = {op.mangled for op in res.host.launches()}
    for rec in res.fused:
        if rec.name not in launched:  # a vertical kernel inside a horizontal one: not emitted
            assert rec.name not in report_kernels
            continue
        r = report_kernels[rec.name]
        k = rec.kernel
        assert violations(r, arch, block_threads=k.block[0] * k.block[1] * k.block[2]) == []


# the command line -------------------------------------------------------------------------------
def test_fuse_cli_writes_the_four_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("fuse", "kernels/matmul_bias_act.cu", "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["fused.ll", "fused.ptx", "plan.json",
                                                     "report.md"]
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches"] == {"before": 3, "after": 1}
    launches = [op for op in plan["host"]["ops"] if op["op"] == "launch"]
    assert [op["kernel"] for op in launches] == ["sirius_v0"]
    (k,) = plan["fused_kernels"]
    assert [c["kernel"] for c in k["covers"]] == ["matmul", "bias_add", "act_tanh"]
    assert all(c["instances"].startswith("{ S") for c in k["covers"])
    ptx = (out / "fused.ptx").read_text()
    assert ".entry sirius_v0" in ptx
    report = (out / "report.md").read_text()
    assert "3 before, 1 after" in report and "ptxas sm_80" in report
    assert plan["schema"] == "sirius-plan/1"
    assert "| sirius_v0 | matmul, bias_add, act_tanh | 3 -> 1 |" in report
    assert "_Z" not in report  # kernels by their source names, not mangled


def test_verify_cli_exit_codes(tmp_path: Path) -> None:
    ok = run_cli("verify", "kernels/qkv_branches.cu", "-q")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "d_Q" in ok.stdout and "OK" in ok.stdout
    bad = run_cli("verify", "tests/bad/recursion.cu", "-q")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "recursion.cu:" in bad.stderr


# every launch that stays alone has a reason ------------------------------------------------------
def _alone_cases() -> list:
    """The corpus but the largest models; the TVM models that take over 5 s to fuse (bert_qkv,
    mlp, seq2seq, lstm, resnext_block) in make test-all."""
    cases = []
    for name in HAND + [f"tvm/{n}" for n in TVM if n not in SLOW]:
        slow = name.startswith("tvm/") and not Path(name).stem.startswith("op_")
        cases.append(pytest.param(name, marks=[pytest.mark.slow] if slow else []))
    return cases


@pytest.mark.parametrize("name", _alone_cases())
def test_every_launch_left_alone_has_a_reason(name: str) -> None:
    """report.md's "Not fused, and why" names every launch that is a kernel of its own: by its
    statement (S<n>) or by a host loop around it (issue 15, item 5)."""
    from sirius.fusion.report import not_fused

    res = fused(f"kernels/{name}")
    notes = not_fused(res)
    text = " ".join(notes)
    inside = {n.sid for rec in res.fused for n in rec.nodes}
    for st in res.uar.statements:
        if st.kind != "launch" or st.id in inside:
            continue
        named = re.search(rf"(?<!\w){st.id}(?!\w)", text) or \
            any(f"loop {lp.var} " in text for lp in st.loops)
        assert named, (st.id, st.label, notes)
    # a reason, not the planner's "kept it apart" without one
    assert not [n for n in notes if "please report" in n], notes


def test_alone_reasons_say_why() -> None:
    from sirius.fusion.report import not_fused

    assert "S2 histogram: the program's only launch" in not_fused(
        fused("kernels/histogram_atomics.cu"))
    notes = not_fused(fused("kernels/lstm_cell.cu"))
    # the wavefront's first and last stages (w = 0 and w = 4) have one launch each
    assert any(n.startswith("S6 lstm_cell: GLOBAL dependences") and "S6->S7 RAW d_h GLOBAL" in n
               for n in notes), notes
    assert any(n.startswith("S9 lstm_cell: GLOBAL dependences") and "S7->S9 RAW d_h GLOBAL" in n
               for n in notes), notes
