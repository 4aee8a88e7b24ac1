"""The wavefront rewrite of host loop nests (`sirius.fusion.plan.wavefront`).

Expected stages and launch orders are derived by hand from the loop bounds in the sources: a
nest of n_l x n_t iterations has stages w = i + j in [0, n_l + n_t - 2], stage w holding the
i in [max(0, w - n_t + 1), min(n_l - 1, w)] (j = w - i). Every rewritten program must launch
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
from codegen_support import KERNELS, Loaded, load, run

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, HostProgram, Launch, Loop, Op, ScalarArg
from sirius.analysis.host.render import render_ops
from sirius.analysis.irview import build_view
from sirius.analysis.uar.build import build_uar
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
    assert nest.skew == "w = l + t"
    # w = l + t over l in [0, 2), t in [0, 4): w = 0..4 with 1, 2, 2, 2, 1 cells
    assert nest.stages == (1, 2, 2, 2, 1)
    assert nest.launches == 8
    # stages 1..3 have min(L, T) = 2 members: the loop; stage 0 and 4 unrolled
    assert nest.loop == (1, 3) and nest.var == "w"
    assert nest.launch_ops == (1, 1 + 2 + 1)
    assert nest.schedule is not None and "S6[l, t]" in nest.schedule
    assert nest.permutable is True
    assert nest.to_json()["stages"] == [1, 2, 2, 2, 1]


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


# illegal and ineligible nests ------------------------------------------------------------------
def test_refused_nests_are_left_alone():
    loaded, res = rewritten(PROGRAMS / "refused.cu", unroll=0)
    diag, memset, pingpong, steep = res.nests
    assert res.rewritten == (diag,)
    # cell (l, t) writes level l+1 slot t, which cell (l+1, t-1) reads: distance (1, -1), legal
    # under w = 2l + t only
    assert diag.vars == ("l", "t") and diag.skew == "w = 2*l + t"
    assert diag.stages == (1, 1, 2, 2, 2, 2, 1, 1) and diag.loop is None
    assert "memset" in memset.reason
    assert f"refused.cu:{line_of(PROGRAMS / 'refused.cu', 'cudaMemset(d_b')}:" in memset.reason
    assert "rotating" in pingpong.reason
    assert f"refused.cu:{line_of(PROGRAMS / 'refused.cu', '(src, dst, N)')}:" in pingpong.reason
    # distance (1, -3): no skew tried separates the two ends
    assert not steep.rewritten and "RAW on d_e" in steep.reason
    assert "one wavefront" in steep.reason and "steeper skew" in steep.reason
    assert steep.schedule is not None
    assert "left alone" in str(steep)


def test_a_steeper_skew_keeps_every_value():
    """The (1, -1) nest under w = 2l + t: every instance once, each after the ones it reads
    (its launches run bitwise the same in forward and reverse block order)."""
    loaded, res = rewritten(PROGRAMS / "refused.cu", unroll=0)
    check_runs_same(loaded, res.host)
    got = concrete(tuple(op for op in res.host.ops if isinstance(op, Launch)))
    want = concrete((nest_of(loaded.host.ops, "l"),))
    assert sorted(got) == sorted(want) and got != want  # the same launches, reordered
    # stage by stage (w = 2l + t): each launch after the one whose output it reads
    pos = {x[4][1][1]: k for k, x in enumerate(got)}  # output offset -> position
    for k, x in enumerate(got):
        assert pos.get(x[4][0][1], -1) < k


# two launches per instance, inside an outer loop -----------------------------------------------
def test_cell_then_scale_keeps_body_order():
    loaded, res = rewritten(PROGRAMS / "cell_then_scale.cu")
    (nest,) = res.nests  # the b loop also clears memory: not a nest head itself
    assert nest.rewritten, nest.reason
    assert nest.vars == ("l", "t") and nest.skew == "w = l + t"
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
    # g = 1, 3, 5 (i = (g - 1)/2), l = 1, 0 (j = 1 - l): 3 x 2 -> stages 1, 2, 2, 1
    assert nest.vars == ("g", "l") and nest.skew == "w = (g - 1)/2 + (1 - l)"
    assert nest.stages == (1, 2, 2, 1) and nest.loop == (1, 2)
    assert nest.launches == 18  # 6 (g, l) instances x 3 steps t
    loop = next(op for op in res.host.ops if isinstance(op, Loop) and op.var == "w")
    assert [op.var for op in loop.body] == ["t", "t"]  # type: ignore[union-attr]
    src = nest_of(loaded.host.ops, "g")
    want = [x for i, j in stage_order(3, 2)
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
