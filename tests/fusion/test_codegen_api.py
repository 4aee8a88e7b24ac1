"""The code generator's API: id expressions, guards, spec JSON, debug info, and the diagnostics
of specs it refuses."""

from __future__ import annotations

import llvmlite.binding as llvm
import pytest
from codegen_support import PROGRAMS, check_same, corpus, fused_program, load, tile_map

from sirius.analysis.expr import Expr
from sirius.analysis.irview import build_view
from sirius.fusion.codegen.emit import CodegenError, build
from sirius.fusion.geometry import guard, member_ids, variable_ranges
from sirius.fusion.spec import GLOBAL, FusedKernelSpec, Member, ThreadMap


def ids_at(ids, **env):
    return tuple(e.evaluate(env) for e in ids)


def test_block_map_ids():
    # matmul's 4x4 grid of 16x16 blocks on a 1-D fused block of 256 threads: fused block 5 is
    # (bx 1, by 1), fused thread 37 is (tx 5, ty 2)
    m = Member("k", (4, 4, 1), (16, 16, 1))
    ids = member_ids(m, 256)
    assert ids_at(ids, block=5, thread=37) == (1, 1, 0, 5, 2, 0)
    g = guard(ids, m, variable_ranges((256, 1, 1), (16, 1, 1), 16))
    assert g.block_checks == () and g.thread_checks == ()  # every id provably in range


def test_global_map_ids_and_guard():
    # square: 43 blocks of 96 threads on 256-thread fused blocks; fused (block 2, thread 10) is
    # global thread 522 = 5 * 96 + 42
    m = Member("k", (43, 1, 1), (96, 1, 1), mapping=GLOBAL)
    ids = member_ids(m, 256)
    assert ids_at(ids, block=2, thread=10) == (5, 0, 0, 42, 0, 0)
    g = guard(ids, m, variable_ranges((256, 1, 1), (17, 1, 1), 17))
    # 17 * 256 = 4352 threads reach block 45 > 42: one check, on block and thread together
    assert len(g.thread_checks) == 1 and g.thread_checks_use_blocks
    assert g.thread_checks[0].holds({"block": 16, "thread": 31})  # 4127 -> block 42
    assert not g.thread_checks[0].holds({"block": 16, "thread": 32})  # 4128 -> block 43


def test_spec_json_round_trip():
    spec = FusedKernelSpec("f", "vertical", (
        Member("a", (4, 4, 1), (16, 16, 1), param_map=(0, 1)),
        Member("b", (16, 1, 1), (256, 1, 1), smem=64, param_map=(1, 2), barrier_before=True,
               mapping=tile_map(16, 4, 64, 256), blocks=16),
        Member("c", (9, 1, 1), (100, 1, 1), mapping=GLOBAL)), block=(256, 1, 1))
    assert FusedKernelSpec.from_json(spec.to_json()) == spec


def test_debug_info_survives():
    # the fused kernel has its own subprogram; its instructions keep the members' source lines
    e = corpus("elementwise_chain.cu")
    spec = FusedKernelSpec("chain", "vertical", tuple(
        e.member(i, mapping=GLOBAL) for i in range(4)))
    fm = build(e.program.device_ir, [spec])
    view = build_view(llvm.parse_assembly(fm.text))
    fn = view.functions["chain"]
    assert fn.subprogram is not None
    lines = {view.loc(i).line for b in fn.blocks for i in b.instrs if view.loc(i)}
    # the stores of scale, add_bias, relu and square (kernels/elementwise_chain.cu)
    assert {37, 42, 47, 54} <= lines


def test_unoptimized_build_runs():
    # -O0: the fragments stay functions the kernel calls
    d = load(PROGRAMS / "dyn_shared.cu")
    fm = build(d.program.device_ir, [FusedKernelSpec("dyn", "vertical", (d.member(0),
                                                                         d.member(1)))],
               opt_level=0)
    assert "call void @dyn.m0(" in fm.text
    check_same(d, fm, fused_program(d, fm, [0, 1]), orders=("forward",))


# refused specs --------------------------------------------------------------------------------
def refused(loaded, spec, match):
    with pytest.raises(CodegenError, match=match):
        build(loaded.program.device_ir, [spec])


def test_refuses_unknown_kernel_and_taken_name():
    e = corpus("elementwise_chain.cu")
    refused(e, FusedKernelSpec("f", "vertical", (Member("nope", (1, 1, 1), (32, 1, 1)),)),
            "f: member 0 names nope, which is not a kernel of the module")
    refused(e, FusedKernelSpec("_Z4reluPfi", "vertical", (e.member(2),)),
            "name _Z4reluPfi is already taken")
    refused(e, FusedKernelSpec("f", "vertical", (e.member(2, param_map=(0,)),)),
            r"member 0 \(_Z4reluPfi\) has 2 parameters; its param_map has 1")


def test_refuses_bad_parameter_maps():
    e = corpus("elementwise_chain.cu")
    # scale(x, y, s, n) with s (float) and n (i32) merged
    refused(e, FusedKernelSpec("f", "vertical", (e.member(0, param_map=(0, 1, 2, 2)),)),
            "fused parameter 2 merges parameters of different types: float, i32")
    refused(e, FusedKernelSpec("f", "vertical", (e.member(2, param_map=(0, 2)),)),
            r"fused parameter\(s\) \[1\] receive no member parameter")


def test_refuses_barriers_under_a_global_map():
    tr = load(PROGRAMS / "two_reductions.cu")
    refused(tr, FusedKernelSpec("f", "vertical", (tr.member(0, mapping=GLOBAL), tr.member(1))),
            r"member 0 \(_Z9block_sumPKfPfPii\): uses barriers and shared memory, which need its "
            "blocks intact")


def test_refuses_counted_barriers_on_part_of_a_warp():
    tr = load(PROGRAMS / "two_reductions.cu")
    m = Member(tr.launches[0].mangled, (32, 1, 1), (48, 1, 1))  # 48 threads: 1.5 warps
    refused(tr, FusedKernelSpec("f", "horizontal", (m, tr.member(1))),
            "has barriers and runs on 48 of the 256 threads of a block, not whole warps")


def test_refuses_impossible_shapes():
    e = corpus("elementwise_chain.cu")
    refused(e, FusedKernelSpec("f", "vertical", (e.member(1),), block=(128, 1, 1)),
            "needs 256 threads per block; the fused block has 128")
    refused(e, FusedKernelSpec("f", "vertical", (e.member(1),), block=(2048, 1, 1)),
            "the fused block has 2048 threads; at most 1024")
    custom = ThreadMap.custom(bx=Expr.var("block"), tx=Expr.var("thread"))
    refused(e, FusedKernelSpec("f", "horizontal", (e.member(1, mapping=custom),)),
            "must say how many blocks it needs")
    never = ThreadMap.custom(bx=Expr.var("block") + 100, tx=Expr.var("thread"))
    refused(e, FusedKernelSpec("f", "vertical", (e.member(1, mapping=never, blocks=16),)),
            "its thread map never runs it: bx = block \\+ 100")


def test_refuses_overlaid_shared_memory_without_a_barrier():
    d = load(PROGRAMS / "dyn_shared.cu")
    refused(d, FusedKernelSpec("f", "vertical", (d.member(0), d.member(1)), share_smem=True),
            "shares shared memory with an earlier member \\(share_smem\\) but no barrier")
    # with the barrier it is fine, and both members then use offset 0
    spec = FusedKernelSpec("f", "vertical", (d.member(0), d.member(1, barrier_before=True)),
                           share_smem=True)
    fm = build(d.program.device_ir, [spec])
    k = fm.kernel("f")
    assert (k.static_smem, k.smem) == (4, 512)
    check_same(d, fm, fused_program(d, fm, [0, 1]), orders=("random:3",))


def test_several_specs_in_one_module_and_launch_arguments():
    tr = load(PROGRAMS / "two_reductions.cu")
    specs = [FusedKernelSpec("h", "horizontal", (tr.member(0), tr.member(1))),
             FusedKernelSpec("v", "vertical", (tr.member(0), tr.member(1)))]
    fm = build(tr.program.device_ir, specs)
    assert [k.name for k in fm.kernels] == ["h", "v"]
    check_same(tr, fm, fused_program(tr, fm, [0, 1], kernel="v"), orders=("reverse",))
    # merged parameters must receive the same host value: block_sum's n and square's n are both
    # 4096, but block_sum's sums and square's y are different buffers
    same_n = FusedKernelSpec("n", "horizontal", (tr.member(0, param_map=(0, 1, 2, 3)),
                                                 tr.member(1, param_map=(4, 5, 3))))
    k = build(tr.program.device_ir, [same_n]).kernel("n")
    assert len(k.launch(tr.launches[:2]).args) == 6
    clash = FusedKernelSpec("c", "horizontal", (tr.member(0, param_map=(0, 1, 2, 3)),
                                                tr.member(1, param_map=(4, 1, 3))))
    k = build(tr.program.device_ir, [clash]).kernel("c")
    with pytest.raises(ValueError, match="fused parameter sums of c receives different values"):
        k.launch(tr.launches[:2])
