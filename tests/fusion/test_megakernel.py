"""`--megakernel grid` (issue 15, item 4): a run of launches becomes one cooperative kernel whose
segments are separated by grid-wide barriers, each launch running over its own blocks in a
block-stride loop. Checked by VALUE: the megakernel leaves every buffer as the original does
under forward, reverse and random block orders; a megakernel built without one of the grid
barriers it needs is caught by the same check; the executor refuses a grid barrier it cannot
interpret; and the pipeline turns GLOBAL chains (TVM LSTM, seq2seq, BERT layer) into one
launch, verified."""

from __future__ import annotations

import functools
import json

import pytest
from codegen_support import check_same, corpus, fused_program, run, with_module

from sirius.backend import compile_ir
from sirius.fusion.codegen.emit import build
from sirius.fusion.plan.planner import Options
from sirius.fusion.spec import FusedKernelSpec
from sirius.pipeline import fuse
from sirius.runtime.device import KernelFault
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

# matmul_bias_act: matmul(A, B, C, m, n, k) -> bias_add(C, bias, m, n) -> act_tanh(C, out,
# total); each reads what the one before wrote, in other threads and blocks (GLOBAL)
MBA_MAPS = ((0, 1, 2, 3, 4, 5), (2, 6, 3, 4), (2, 7, 8))
GRID = 5  # fewer blocks than any member needs (16, 16, 32): every member loops


@functools.cache
def mba(grid_sync_before: tuple[int, ...]):
    mm = corpus("matmul_bias_act.cu")
    spec = FusedKernelSpec("mk", "grid", tuple(mm.member(i, param_map=MBA_MAPS[i])
                                                for i in range(3)),
                           grid=(GRID, 1, 1), grid_sync_before=grid_sync_before)
    return mm, build(mm.program.device_ir, [spec])


def test_a_grid_barrier_between_dependent_launches_keeps_every_value():
    mm, fm = mba((1, 2))
    k = fm.kernel("mk")
    assert k.arrangement == "grid" and k.grid == (GRID, 1, 1) and k.block == (256, 1, 1)
    assert k.spec.segments() == [[0], [1], [2]]
    body = fm.text[fm.text.index("define dso_local ptx_kernel void @mk("):]
    body = body[:body.index("\n}\n")]
    assert body.count("call fastcc void @sirius_grid_sync()") + \
        body.count("call void @sirius_grid_sync()") == 2
    host = fused_program(mm, fm, [0, 1, 2])
    check_same(mm, fm, host)  # forward, reverse, random: bitwise equal, fewer launches
    ref = run(mm.host, mm.program, mm)
    got = run(host, with_module(mm, fm), mm)
    (launch,) = got.launches
    # the matmul's own barriers, plus one grid barrier per block and segment boundary
    assert launch.stats.barriers == sum(x.stats.barriers for x in ref.launches) + 2 * GRID


@pytest.mark.parametrize("cuts", [(1,), (2,), ()])
def test_a_missing_grid_barrier_is_caught(cuts):
    """The planted missing wait: dependent launches in one segment run block after block, so
    some order reads what another block has not written yet."""
    mm, fm = mba(cuts)
    with pytest.raises(AssertionError, match="buffer"):
        check_same(mm, fm, fused_program(mm, fm, [0, 1, 2]))


def test_the_executor_refuses_a_grid_barrier_it_cannot_interpret():
    mm, fm = mba((1, 2))
    head = "define dso_local ptx_kernel void @mk("
    start = fm.text.index(head)
    end = fm.text.index("\n}\n", start)
    body = fm.text[start:end].replace(
        "  ret void", "  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)\n  ret void")
    bad = type(fm)(fm.text[:start] + body + fm.text[end:], fm.kernels)
    with pytest.raises(KernelFault, match="grid barrier .*outside the form the executor runs"):
        run(fused_program(mm, bad, [0, 1, 2]), with_module(mm, bad), mm)


def test_the_grid_barrier_assembles():
    _, fm = mba((1, 2))
    for arch in ("sm_80", "sm_90"):
        ptx, report = compile_ir(fm.text, arch)
        assert "atom.add" in ptx.text or "atom.acq_rel" in ptx.text or "red." in ptx.text
        assert "mk" in report.kernels


# TVM lstm runs through the CLI in make test (test_cli_reports_the_megakernel), the others and
# the same check through the API in make test-all
@pytest.mark.parametrize("name,launches", [
    pytest.param("kernels/tvm/lstm.cu", 34, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/seq2seq.cu", 52, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/resnext_block.cu", 3, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/bert_layer.cu", 15, marks=pytest.mark.slow),
])
def test_global_chains_become_one_verified_launch(name, launches):
    res = fuse([ROOT / name], Options(megakernel="grid"))
    assert (res.launches_before, res.launches_after) == (launches, 1)
    (mk,) = res.megakernels
    assert res.cooperative_kernels == (mk.name,)
    assert mk.kernel.grid[0] <= 108  # one block per SM of an A100 at most (sm_80)
    rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()


def test_cli_reports_the_megakernel(tmp_path):
    r = run_cli("fuse", "kernels/tvm/lstm.cu", "--megakernel", "grid", "-o", str(tmp_path),
                "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["megakernel"] == "grid" and doc["launches"] == {"before": 34, "after": 1}
    (mk,) = doc["megakernels"]
    assert mk["cooperative"] and mk["arrangement"] == "grid"
    assert mk["grid"][0] <= 108  # one block per SM of an A100 at most (sm_80)
    assert mk["grid_barriers"] == len(mk["segments"]) - 1 >= 1
    assert doc["verification"]["ok"]
    md = (tmp_path / "report.md").read_text()
    assert "## Megakernels (grid)" in md and "cooperative launch" in md
    assert "grid barrier(s)" in md
