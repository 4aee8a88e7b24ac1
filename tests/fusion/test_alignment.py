"""Thread maps and legality proofs of vertical groups (`sirius.fusion.plan.alignment`). Expected
values come from the kernels' index arithmetic (matmul_bias_act.cu: matmul thread (bx, by, tx,
ty) of 16x16 tiles in a 4x4 grid writes C[(16by + ty)*64 + 16bx + tx]; bias_add and act_tanh
thread (bx, tx) touch element bx*blockDim + tx), not from what the code printed."""

from __future__ import annotations

import dataclasses
import functools

import islpy as isl
import numpy as np
import pytest
from codegen_support import check_same, corpus, fused_program, tile_map, transposed_tile_map

from sirius.analysis.expr import Expr
from sirius.analysis.irview import build_view
from sirius.analysis.uar.build import build_uar
from sirius.fusion.codegen.emit import build
from sirius.fusion.plan.alignment import (
    check_group,
    covers_exactly_once,
    fused_instance_map,
    instance_pairs,
    reindex_map,
    reindex_member,
)
from sirius.fusion.spec import GLOBAL, FusedKernelSpec, Member, ThreadMap

FUSED = (256, 1, 1)
# matmul(A, B, C, m, n, k) bias_add(C, bias, m, n) act_tanh(C, out, total); the launches pass
# d_A, d_B, d_C, 64, 64, 64 / d_C, d_bias, 64, 64 / d_C, d_out, 4096.
MBA_MAPS = ((0, 1, 2, 3, 4, 5), (2, 6, 3, 4), (2, 7, 8))


@functools.cache
def analysed(name: str):
    """(Loaded, {(src, dst, kind, buffer): Dependence}, statement id of each launch in
    order)."""
    loaded = corpus(name)
    uar = build_uar(build_view(loaded.program.device_module), loaded.kernels, loaded.host)
    launches = [s.id for s in uar.statements if s.kind == "launch"]
    return loaded, {(d.src, d.dst, d.kind, d.buffer): d for d in uar.dependences}, launches


def group_deps(name: str) -> list:
    """Every dependence between two launches of the program, as (member i, member j, dep)."""
    _, deps, launches = analysed(name)
    index = {sid: i for i, sid in enumerate(launches)}
    return [(index[d.src], index[d.dst], d) for d in deps.values()
            if d.src in index and d.dst in index]


@functools.cache
def mba_reindexed():
    mm, deps, _ = analysed("matmul_bias_act.cu")
    m0 = mm.member(0, param_map=MBA_MAPS[0])
    m1, m2 = mm.member(1, param_map=MBA_MAPS[1]), mm.member(2, param_map=MBA_MAPS[2])
    b1 = reindex_member(m0, (m1.grid, m1.block), deps["S3", "S4", "RAW", "d_C"], FUSED, consumer=m1)
    assert b1 is not None
    b2 = reindex_member(b1, (m2.grid, m2.block), deps["S4", "S5", "RAW", "d_C"], FUSED, consumer=m2)
    assert b2 is not None
    return mm, m0, b1, b2


def ids_everywhere(mapping: ThreadMap, blocks: int, threads: int) -> np.ndarray:
    block, thread = np.divmod(np.arange(blocks * threads), threads)
    env = {"block": block, "thread": thread}
    return np.stack([np.broadcast_to(e.evaluate(env), block.shape) for e in mapping.ids])


# the fused threads of a member --------------------------------------------------------------------
def test_fused_instance_map_block_map():
    mm, _, _ = analysed("matmul_bias_act.cu")
    f = fused_instance_map(mm.member(0), FUSED, 16)
    # fused block 5 = matmul block (5 mod 4, 5 / 4) = (1, 1); thread 37 = (37 mod 16, 37 / 16)
    got = f.intersect_domain(isl.Set("{ F[5, 37] }")).range()
    assert got.is_equal(isl.Set("{ M[1, 1, 0, 5, 2, 0] }"))
    # bias_add (16 blocks of 256) in a range of 20 blocks: blocks 16..19 run nothing
    f = fused_instance_map(mm.member(1), FUSED, 20)
    assert f.domain().is_equal(isl.Set("{ F[b, t] : 0 <= b < 16 and 0 <= t < 256 }"))


def test_coverage_of_block_and_global_maps():
    mm, _, _ = analysed("matmul_bias_act.cu")
    assert covers_exactly_once(mm.member(0), FUSED, 16) is None
    # act_tanh (32 x 128) aligned on the global thread id: 4096 threads in 16 fused blocks
    assert covers_exactly_once(mm.member(2, mapping=GLOBAL), FUSED, 16) is None
    # ... but 15 fused blocks miss the last 256 elements: the first missed is bx=30, tx=0
    why = covers_exactly_once(mm.member(2, mapping=GLOBAL), FUSED, 15)
    assert why is not None and "bx=30" in why and "tx=0," in why and "256 instances" in why


def test_coverage_misses_or_repeats_an_instance():
    mm, _, _ = analysed("matmul_bias_act.cu")
    t, b = Expr.var("thread"), Expr.var("block")
    # bias_add with tx = thread / 2: tx in [0, 128) twice, [128, 256) never
    half = mm.member(1, mapping=ThreadMap.custom(bx=b, tx=t.floordiv(2)))
    why = covers_exactly_once(half, FUSED, 16)
    assert why is not None and "tx=128" in why and "run by no fused thread" in why
    # act_tanh run by 32 fused blocks with bx = (2*block + thread/128) mod 32: every instance
    # twice (block 0 and block 16 both run bx 0..1), none missed
    twice = mm.member(2, mapping=ThreadMap.custom(
        bx=(b.scale(2) + t.floordiv(128)).mod(32), tx=t.mod(128)))
    why = covers_exactly_once(twice, FUSED, 32)
    assert why is not None and "run by 2 fused threads" in why
    assert "(block 0, thread 0), (block 16, thread 0)" in why
    assert covers_exactly_once(twice, FUSED, 16) is None


def test_coverage_by_isl_beyond_enumeration(monkeypatch):
    from sirius.fusion.plan import alignment

    monkeypatch.setattr(alignment, "ENUMERATE", 0)
    alignment._covers.cache_clear()
    try:
        mm, _, _ = analysed("matmul_bias_act.cu")
        t, b = Expr.var("thread"), Expr.var("block")
        assert covers_exactly_once(mm.member(0), FUSED, 16) is None
        half = mm.member(1, mapping=ThreadMap.custom(bx=b, tx=t.floordiv(2)))
        why = covers_exactly_once(half, FUSED, 16)
        assert why is not None and "run by no fused thread" in why
        twice = mm.member(2, mapping=ThreadMap.custom(
            bx=(b.scale(2) + t.floordiv(128)).mod(32), tx=t.mod(128)))
        why = covers_exactly_once(twice, FUSED, 32)
        assert why is not None and "two fused threads" in why
    finally:
        alignment._covers.cache_clear()


# map re-indexing ----------------------------------------------------------------------------------
def test_reindexed_maps_equal_the_hand_tile_maps():
    _, _, b1, b2 = mba_reindexed()
    assert b1.blocks == b2.blocks == 16  # matmul's 16 fused blocks
    for member, threads in ((b1, 256), (b2, 128)):
        want = ids_everywhere(tile_map(16, 4, 64, threads), 16, 256)
        got = ids_everywhere(member.mapping, 16, 256)
        np.testing.assert_array_equal(got, want)
    # fused thread (block 5, thread 37) ran matmul (1, 1, 5, 2): element (16 + 2)*64 + 16 + 5
    e = 18 * 64 + 21
    env = {"block": 5, "thread": 37}
    assert [x.evaluate(env) for x in b1.mapping.ids] == [e // 256, 0, 0, e % 256, 0, 0]
    assert [x.evaluate(env) for x in b2.mapping.ids] == [e // 128, 0, 0, e % 128, 0, 0]


def test_reindexed_map_round_trips_through_json():
    _, _, b1, _ = mba_reindexed()
    back = Member.from_json(b1.to_json())
    np.testing.assert_array_equal(ids_everywhere(back.mapping, 16, 256),
                                  ids_everywhere(b1.mapping, 16, 256))


def test_reindexed_group_is_thread_level():
    _, m0, b1, b2 = mba_reindexed()
    check = check_group([m0, b1, b2], FUSED, [16] * 3, group_deps("matmul_bias_act.cu"))
    assert check.ok and check.reason is None and not check.needs_barrier_before
    # matmul -> bias_add RAW and WAW on C, bias_add -> act_tanh RAW on C
    assert sorted((v.src, v.dst, v.kind, v.buffer, v.level) for v in check.verdicts) == [
        (0, 1, "RAW", "d_C", "thread"), (0, 1, "WAW", "d_C", "thread"),
        (1, 2, "RAW", "d_C", "thread")]


def test_reindexed_fused_kernel_by_value():
    mm, m0, b1, b2 = mba_reindexed()
    fm = build(mm.program.device_ir,
               [FusedKernelSpec("mba", "vertical", (m0, b1, b2), block=FUSED)])
    k = fm.kernel("mba")
    assert (k.grid, k.block) == ((16, 1, 1), FUSED)
    check_same(mm, fm, fused_program(mm, fm, [0, 1, 2]), orders=("forward", "random:1"))


def test_no_reindexing_for_a_one_to_many_dependence():
    # each transpose thread writes 4 elements of T (a loop over 4 rows): 4 consumer threads
    te, deps, _ = analysed("transpose_elementwise.cu")
    m0, m1 = te.member(0), te.member(1)
    assert reindex_map(m0, (m1.grid, m1.block), deps["S1", "S2", "RAW", "d_t"], FUSED) is None


# legality of groups -------------------------------------------------------------------------------
def test_elementwise_chain_with_global_maps():
    ch, _, _ = analysed("elementwise_chain.cu")
    members = [ch.member(i, mapping=GLOBAL) for i in range(4)]
    # square's 43 x 96 = 4128 threads need 17 fused blocks of 256
    check = check_group(members, FUSED, [17] * 4, group_deps("elementwise_chain.cu"))
    assert check.ok and not check.needs_barrier_before
    assert {(v.src, v.dst) for v in check.verdicts} == {(0, 1), (1, 2), (2, 3)}
    assert {v.level for v in check.verdicts} == {"thread"}


def test_transposed_consumer_needs_a_barrier():
    mm, _, _ = analysed("matmul_bias_act.cu")
    deps = group_deps("matmul_bias_act.cu")
    m0 = mm.member(0)
    m1 = mm.member(1, mapping=transposed_tile_map(16, 4, 64, 256))
    m2 = mm.member(2, mapping=transposed_tile_map(16, 4, 64, 128))
    check = check_group([m0, m1, m2], FUSED, [16] * 3, deps)
    assert not check.ok and check.needs_barrier_before == {1}
    assert check.reason is not None
    assert "bias_add" in check.reason and "d_C" in check.reason and "RAW" in check.reason
    levels = {(v.src, v.dst, v.kind): v.level for v in check.verdicts}
    # bias_add and act_tanh handle the same (transposed) element in each thread
    assert levels == {(0, 1, "RAW"): "block", (0, 1, "WAW"): "block", (1, 2, "RAW"): "thread"}
    fixed = check_group([m0, dataclasses.replace(m1, barrier_before=True), m2], FUSED,
                        [16] * 3, deps)
    assert fixed.ok and fixed.reason is None
    # a barrier before act_tanh does not order matmul -> bias_add
    late = check_group([m0, m1, dataclasses.replace(m2, barrier_before=True)], FUSED,
                       [16] * 3, deps)
    assert not late.ok and late.needs_barrier_before == {1}


def test_consumer_shifted_by_one_thread_is_rejected():
    mm, _, _ = analysed("matmul_bias_act.cu")
    deps = group_deps("matmul_bias_act.cu")
    t, b = Expr.var("thread"), Expr.var("block")
    e = (b.floordiv(4).scale(16) + t.floordiv(16)).scale(64) + b.mod(4).scale(16) + t.mod(16)
    shifted = (e + 1).mod(4096)  # each thread takes its neighbour's element
    m1 = mm.member(1, mapping=ThreadMap.custom(bx=shifted.floordiv(256),
                                               tx=shifted.mod(256)))
    check = check_group([mm.member(0), m1], FUSED, [16, 16], [d for d in deps if d[1] < 2])
    # fused (block 0, thread 15) writes column 15; column 16 is matmul block 1's
    assert not check.ok and not check.needs_barrier_before
    assert check.reason is not None and "crosses fused blocks" in check.reason
    # without the wrap-around, element 0 is never run
    m1 = mm.member(1, mapping=ThreadMap.custom(bx=(e + 1).floordiv(256), tx=(e + 1).mod(256)))
    check = check_group([mm.member(0), m1], FUSED, [16, 16], [d for d in deps if d[1] < 2])
    assert not check.ok and "bx=0, by=0, bz=0, tx=0," in (check.reason or "")


def test_global_dependence_is_rejected():
    te, deps, _ = analysed("transpose_elementwise.cu")
    members = [te.member(0), te.member(1)]
    dep = deps["S1", "S2", "RAW", "d_t"]
    assert dep.width == "GLOBAL"
    # scale_shift block b reads rows 2b, 2b+1 of T, written by every transpose block column
    check = check_group(members, FUSED, [32, 32], [(0, 1, dep)])
    assert not check.ok and not check.needs_barrier_before
    assert check.reason is not None and "crosses fused blocks" in check.reason
    assert "d_t" in check.reason and "transpose" in check.reason
    # without a thread-level relation, only the width is known
    blind = dataclasses.replace(dep, instances=None, mapping=None)
    check = check_group(members, FUSED, [32, 32], [(0, 1, blind)])
    assert not check.ok and "GLOBAL dependence" in (check.reason or "")


def test_later_member_feeding_an_earlier_one_is_rejected():
    _, deps, _ = analysed("matmul_bias_act.cu")
    _, m0, b1, b2 = mba_reindexed()
    # act_tanh placed before bias_add: bias_add (member 2) feeds act_tanh (member 1)
    order = [(0, 2, deps["S3", "S4", "RAW", "d_C"]), (0, 2, deps["S3", "S4", "WAW", "d_C"]),
             (2, 1, deps["S4", "S5", "RAW", "d_C"])]
    check = check_group([m0, b2, b1], FUSED, [16] * 3, order)
    assert not check.ok and "runs after the target" in (check.reason or "")
    assert [v.level for v in check.verdicts] == ["thread", "thread", "illegal"]


def test_host_loop_iterations():
    # lstm_cell: one launch in loops l (layers) and t (steps); its RAW on c links step t to
    # t + 1 of the same layer, its RAW on h links later steps and layers: none of it within
    # one iteration of (l, t)
    ls, deps, _ = analysed("lstm_cell.cu")
    c_dep, h_dep = deps["S6", "S6", "RAW", "d_c"], deps["S6", "S6", "RAW", "d_h"]
    pairs = instance_pairs(c_dep)
    assert pairs.is_empty()
    loose = instance_pairs(c_dep, ["l"])  # any t: thread (bx, tx) feeds itself
    assert loose.is_equal(isl.Map("{ M[bx, 0, 0, tx, 0, 0] -> M[bx, 0, 0, tx, 0, 0] : "
                                  "0 <= bx < 2 and 0 <= tx < 32 }"))
    member = ls.member(0)
    check = check_group([member], (32, 1, 1), [2], [(0, 0, c_dep), (0, 0, h_dep)])
    assert check.ok and {v.level for v in check.verdicts} == {"none"}
    check = check_group([member], (32, 1, 1), [2], [(0, 0, c_dep)], same_iteration_vars=["l"])
    assert not check.ok


@pytest.mark.parametrize("ranges", [[16], [16, 16, 16, 16]])
def test_ranges_must_match_members(ranges):
    mm, _, _ = analysed("matmul_bias_act.cu")
    members = [mm.member(0), mm.member(1)]
    check = check_group(members, FUSED, ranges, [])
    assert not check.ok and "ranges" in (check.reason or "")


def test_raw_fused_ids_in_a_custom_map():
    # on a 16x16 fused block, raw ty*16 + tx is the linear thread: the same instances as the
    # block map; ty*16 + tx + 1 misses thread 0 of every bias_add block
    mm, _, _ = analysed("matmul_bias_act.cu")
    tx, ty, b = Expr.var("tx"), Expr.var("ty"), Expr.var("block")
    raw = mm.member(1, mapping=ThreadMap.custom(bx=b, tx=ty.scale(16) + tx))
    assert fused_instance_map(raw, (16, 16, 1), 16).is_equal(
        fused_instance_map(mm.member(1), (16, 16, 1), 16))
    assert covers_exactly_once(raw, (16, 16, 1), 16) is None
    off = mm.member(1, mapping=ThreadMap.custom(bx=b, tx=ty.scale(16) + tx + 1))
    why = covers_exactly_once(off, (16, 16, 1), 16)
    assert why is not None and "tx=0," in why and "16 instances missed" in why


def test_reindex_map_is_the_members_map():
    mm, deps, _ = analysed("matmul_bias_act.cu")
    _, m0, b1, _ = mba_reindexed()
    m1 = mm.member(1)
    assert reindex_map(m0, (m1.grid, m1.block), deps["S3", "S4", "RAW", "d_C"], FUSED) == \
        b1.mapping
    # the wrong consumer shape: act_tanh's launch does not match the bias_add dependence
    m2 = mm.member(2)
    assert reindex_map(m0, (m2.grid, m2.block), deps["S3", "S4", "RAW", "d_C"], FUSED) is None
