"""Host loops whose iterations are independent are unrolled so that their launches fuse
(`wavefront_rewrite(..., unroll=N)`, issue 15 item 5). The programs are in `unroll_programs/`;
their header comments say which loops are independent. Every fused program is checked against
the original, bitwise, in forward and reverse order."""

from __future__ import annotations

import functools

import pytest

from sirius.analysis.host.model import Launch, Loop
from sirius.fusion.driver import FuseResult
from sirius.fusion.plan.planner import Options
from sirius.fusion.report import plan_json, report_md
from sirius.pipeline import fuse
from sirius.verify.differential import verify_fused
from tests.helpers import ROOT, run_cli

PROGRAMS = ROOT / "tests" / "fusion" / "unroll_programs"


@functools.cache
def fused(name: str, unroll: int = 64) -> FuseResult:
    return fuse([PROGRAMS / name], Options(unroll=unroll))


def verified(res: FuseResult) -> None:
    rep = verify_fused(res.original, res, seed=5, orders=("forward", "reverse"))
    assert rep.ok and all(r.bitwise for r in rep.rows), rep.render()


def test_independent_planes_fuse_into_one_launch():
    res = fused("planes.cu")
    assert (res.launches_before, res.launches_after) == (8, 1)
    (rec,) = res.fused
    assert rec.arrangement == "horizontal" and len(rec.nodes) == 8
    # each member is one iteration, with its own value of p
    provs = sorted(res.wavefront.provenance(n.launch) for n in rec.nodes)
    assert [p.split(" (")[0] for p in provs] == [f"S1[p = {p}]" for p in range(8)]
    (u,) = res.wavefront.unrolled
    assert u.rewritten and u.trips == 8 and u.launches == 8 and u.var == "p"
    verified(res)
    md = report_md(res)
    assert "planes.cu:20:3: loop p: 8 independent iterations unrolled into 8 launches" in md
    assert plan_json(res)["unrolled"][0]["trips"] == 8


def test_unroll_zero_leaves_the_loop_and_says_why_the_launch_is_alone():
    res = fused("planes.cu", unroll=0)
    assert (res.launches_before, res.launches_after) == (8, 8)
    assert any(isinstance(op, Loop) for op in res.host.ops)
    small = fused("planes.cu", unroll=4)  # 8 launches: over the limit
    assert small.launches_after == 8
    (u,) = small.wavefront.unrolled
    assert u.reason == "8 launches, more than the 4 that are unrolled"
    assert "the loop was not unrolled: 8 launches, more than the 4" in report_md(small)


def test_a_chain_of_iterations_stays_a_loop():
    res = fused("chain.cu")
    assert res.launches_after == 6 and not res.fused
    (u,) = res.wavefront.unrolled
    assert not u.rewritten
    assert "iterations depend on each other: S1 -> S1 (RAW on d)" in u.reason
    assert "t = 0 and t' = 1" in u.reason  # the sample: iteration 1 reads what 0 wrote
    assert any(isinstance(op, Loop) for op in res.host.ops)


def test_inner_loops_unroll_inside_an_outer_loop_that_stays():
    res = fused("rows_in_steps.cu")
    assert (res.launches_before, res.launches_after) == (24, 6)
    # the t loop stays a loop; its body is two fused kernels of 4 rows each
    (outer,) = [op for op in res.host.ops if isinstance(op, Loop)]
    assert outer.var == "t" and [type(op) for op in outer.body] == [Launch, Launch]
    assert [len(r.nodes) for r in res.fused] == [4, 4]
    assert [u.rewritten for u in res.wavefront.unrolled] == [True, True]
    verified(res)


def test_cli_unroll_option():
    out = run_cli("fuse", str(PROGRAMS / "planes.cu"), "--unroll", "0", "--json",
                  "--no-verify", "-q")
    assert out.returncode == 0, out.stderr
    assert '"after": 8' in out.stdout


# min/max of host values (MIN(CH, TOTAL - t) as a launch argument and in the grid) -------------
@functools.cache
def chunks(form: int, unroll: int = 64) -> FuseResult:
    return fuse([PROGRAMS / "chunks.cu"], Options(unroll=unroll), flags=[f"-DFORM={form}"])


@pytest.mark.parametrize("form", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow), 3])
def test_a_min_sized_last_chunk_is_modelled_and_the_chunks_fuse(form: int):
    res = chunks(form)
    (loop,) = [op for op in res.original.host.ops if isinstance(op, Loop)]
    (launch,) = loop.body
    # TOTAL = 1000 in chunks of 256: grids 4, 4, 4, 4 (the last chunk has 232 elements)
    t = [0, 256, 512, 768]
    assert [launch.grid[0].evaluate({"t": v}) for v in t] == [4, 4, 4, 4]
    n = launch.args[3].value
    assert [n.evaluate({"t": v}) for v in t] == [256, 256, 256, 232]
    assert ("max(" if form == 3 else "min(") in str(launch.args[3].value)
    assert (res.launches_before, res.launches_after) == (4, 1)
    verified(res)


def test_min_in_a_loop_that_stays_a_loop_verifies():
    res = chunks(0, unroll=0)
    assert res.launches_after == 4 and not res.fused
    # the instances of the loop, with the chunk's grid bound from min(), in the UAR
    (st,) = [s for s in res.uar.statements if s.kind == "launch"]
    assert st.domain.count_val().to_python() == 4


def test_unsigned_min_of_a_value_that_may_be_negative_is_refused():
    from sirius.analysis.expr import Expr
    from sirius.analysis.host.ops import signed_minmax
    from sirius.analysis.host.values import Int, Unknown

    t = Expr.var("t")
    got = signed_minmax("min", Int(Expr(5) - t, 32), Int(Expr(3), 32), 32, True, {"t": (0, 9)})
    assert isinstance(got, Unknown) and "may be negative" in got.reason
    ok = signed_minmax("min", Int(Expr(9) - t, 32), Int(Expr(3), 32), 32, True, {"t": (0, 9)})
    assert ok == Int((Expr(9) - t).minmax("min", 3), 32)


# repeated members: the unrolled iterations as one member whose blocks compute their arguments --
def members(res: FuseResult):
    (rec,) = res.fused
    return rec.kernel.spec.members


def test_iterations_become_one_repeated_member():
    res = fuse([PROGRAMS / "planes.cu"], Options(), flags=["-DP=16"])
    (m,) = members(res)
    assert (m.repeat, m.strides, m.grid) == (16, (0, 0, 1), (4, 1, 1))  # p steps by 1
    (rec,) = res.fused
    assert rec.kernel.grid == (64, 1, 1) and len(rec.nodes) == 16
    verified(res)
    # 8 planes of 4 blocks: a switch finds each plane's member, and each keeps its constants
    small = fused("planes.cu")
    assert [x.repeat for x in members(small)] == [1] * 8


@pytest.mark.slow  # three compiles; test_iterations_become_one_repeated_member and
# tests/lit/fuse-repeat.ll cover repeated members in make test
def test_pointer_views_step_by_a_row_and_a_float_argument_does_not():
    res = fuse([PROGRAMS / "row_views.cu"], Options(), flags=["-DR=12"])
    (m,) = members(res)
    assert m.repeat == 12 and m.strides == (192 * 4, 192 * 4, 1, 0)
    verified(res)
    apart = fuse([PROGRAMS / "row_views.cu"], Options(), flags=["-DFLOAT_ARG"])
    assert [x.repeat for x in members(apart)] == [1] * 6 and apart.launches_after == 1
    verified(apart)


def test_repeat_runs_breaks_where_a_step_changes():
    from sirius.analysis.expr import Expr
    from sirius.analysis.host.model import BufferArg, DevRef, Launch, ScalarArg
    from sirius.fusion.members import repeat_runs
    from sirius.fusion.spec import Member

    m = Member("k", (16, 1, 1), (32, 1, 1))  # 3 launches of 16 blocks: more than a switch
    one = (Expr(1), Expr(1), Expr(1))

    def launch(off: int, n: int, buf: str = "a") -> Launch:
        return Launch("k", "k", one, one, Expr(0),
                      (BufferArg(DevRef(buf, Expr(off))), ScalarArg("i32", Expr(n))))

    types = ("ptr", "i32")
    runs = repeat_runs([(m, launch(0, 5), types), (m, launch(64, 5), types),
                        (m, launch(128, 5), types), (m, launch(200, 5), types),
                        (m, launch(0, 1, "b"), types), (m, launch(0, 2, "c"), types)])
    # 0, 64, 128 step by 64; 200 does not; buffers b and c are different allocations
    assert [(x.repeat, x.strides) for x, _, _ in runs] == [(3, (64, 0)), (1, ()), (1, ()),
                                                          (1, ())]
    same = repeat_runs([(m, launch(0, 5), types)] * 3)  # identical launches: nothing steps
    assert [x.repeat for x, _, _ in same] == [1, 1, 1]
    small = Member("k", (2, 1, 1), (32, 1, 1))  # 3 x 2 blocks: a switch, members apart
    assert [x.repeat for x, _, _ in repeat_runs(
        [(small, launch(64 * k, 5), types) for k in range(3)])] == [1, 1, 1]


def test_a_megakernel_unrolls_dependent_iterations_and_says_so():
    """dependent_steps.cu: without a megakernel the loop stays (its iterations depend on each
    other); with one it is unrolled in order into the megakernel, and the report says that,
    not "independent iterations" (it once did)."""
    plain = fused("dependent_steps.cu")
    assert plain.launches_after == 8 and "iterations depend on each other" in report_md(plain)
    res = fuse([PROGRAMS / "dependent_steps.cu"], Options(megakernel="grid"))
    assert res.launches_after == 1
    md = report_md(res)
    assert "loop t: 4 iterations unrolled in their order into 8 launches" in md
    assert "independent iterations" not in md
    assert plan_json(res)["unrolled"][0]["independent"] is False
    verified(res)
