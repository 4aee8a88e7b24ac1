"""The wavefront rewrite of host loop nests (`sirius.fusion.plan.wavefront`).

Expected stages and launch orders are derived by hand from the loop bounds in the sources: a
nest of n_l x n_t iterations has stages w = i + j in [0, n_l + n_t - 2], stage w holding the
i in [max(0, w - n_t + 1), min(n_l - 1, w)] (j = w - i); other skews (w = l, w = 5l + t) are
counted by hand where they are tested. Every rewritten program must launch
exactly the original instances (compared by evaluating every launch to concrete numbers) and
leave every buffer bitwise equal to the original's on the CPU executor.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
from codegen_support import KERNELS, ORDERS, Loaded, load, run

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, HostProgram, Launch, Loop, Op, ScalarArg
from sirius.analysis.host.render import render_ops
from sirius.analysis.irview import build_view
from sirius.analysis.uar.build import build_uar
from sirius.fusion.plan.skews import NestRange, band_skews, skew_text
from sirius.fusion.plan.wavefront import WavefrontResult, wavefront_rewrite

PROGRAMS = Path(__file__).resolve().parent / "wavefront_programs"


def uar_of(loaded: Loaded, host: HostProgram | None = None):
    return build_uar(build_view(loaded.program.device_module), list(loaded.kernels),
                     host or loaded.host)


@functools.cache
def rewritten(path: Path, **options) -> tuple[Loaded, WavefrontResult]:
    loaded = load(path)
    return loaded, wavefront_rewrite(loaded.host, uar_of(loaded), **options)


# concrete launches -----------------------------------------------------------------------------
def _value(v: Expr | float, env: dict[str, int]) -> int | float:
    return v.evaluate(env) if isinstance(v, Expr) else v


def concrete(ops: tuple[Op, ...], env: dict[str, int] | None = None) -> list[tuple]:
    """Every launch `ops` makes, in order, with its numbers evaluated:
    (kernel, grid, block, smem, args as (buffer, byte offset) or scalar values)."""
    env = env or {}
    out: list[tuple] = []
    for op in ops:
        if isinstance(op, Loop):
            v, hi = op.lo.evaluate(env), op.hi.evaluate(env)
            while (v < hi) if op.step > 0 else (v > hi):
                out += concrete(op.body, {**env, op.var: v})
                v += op.step
        elif isinstance(op, Launch):
            args = tuple((a.address.buffer, a.address.offset.evaluate(env))
                         if isinstance(a, BufferArg) else
                         _value(a.value, env) if isinstance(a, ScalarArg) else None
                         for a in op.args)
            out.append((op.kernel, tuple(e.evaluate(env) for e in op.grid),
                        tuple(e.evaluate(env) for e in op.block), op.smem.evaluate(env), args))
    return out


def nest_of(ops: tuple[Op, ...], var: str) -> Loop:
    for op in ops:
        if isinstance(op, Loop):
            if op.var == var:
                return op
            try:
                return nest_of(op.body, var)
            except KeyError:
                pass
    raise KeyError(var)


def instance(nest: Loop, env: dict[str, int]) -> list[tuple]:
    """The launches of one iteration of the nest's innermost skewed loop body."""
    inner = nest.body[0]
    assert isinstance(inner, Loop)
    return concrete(inner.body, env)


def stage_order(n_l: int, n_t: int) -> list[tuple[int, int]]:
    """The (i, j) iteration counts in wavefront order, by hand: stage by stage, i increasing."""
    return [(i, w - i) for w in range(n_l + n_t - 1)
            for i in range(max(0, w - n_t + 1), min(n_l - 1, w) + 1)]


def line_of(path: Path, text: str) -> int:
    """The (1-based) number of the only line of `path` that contains `text`."""
    (n,) = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return n


def check_runs_same(loaded: Loaded, host: HostProgram, orders=("forward", "reverse")) -> None:
    ref = run(loaded.host, loaded.program, loaded, "forward", seed=11)
    for order in orders:
        got = run(host, loaded.program, loaded, order, seed=11, dtypes=ref.dtypes)
        assert len(got.launches) == len(ref.launches)
        for name, want in ref.final.items():
            np.testing.assert_array_equal(got.final[name], want,
                                          err_msg=f"buffer {name}, order {order}")


# lstm_cell.cu: L = 2 layers, T = 4 steps ---------------------------------------------------------
def test_lstm_record():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    assert res.host is not loaded.host
    (nest,) = res.nests
    assert nest.rewritten, nest.reason
    assert nest.vars == ("l", "t")
    assert nest.skew == "w = l + t" and nest.skew_from == "isl band"
    # w = l + t over l in [0, 2), t in [0, 4): w = 0..4 with 1, 2, 2, 2, 1 cells
    assert nest.stages == (1, 2, 2, 2, 1)
    assert nest.launches == 8
    # stages 1..3 have min(L, T) = 2 members: the loop; stage 0 and 4 unrolled
    assert nest.loop == (1, 3) and nest.var == "w"
    assert nest.launch_ops == (1, 1 + 2 + 1)
    assert nest.schedule is not None and "S6[l, t]" in nest.schedule
    assert nest.permutable is True
    assert nest.to_json()["stages"] == [1, 2, 2, 2, 1]
    assert nest.to_json()["skew_from"] == "isl band" and "w = l + t (isl band);" in str(nest)


def test_lstm_shape_and_args():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    ops = res.host.ops
    i = next(k for k, op in enumerate(loaded.host.ops) if isinstance(op, Loop))
    assert ops[:i] == loaded.host.ops[:i]  # what comes before the nest is untouched
    first, loop, last = ops[i:i + 3]
    assert ops[i + 3:] == loaded.host.ops[i + 1:]  # and what comes after
    assert isinstance(first, Launch) and isinstance(last, Launch)
    assert isinstance(loop, Loop) and loop.var == "w" and loop.step == 1
    assert (loop.lo, loop.hi) == (Expr(1), Expr(4))
    assert len(loop.body) == 2 and all(isinstance(op, Launch) for op in loop.body)
    # stage member k = l, t = w - l: the header's offsets, 1280l + 256t + 256 for x, become
    # 256w + 256 (l = 0) and 256w + 1280 (l = 1); the weights d_w + 65536l are constant
    w = Expr.var("w")
    x0, x1 = (op.args[0].address.offset for op in loop.body)  # type: ignore[union-attr]
    assert (x0, x1) == (w.scale(256) + 256, w.scale(256) + 1280)
    assert [op.args[3].address.offset for op in loop.body] == [Expr(0), Expr(65536)]
    # the prologue is cell (0, 0), the epilogue cell (1, 3): constant args
    assert concrete((first,)) == instance(nest_of(loaded.host.ops, "l"), {"l": 0, "t": 0})
    assert concrete((last,)) == instance(nest_of(loaded.host.ops, "l"), {"l": 1, "t": 3})


def test_lstm_every_instance_once_in_stage_order():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    nest = nest_of(loaded.host.ops, "l")
    k = loaded.host.ops.index(nest)
    want = [x for i, j in stage_order(2, 4) for x in instance(nest, {"l": i, "t": j})]
    assert concrete(res.host.ops) == concrete(loaded.host.ops[:k]) + want + \
        concrete(loaded.host.ops[k + 1:])
    assert sorted(want) == sorted(concrete((nest,)))


def test_lstm_runs_bitwise_same():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    check_runs_same(loaded, res.host)


def test_lstm_stage_members_are_independent_in_the_new_uar():
    """Built again on the rewritten program, the UAR finds no dependence between the two
    launches of one stage (same w): they can be fused horizontally."""
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    uar = uar_of(loaded, res.host)
    loop_ids = [st.id for st in uar.statements if st.vars == ("w",)]
    assert len(loop_ids) == 2
    for d in uar.dependences:
        if d.src in loop_ids and d.dst in loop_ids:
            same_w = d.relation.intersect(isl.Map(f"{{ {d.src}[w] -> {d.dst}[w2] : w2 = w }}"))
            assert same_w.is_empty(), d


def test_lstm_fully_unrolled_and_fresh_variable():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu", min_loop_stages=4)
    (nest,) = res.nests
    assert nest.loop is None and nest.launch_ops == (1, 8)
    assert not any(isinstance(op, Loop) for op in res.host.ops)
    assert concrete(res.host.ops) == concrete(rewritten(KERNELS / "lstm_cell.cu")[1].host.ops)
    # a wavefront variable that would clash with a loop of the program gets a fresh name
    _, named = rewritten(KERNELS / "lstm_cell.cu", var="t")
    assert named.nests[0].var == "t1" and named.nests[0].skew == "t1 = l + t"
    assert concrete(named.host.ops) == concrete(res.host.ops)


# skews from isl's band, and nests left alone --------------------------------------------------
def test_refused_nests_are_left_alone():
    loaded, res = rewritten(PROGRAMS / "refused.cu", unroll=0)
    diag, memset, pingpong, steep = res.nests
    assert res.rewritten == (diag, steep)
    # cell (l, t) writes level l+1 slot t, which cell (l+1, t-1) reads: distance (1, -1) (the
    # file's comment predates isl's band: w = 2l + t is legal too, but has 8 stages). The steps
    # t of one level l are independent, so isl's band row l alone is legal: 3 stages of 4
    assert diag.vars == ("l", "t") and diag.skew == "w = l" and diag.skew_from == "isl band"
    assert diag.stages == (4, 4, 4) and diag.loop is None
    assert "memset" in memset.reason
    assert f"refused.cu:{line_of(PROGRAMS / 'refused.cu', 'cudaMemset(d_b')}:" in memset.reason
    assert "rotating" in pingpong.reason
    assert f"refused.cu:{line_of(PROGRAMS / 'refused.cu', '(src, dst, N)')}:" in pingpong.reason
    # distance (1, -3), beyond every fixed skew: the same band row l (the file says "left alone")
    assert steep.skew == "w = l" and steep.stages == (4, 4, 4)


def test_a_level_wavefront_keeps_every_value():
    """The (1, -1) nest under w = l: every instance once, each after the ones it reads (its
    launches run bitwise the same in forward and reverse block order)."""
    loaded, res = rewritten(PROGRAMS / "refused.cu", unroll=0)
    check_runs_same(loaded, res.host)
    got = concrete(tuple(op for op in res.host.ops if isinstance(op, Launch))[:12])
    want = concrete((nest_of(loaded.host.ops, "l"),))
    assert sorted(got) == sorted(want)
    # stage by stage (w = l): each launch after the one whose output it reads
    pos = {x[4][1][1]: k for k, x in enumerate(got)}  # output offset -> position
    for k, x in enumerate(got):
        assert pos.get(x[4][0][1], -1) < k


def test_isl_band_gives_a_skew_no_fixed_one_has():
    """isl_skews.cu nest 1, distances (0, 1) and (1, -4): isl's band [l, 4l + t] sums to
    w = 5l + t, steeper than every skew of the fixed list."""
    loaded, res = rewritten(PROGRAMS / "isl_skews.cu")
    far, chain = res.nests
    assert far.rewritten, far.reason
    assert far.schedule == "{ S0[l, t] -> [l, 4l + t] }" and far.permutable
    assert far.skew == "w = 5*l + t" and far.skew_from == "isl band"
    # L = 3, T = 7: l = 0 fills w = 0..6, l = 1 w = 5..11, l = 2 w = 10..16; two cells in
    # w = 5 ((0, 5), (1, 0)), 6, 10 ((1, 5), (2, 0)) and 11, one in the 13 others
    assert far.stages == (1, 1, 1, 1, 1, 2, 2, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1)
    assert far.loop is None and far.launches == 21 and far.launch_ops == (1, 21)
    # launch order: (0, 0..4), (0, 5), (1, 0), (0, 6), (1, 1), (1, 2..4), (1, 5), (2, 0), ...
    order = [(0, t) for t in range(5)] + [(0, 5), (1, 0), (0, 6), (1, 1)] + \
        [(1, t) for t in range(2, 5)] + [(1, 5), (2, 0), (1, 6), (2, 1)] + \
        [(2, t) for t in range(2, 7)]
    nest = nest_of(loaded.host.ops, "l")
    want = [x for i, j in order for x in instance(nest, {"l": i, "t": j})]
    assert concrete(res.host.ops)[:21] == want
    assert sorted(want) == sorted(concrete((nest,)))
    check_runs_same(loaded, res.host, orders=ORDERS)


def test_a_chain_is_left_alone():
    """isl_skews.cu nest 2: every cell reads the last cell of the layer below, so a legal skew
    puts one cell in each stage (isl's band [l, 6l + t] sums to 7l + t): nothing to fuse."""
    _, res = rewritten(PROGRAMS / "isl_skews.cu")
    chain = res.nests[1]
    assert not chain.rewritten and chain.schedule == "{ S1[l, t] -> [l, 6l + t] }"
    assert "RAW on d_y" in chain.reason and "one wavefront" in chain.reason
    assert "no other skew tried, from isl's band or the fixed list" in chain.reason
    assert "left alone" in str(chain)


def _schedule(band: str, permutable: int = 1) -> isl.Schedule:
    domain = "{ A[b, l, t, k] : 0 <= b, l, t, k <= 3; B[b, l, t] : 0 <= b, l, t <= 3 }"
    return isl.Schedule(f'{{ domain: "{domain}", child: {{ schedule: "{band}", '
                        f"permutable: {permutable} }} }}")


def test_band_skews_from_hand_built_schedules():
    """The skews read off isl's outermost band: its first two rows in the nest's loops (l, t),
    each alone and their sum, in iteration counts; none when the band cannot be used."""
    lt = (NestRange("l", 0, 1, 4), NestRange("t", 0, 1, 4))
    rows = "[{ A[b, l, t, k] -> [(b)]; B[b, l, t] -> [(b)] }, " \
           "{ A[b, l, t, k] -> [(l + 2)]; B[b, l, t] -> [(l + 2)] }, " \
           "{ A[b, l, t, k] -> [(4l + t)]; B[b, l, t] -> [(4l + t)] }]"
    # the enclosing loop b's row is skipped; the constant 2, the same for A and B, is harmless
    assert band_skews(_schedule(rows), lt) == ((1, 0), (4, 1), (5, 1))
    # l = 6 - 2i (descending, step 2), t = 1 + 3j: l -> -2i, 4l + t -> -8i + 3j
    steps = (NestRange("l", 6, -2, 4), NestRange("t", 1, 3, 4))
    assert band_skews(_schedule(rows), steps) == ((-1, 0), (-8, 3), (-10, 3))
    assert band_skews(_schedule(rows, permutable=0), lt) == ()
    shifted = "[{ A[b, l, t, k] -> [(l)]; B[b, l, t] -> [(l + 1)] }, " \
              "{ A[b, l, t, k] -> [(t)]; B[b, l, t] -> [(t)] }]"
    assert band_skews(_schedule(shifted), lt) == ()  # A and B of one (l, t) apart
    inner = "[{ A[b, l, t, k] -> [(l + k)]; B[b, l, t] -> [(l)] }]"
    assert band_skews(_schedule(inner), lt) == ()  # A's instance spread over k
    assert band_skews(None, lt) == ()
    assert skew_text("w", (-1, 2), lt) == "w = -l + 2*t"
    assert skew_text("w", (1, -1), lt) == "w = l - t" and skew_text("w", (0, 1), lt) == "w = t"


# two launches per instance, inside an outer loop -----------------------------------------------
def test_cell_then_scale_keeps_body_order():
    loaded, res = rewritten(PROGRAMS / "cell_then_scale.cu")
    (nest,) = res.nests  # the b loop also clears memory: not a nest head itself
    assert nest.rewritten, nest.reason
    assert nest.vars == ("l", "t") and nest.skew == "w = l + t" and nest.skew_from == "isl band"
    # L = 3, T = 5: stages w = 0..6 with 1, 2, 3, 3, 3, 2, 1 members; the 3 full ones loop
    assert nest.stages == (1, 2, 3, 3, 3, 2, 1)
    assert nest.loop == (2, 4) and nest.launches == 30
    outer = res.host.ops[2]
    assert isinstance(outer, Loop) and outer.var == "b"
    loop = next(op for op in outer.body if isinstance(op, Loop))
    assert [op.kernel for op in loop.body] == ["cell", "scale"] * 3  # type: ignore[union-attr]
    nest_loop = nest_of(loaded.host.ops, "l")
    for b in (0, 1):
        want = [x for i, j in stage_order(3, 5)
                for x in instance(nest_loop, {"b": b, "l": i, "t": j})]
        got = concrete(outer.body[1:], {"b": b})
        assert got == want  # cell before scale of the same (l, t), stage by stage


def test_cell_then_scale_runs_bitwise_same():
    loaded, res = rewritten(PROGRAMS / "cell_then_scale.cu")
    check_runs_same(loaded, res.host)


def test_swapping_the_body_order_would_be_caught():
    """A control for the test above: the same program with scale launched before cell at each
    (l, t) computes something else, so comparing buffers does detect a lost body order."""
    loaded, _ = rewritten(PROGRAMS / "cell_then_scale.cu")

    def swap(ops: tuple[Op, ...]) -> tuple[Op, ...]:
        out = []
        for op in ops:
            if isinstance(op, Loop):
                body = op.body[::-1] if op.var == "t" else swap(op.body)
                op = dataclasses.replace(op, body=body)
            out.append(op)
        return tuple(out)

    bad = dataclasses.replace(loaded.host, ops=swap(loaded.host.ops))
    with pytest.raises(AssertionError):
        check_runs_same(loaded, bad, orders=("forward",))


# a 3-deep nest: strided and descending loops, the innermost loop kept ---------------------------
def test_deep_nest_skews_the_outer_two():
    loaded, res = rewritten(PROGRAMS / "deep_nest.cu")
    (nest,) = res.nests
    assert nest.rewritten, nest.reason
    # g = 1, 3, 5 (i = (g - 1)/2), l = 1, 0 (j = 1 - l). The groups g are independent (the
    # file's comment predates isl's band): its row -l alone is legal, w = j, 2 stages of 3,
    # fewer than the 4 of i + j
    assert nest.vars == ("g", "l") and nest.skew == "w = (1 - l)"
    assert nest.skew_from == "isl band" and nest.stages == (3, 3) and nest.loop is None
    assert nest.launches == 18  # 6 (g, l) instances x 3 steps t
    assert [op.var for op in res.host.ops if isinstance(op, Loop)] == ["t"] * 6
    src = nest_of(loaded.host.ops, "g")
    want = [x for j in range(2) for i in range(3)
            for x in instance(src, {"g": 1 + 2 * i, "l": 1 - j})]
    assert concrete(res.host.ops) == want


def test_deep_nest_runs_bitwise_same():
    loaded, res = rewritten(PROGRAMS / "deep_nest.cu")
    check_runs_same(loaded, res.host)


def test_provenance():
    loaded, res = rewritten(KERNELS / "lstm_cell.cu")
    got = [res.provenance(op) for op in res.host.launches()]
    assert [g.split(" (")[0] for g in got] == [  # type: ignore[union-attr]
        "S6[l = 0, t = 0]", "S6[l = 0, t = w]", "S6[l = 1, t = w - 1]", "S6[l = 1, t = 3]"]
    assert all(g.endswith("lstm_cell.cu:166:22)") for g in got)  # type: ignore[union-attr]
    assert res.provenance(loaded.host.launches()[0]) is None


def test_render():
    _, res = rewritten(KERNELS / "lstm_cell.cu")
    text = render_ops(res.host.ops)
    assert "for w in [1, 4):" in text
    assert "d_h+(256*w + 256)" in text
