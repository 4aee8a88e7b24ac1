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
import re

import pytest
from codegen_support import check_same, corpus, fused_program, run, with_module

from sirius.backend import compile_ir
from sirius.backend.limits import blocks_per_sm
from sirius.fusion.codegen.emit import build
from sirius.fusion.plan.planner import Options
from sirius.fusion.spec import FusedKernelSpec, Wait
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


# TVM lstm runs through the CLI in make test (test_cli_reports_the_megakernel and its counters
# twin), the others and the same check through the API in make test-all, with both variants
@pytest.mark.parametrize("variant", ["grid", "counters"])
@pytest.mark.parametrize("name,launches", [
    pytest.param("kernels/tvm/lstm.cu", 34, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/seq2seq.cu", 52, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/resnext_block.cu", 3, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/bert_layer.cu", 15, marks=pytest.mark.slow),
    pytest.param("kernels/tvm/deepspeech2.cu", 57, marks=pytest.mark.slow),
])
def test_global_chains_become_one_verified_launch(name, launches, variant):
    res = fuse([ROOT / name], Options(megakernel=variant))
    assert (res.launches_before, res.launches_after) == (launches, 1)
    (mk,) = res.megakernels
    assert res.cooperative_kernels == (mk.name,)
    # at most the blocks ptxas's figures let an A100's 108 SMs hold at once (sm_80)
    k = mk.kernel
    per = blocks_per_sm(res.resources[k.name], k.block[0] * k.block[1] * k.block[2], "sm_80",
                        k.smem)
    assert 1 <= per and k.grid[0] <= per * 108
    # counters: a chain of dependent launches waits; grid: barriers, no waits
    assert bool(mk.kernel.spec.waits) == (variant == "counters")
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


# --megakernel counters: the same kernel, a block waiting only for the producer blocks named in
# its wait table (segment k, waiting blocks, producer segment, producer blocks)
CHAIN = (Wait(1, (0, GRID - 1), 0, (0, GRID - 1)), Wait(2, (0, GRID - 1), 1, (0, GRID - 1)))


@functools.cache
def mba_counters(waits: tuple[Wait, ...]):
    mm = corpus("matmul_bias_act.cu")
    spec = FusedKernelSpec("mk", "grid", tuple(mm.member(i, param_map=MBA_MAPS[i])
                                                for i in range(3)),
                           grid=(GRID, 1, 1), grid_sync_before=(1, 2), waits=waits)
    return mm, build(mm.program.device_ir, [spec])


def test_counter_waits_keep_every_value():
    mm, fm = mba_counters(CHAIN)
    body = fm.text[fm.text.index("define dso_local ptx_kernel void @mk("):]
    body = body[:body.index("\n}\n")]
    assert "sirius_grid_sync" not in body
    assert body.count("@sirius_mk_wait(") == 2 and body.count("@sirius_mk_signal(") == 3
    assert "%" not in body.split("@sirius_mk_signal(")[1].split(")")[0]  # nothing live
    host = fused_program(mm, fm, [0, 1, 2])
    check_same(mm, fm, host)  # forward, reverse, random: bitwise equal
    ref = run(mm.host, mm.program, mm)
    for order in ("forward", "reverse", "random:5"):
        (launch,) = run(host, with_module(mm, fm), mm, order=order).launches
        # the members' barriers, one per block in each signal (3) and wait (2)
        assert launch.stats.barriers == sum(x.stats.barriers for x in ref.launches) + 5 * GRID
        assert launch.stats.waits == 2 * GRID * GRID  # every block looks at every flag


@pytest.mark.parametrize("waits", [
    CHAIN[:1], CHAIN[1:],  # a whole wait missing
    (Wait(1, (0, GRID - 1), 0, (0, GRID - 2)), CHAIN[1]),  # the last producer left out
    (Wait(1, (0, GRID - 1), 0, (1, GRID - 1)), CHAIN[1]),  # the first producer left out
    (Wait(1, (1, GRID - 1), 0, (0, GRID - 1)), CHAIN[1]),  # block 0 does not wait
], ids=["no-1", "no-2", "short-high", "short-low", "block-0"])
def test_a_missing_wait_is_caught(waits):
    """The planted missing wait: a block of the consumer runs before a producer block whose
    output it reads, in forward or reverse order (each runs every block as far ahead as its
    waits let it), and verify reports the mismatch."""
    mm, fm = mba_counters(waits)
    with pytest.raises(AssertionError, match="buffer"):
        check_same(mm, fm, fused_program(mm, fm, [0, 1, 2]))


def _edit_table(fm, old: str, new: str):
    start = fm.text.index("@mk_mkwaits = ")
    end = fm.text.index("\n", start)
    line = fm.text[start:end]
    assert old in line, line
    return type(fm)(fm.text[:start] + line.replace(old, new) + fm.text[end:], fm.kernels)


def test_a_cyclic_wait_is_reported_as_a_deadlock():
    """Segment 1 made to wait for segment 2 (whose blocks first run segment 1): the executor
    finds that no block can go on and names the blocks, instead of hanging."""
    mm, fm = mba_counters(CHAIN)
    # the table, block by block: [0, 0, 0, 0, 4] (block 0 of segment 1 after blocks 0..4 of
    # segment 0), [1, 1, 0, 0, 4], ...; block 0 made to wait for segment 2 instead
    bad = _edit_table(fm, "[i32 0, i32 0, i32 0, i32 0, i32 4,",
                      "[i32 0, i32 0, i32 2, i32 0, i32 4,")
    with pytest.raises(KernelFault, match=r"deadlock: 5 block\(s\) wait .*block 0 before "
                                          r"segment 1 waits for block 0 of segment 2"):
        run(fused_program(mm, bad, [0, 1, 2]), with_module(mm, bad), mm)


def _edit_helper(fm, name: str, old: str, new: str):
    """`fm` with every match of the pattern `old` in helper `name` (optimised IR) replaced."""
    start = fm.text.index(f"define dso_local void @{name}(")
    end = fm.text.index("\n}\n", start)
    body, n = re.subn(old, new, fm.text[start:end])
    assert n >= 1, fm.text[start:end]
    return type(fm)(fm.text[:start] + body + fm.text[end:], fm.kernels)


def test_the_executor_runs_the_wait_helper_as_written():
    """The waits are the helper's own code on the device's tables: a wait helper whose target
    is one less (every flag is at least that from the start) lets consumer blocks run before
    their producers, and verify sees it; the tables alone would have said nothing was wrong."""
    mm, fm = mba_counters(CHAIN)
    # the spin goes on while flag - target < 0: made flag - target < -1
    bad = _edit_helper(fm, "sirius_mk_wait", r"icmp slt i32 (%diff[\w.]*), 0",
                       r"icmp slt i32 \1, -1")
    with pytest.raises(AssertionError, match="buffer"):
        check_same(mm, bad, fused_program(mm, bad, [0, 1, 2]))


def test_a_producer_range_cut_in_the_table_is_caught():
    """Block 1 of segment 1 made to wait only for block 0 of segment 0 (the device reads
    fields 2-4 of its entries): it runs before the producers it reads, and verify sees it."""
    mm, fm = mba_counters(CHAIN)
    bad = _edit_table(fm, "i32 1, i32 1, i32 0, i32 0, i32 4,",
                      "i32 1, i32 1, i32 0, i32 0, i32 0,")
    with pytest.raises(AssertionError, match="buffer"):
        check_same(mm, bad, fused_program(mm, bad, [0, 1, 2]))


def test_a_wait_helper_reading_past_its_table_is_a_fault():
    mm, fm = mba_counters(CHAIN)
    bad = _edit_helper(fm, "sirius_mk_wait", r"%at1 = add i32 %at0, 1\b",
                       "%at1 = add i32 %at0, 99")
    with pytest.raises(KernelFault, match=r"an access at byte \d+ of @mk_mkwaitidx, which has "
                                          r"\d+ bytes"):
        run(fused_program(mm, bad, [0, 1, 2]), with_module(mm, bad), mm)


def test_a_helper_outside_the_executors_subset_is_refused_naming_it():
    mm, fm = mba_counters(CHAIN)
    bad = _edit_helper(fm, "sirius_mk_signal", r"%v = add i32 %e, 1\b",
                       "%vf = uitofp i32 %e to float\n  %v = fptoui float %vf to i32")
    with pytest.raises(KernelFault, match="cannot run its counter helper sirius_mk_signal: "
                                          "the instruction uitofp"):
        run(fused_program(mm, bad, [0, 1, 2]), with_module(mm, bad), mm)


def test_waits_on_a_later_segment_are_refused_before_emitting():
    mm = corpus("matmul_bias_act.cu")
    with pytest.raises(ValueError, match="waits only for blocks 0..4 of an earlier segment"):
        FusedKernelSpec("mk", "grid", tuple(mm.member(i, param_map=MBA_MAPS[i])
                                            for i in range(3)),
                        grid=(GRID, 1, 1), grid_sync_before=(1, 2),
                        waits=(Wait(1, (0, 4), 2, (0, 4)),))


def test_a_signal_of_the_wrong_segment_is_reported_as_a_deadlock():
    """Segment 1 signals segment 0's flags, as the module says: segment 2's blocks then wait
    for flags nobody raises, on the GPU as here; the executor names them instead of hanging."""
    mm, fm = mba_counters(CHAIN)
    text = fm.text.replace("@sirius_mk_signal(ptr addrspace(1) @mk_mkflags, i32 1,",
                           "@sirius_mk_signal(ptr addrspace(1) @mk_mkflags, i32 0,")
    assert text != fm.text
    bad = type(fm)(text, fm.kernels)
    with pytest.raises(KernelFault, match=r"deadlock: 5 block\(s\) wait .*block 0 before "
                                          r"segment 2 waits for block 0 of segment 1"):
        run(fused_program(mm, bad, [0, 1, 2]), with_module(mm, bad), mm)


def test_the_counters_assemble():
    _, fm = mba_counters(CHAIN)
    for arch in ("sm_80", "sm_90"):
        ptx, report = compile_ir(fm.text, arch)
        assert "ld.acquire." in ptx.text and "st.release." in ptx.text  # .sys: volatile
        assert "mk" in report.kernels


def test_cli_reports_the_counters_megakernel(tmp_path):
    r = run_cli("fuse", "kernels/tvm/lstm.cu", "--megakernel", "counters", "-o",
                str(tmp_path), "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["megakernel"] == "counters" and doc["launches"] == {"before": 34, "after": 1}
    (mk,) = doc["megakernels"]
    assert mk["cooperative"] and mk["grid_barriers"] == 0
    g = mk["grid"][0]
    for k, blo, bhi, j, plo, phi in mk["waits"]:
        assert 0 <= j < k < len(mk["segments"]) and 0 <= blo <= bhi < g and 0 <= plo <= phi < g
    # segment 1 (sirius_v0, the first step's matmul, 8 blocks) reads only the first of the
    # 4 strided slices of segment 0 (a horizontal kernel, one block per slice): block 0, which
    # blocks 1..7 wait for (block 0 itself ran segment 0 already: no wait)
    assert [1, 1, 7, 0, 0, 0] in mk["waits"]
    assert not any(blo == bhi == plo == phi for _, blo, bhi, _, plo, phi in mk["waits"])
    assert doc["verification"]["ok"]
    md = (tmp_path / "report.md").read_text()
    assert "## Megakernels (counters)" in md and "dependence wait(s)" in md


@pytest.mark.parametrize("variant,check", [
    pytest.param("grid", True, marks=pytest.mark.slow),
    pytest.param("counters", True, marks=pytest.mark.slow),
    ("counters", False),  # make test: the plan only (the values: make test-all)
])
def test_a_host_loop_nest_moves_into_the_megakernel(variant, check):
    """kernels/lstm_cell.cu launches one cell per (layer, step), 2 x 4, each depending on the
    cells before it: with a megakernel the nest's stages are all unrolled (their launch order
    kept), so every launch joins one kernel (at most --unroll launches: no device loop)."""
    res = fuse([ROOT / "kernels/lstm_cell.cu"], Options(megakernel=variant))
    assert (res.launches_before, res.launches_after) == (8, 1)
    (mk,) = res.megakernels
    assert len(mk.kernel.spec.segments()) == 5  # the wavefront's stages: 1, 2, 2, 2, 1 cells
    assert mk.kernel.spec.device_loop is None  # unrolled: no loop left to run on the device
    if check:
        rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
        assert rep.ok, rep.render()


def test_counter_waits_follow_the_block_relation():
    """kernels/two_mm.cu: C = A B, then E = C D, both tiled over 2-D grids; a block of the
    second product reads one row band of C, so with counters it waits only for the blocks of
    the first product that write that band (the isl relation between their effects, mod the
    grid), not for the whole grid, and verify still finds every value."""
    res = fuse([ROOT / "kernels/two_mm.cu"], Options(megakernel="counters"))
    assert (res.launches_before, res.launches_after) == (2, 1)
    (mk,) = res.megakernels
    g = mk.kernel.grid[0]
    waits = mk.kernel.spec.waits
    assert len(waits) > 1 and all(w.segment == 1 and w.after == 0 for w in waits)
    assert all(w.producers[1] - w.producers[0] + 1 < g for w in waits)  # not every block
    covered = sorted(b for w in waits for b in range(w.blocks[0], w.blocks[1] + 1))
    assert covered == list(range(g))  # every block of the second product waits for some
    rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()


def test_a_ping_pong_stencil_loop_becomes_one_kernel_of_neighbour_waits():
    """kernels/stencil_pingpong.cu: 5 Jacobi steps, the two buffers swapped on the host after
    each. With counters the loop is unrolled (each iteration's buffers resolved) into one
    kernel whose blocks wait only for the blocks around them of the step before (the halo),
    and every value matches in three block orders."""
    res = fuse([ROOT / "kernels/stencil_pingpong.cu"], Options(megakernel="counters"))
    assert (res.launches_before, res.launches_after) == (5, 1)
    (mk,) = res.megakernels
    g = mk.kernel.grid[0]
    waits = mk.kernel.spec.waits
    assert {(w.segment, w.after) for w in waits} == {(k, k - 1) for k in range(1, 5)}
    assert max(w.producers[1] - w.producers[0] + 1 for w in waits) < g
    for w in waits:  # a block's halo: the blocks next to it (4 per row of the 2-D grid)
        assert w.producers[0] <= w.blocks[0] and w.blocks[1] <= w.producers[1]
    rep = verify_fused(res.original, res, orders=("forward", "reverse", "random:3"))
    assert rep.ok, rep.render()


def test_the_emitted_waits_are_checked_against_what_the_dependences_need():
    from sirius.fusion.waits import _uncovered

    want = {(2, 0, 0): (0, 3), (2, 1, 0): (0, 3), (1, 0, 0): (0, 3)}
    # block 0 waited for segment 0 before segment 1 already: covered; block 1 did not
    waits = [Wait(1, (0, 0), 0, (0, 3)), Wait(2, (1, 1), 0, (0, 2))]
    assert _uncovered(want, waits) == [(2, 1, 0)]
    assert _uncovered(want, [*waits, Wait(2, (1, 1), 0, (0, 3))]) == []


def test_waits_that_lose_a_dependence_are_never_emitted(monkeypatch):
    """A planted loss in the waits' reduction (the last wait dropped): the coverage check
    refuses the megakernel, the report says why, and the program stays the plain fusion."""
    from sirius.fusion import waits

    real = waits._compressed
    monkeypatch.setattr(waits, "_compressed", lambda want, lag=0: real(want, lag)[:-1])
    res = fuse([ROOT / "kernels" / "two_mm.cu"], Options(megakernel="counters"))
    assert not res.megakernels and res.launches_after == 2
    assert any("not built: the dependence-counter waits do not cover every dependence "
               "between blocks: block" in x for x in res.undone), res.undone
    rep = verify_fused(res.original, res, seed=3)
    assert rep.ok, rep.render()


def test_a_region_past_the_launch_limit_becomes_several_megakernels(monkeypatch):
    """A megakernel runs at most MEGAKERNEL_LAUNCHES launches of the original program (paper
    lstm_large's 4090 in one kernel ran LLVM out of memory): the ping-pong loop's 5 launches
    with a limit of 2 become 2 + 2 megakernels and one plain launch, verified."""
    from sirius.fusion import megakernel

    monkeypatch.setattr(megakernel, "MEGAKERNEL_LAUNCHES", 2)
    res = fuse([ROOT / "kernels" / "stencil_pingpong.cu"], Options(megakernel="counters"))
    assert res.launches_after == 3 and len(res.megakernels) == 2
    assert all(len(r.kernel.spec.members) == 2 for r in res.megakernels)
    assert any("cut into 3 parts" in x for x in res.megakernels[0].reasons)
    rep = verify_fused(res.original, res, seed=3)
    assert rep.ok, rep.render()
