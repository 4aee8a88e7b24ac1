"""The UAR of every hand-written corpus program, derived by hand from the source.

For each program: the complete set of dependences between launches (kind, buffer, width), the
host-level relations where host loops are involved, and which static accesses are exact.
Dependences are memory-based, except that a pair is dropped when a loop-free statement between
the two writes every byte both touch (docs/analyze.md, "pruning"); each expectation below says
why. Launches are named L0, L1, ... in launch order.
"""

from __future__ import annotations

import islpy as isl
import pytest

from tests.analysis.support import dep, inexact_accesses, launch_deps, uar_of

THREAD, BLOCK, GLOBAL = "THREAD", "BLOCK", "GLOBAL"
EXACT_PROGRAMS = ["block_reduce.cu", "early_return.cu", "elementwise_chain.cu", "gaussian.cu",
                  "helper_launch.cu", "lstm_cell.cu", "matmul_bias_act.cu", "qkv_branches.cu",
                  "stencil_pingpong.cu", "transpose_elementwise.cu", "two_mm.cu",
                  "block_reverse.cu"]


def same(relation: isl.Map, text: str) -> bool:
    return relation.is_equal(isl.Map(text))


def test_elementwise_chain():
    u = uar_of("elementwise_chain.cu")
    # scale (blocks of 128) writes y[i]; add_bias (blocks of 256) reads y[i]: thread i feeds
    # thread i of the global linear numbering -> THREAD, aligned on the linear thread id.
    # add_bias writes z[i]; relu reads and writes z[i] in place -> RAW and WAW, THREAD.
    # square reads z[i]: its RAW from add_bias is pruned, relu rewrote all of z in between.
    assert launch_deps(u) == {
        ("L0", "L1", "RAW", "d_y", THREAD),
        ("L1", "L2", "RAW", "d_z", THREAD),
        ("L1", "L2", "WAW", "d_z", THREAD),
        ("L2", "L3", "RAW", "d_z", THREAD),
    }
    assert {dep(u, "L0", "L1", "RAW", "d_y").alignment,
            dep(u, "L2", "L3", "RAW", "d_z").alignment} == {"linear"}


def test_matmul_bias_act():
    u = uar_of("matmul_bias_act.cu")
    # matmul thread (bx, by, tx, ty) writes C[(16by + ty) * 64 + 16bx + tx]; bias_add thread i
    # reads and writes C[i]: one matmul thread per bias thread and back, but not the same linear
    # id -> THREAD through a bijection (bias_add has no barrier: it can be re-indexed).
    # act_tanh reads C[i] after bias_add wrote it: same linear id -> THREAD (linear). Its RAW
    # from matmul is pruned: bias_add rewrote all of C in between.
    assert launch_deps(u) == {
        ("L0", "L1", "RAW", "d_C", THREAD),
        ("L0", "L1", "WAW", "d_C", THREAD),
        ("L1", "L2", "RAW", "d_C", THREAD),
    }
    assert dep(u, "L0", "L1", "RAW", "d_C").alignment == "bijection"
    assert dep(u, "L1", "L2", "RAW", "d_C").alignment == "linear"


def test_transpose_elementwise():
    u = uar_of("transpose_elementwise.cu")
    # scale_shift block j reads T[256j, 256j + 256) = two 128-float rows of T, written by the
    # four transpose blocks of one 32-row band; and each transpose thread writes four rows
    # (its j loop) read by four scale_shift threads -> neither one-to-one: GLOBAL.
    assert launch_deps(u) == {("L0", "L1", "RAW", "d_t", GLOBAL)}


def test_two_mm():
    u = uar_of("two_mm.cu")
    # mm2_kernel2 thread (l, i) reads the whole row i of tmp (40 floats), written by 40 threads
    # of mm2_kernel1 in both of its x blocks -> GLOBAL. D is touched by kernel 2 only.
    assert launch_deps(u) == {("L0", "L1", "RAW", "d_tmp", GLOBAL)}


def test_block_reduce():
    u = uar_of("block_reduce.cu")
    # the one block of the second pass reads all 79 partial sums, one per block of the first.
    assert launch_deps(u) == {("L0", "L1", "RAW", "d_partial", GLOBAL)}


def test_qkv_branches_are_independent():
    u = uar_of("qkv_branches.cu")
    # the three dense_bias launches share only X, which none writes: no dependence at all.
    assert launch_deps(u) == set()
    x_readers = {d.dst for d in u.dependences if d.buffer == "d_X"}
    assert len(x_readers) == 3  # the H2D copy of X feeds each of them


def test_early_return():
    u = uar_of("early_return.cu")
    # both kernels return early for i >= 1000; square_diff's grid over-covers n, and the guard
    # keeps its reads of y inside [0, 4000) bytes: y[i] written by scale_shift thread i (blocks
    # of 256), read by square_diff thread i (blocks of 128) -> THREAD on the linear id.
    assert launch_deps(u) == {("L0", "L1", "RAW", "d_y", THREAD)}
    eff = {(e.buffer, e.mode): e.box for e in u.effects[dep(u, "L0", "L1", "RAW", "d_y").dst]}
    assert eff[("d_y", "read")] == (0, 3999)


def test_helper_launch():
    u = uar_of("helper_launch.cu")
    # forward(x, y1, tmp) = scale(x -> tmp) (L0), add_relu(tmp, x -> y1) (L1);
    # forward(y1, y2, tmp) = scale(y1 -> tmp) (L2), add_relu(tmp, y1 -> y2) (L3);
    # accumulate = axpy(y2 += 0.5 rows[r]) (L4, r in [0, 3)). Every launch is 4 x 128 threads
    # and thread i touches element i of everything: THREAD, identity.
    # L0 -> L3 (RAW tmp) is pruned: L2 rewrote all of tmp in between.
    i = THREAD
    assert launch_deps(u) == {
        ("L0", "L1", "RAW", "d_tmp", i), ("L0", "L2", "WAW", "d_tmp", i),
        ("L1", "L2", "WAR", "d_tmp", i), ("L1", "L2", "RAW", "d_y1", i),
        ("L1", "L3", "RAW", "d_y1", i), ("L2", "L3", "RAW", "d_tmp", i),
        ("L3", "L4", "RAW", "d_y2", i), ("L3", "L4", "WAW", "d_y2", i),
        ("L4", "L4", "RAW", "d_y2", i), ("L4", "L4", "WAR", "d_y2", i),
        ("L4", "L4", "WAW", "d_y2", i),
    }
    assert all(d.alignment == "identity" for d in u.dependences if d.width == THREAD)
    # each axpy iteration reads what every earlier one wrote (memory-based)
    d = dep(u, "L4", "L4", "RAW", "d_y2")
    assert same(d.relation, f"{{ {d.src}[r] -> {d.dst}[r'] : 0 <= r < r' < 3 }}")


def test_histogram_atomics():
    u = uar_of("histogram_atomics.cu")
    assert launch_deps(u) == set()  # one launch
    # the memset of hist before the launch: the atomics read it (RAW) and write it (WAW)
    kinds = {(d.kind, d.buffer) for d in u.dependences if d.dst == "S2" and d.src == "S1"}
    assert kinds == {("RAW", "d_hist"), ("WAW", "d_hist")}
    # atomicAdd(&s_hist[data[i] % 64]) has a data-dependent index: the whole shared array,
    # inexact. Everything else is affine and exact.
    assert inexact_accesses(u) == [("histogram", "atomic", "shared:_ZZ9histogramPKjPjiE6s_hist")]


def test_stencil_pingpong():
    u = uar_of("stencil_pingpong.cu")
    # step t reads A_t and writes B_t, (A_t, B_t) = (d_in, d_out) for even t, swapped for odd.
    # Step t' > t reads what step t wrote when t' - t is odd; a thread reads its four
    # neighbours, some in other blocks -> RAW GLOBAL across iterations; likewise WAR. Steps
    # two apart write the same buffer element by element -> WAW THREAD (identity).
    assert launch_deps(u) == {
        ("L0", "L0", "RAW", "d_in", GLOBAL), ("L0", "L0", "RAW", "d_out", GLOBAL),
        ("L0", "L0", "WAR", "d_in", GLOBAL), ("L0", "L0", "WAR", "d_out", GLOBAL),
        ("L0", "L0", "WAW", "d_in", THREAD), ("L0", "L0", "WAW", "d_out", THREAD),
    }
    d = dep(u, "L0", "L0", "RAW", "d_out")  # written at even t, read at odd t' > t
    s = d.src
    assert same(d.relation, f"{{ {s}[t] -> {s}[t'] : 0 <= t < t' <= 4 and t mod 2 = 0 and "
                            "t' mod 2 = 1 }")
    d = dep(u, "L0", "L0", "WAW", "d_in")  # d_in is the output at odd t
    assert same(d.relation, f"{{ {s}[t] -> {s}[t'] : 0 <= t < t' <= 4 and t mod 2 = 1 and "
                            "t' mod 2 = 1 }")


def test_converge_loop():
    u = uar_of("converge_loop.cu")
    # Like the stencil, in an opaque loop _loop1 (k = 0, 1, ...): relax reads x[i-1..i+1] of
    # one buffer and writes y[i] of the other -> RAW and WAR GLOBAL across iterations, WAW
    # THREAD two iterations apart; every thread may write *flag -> WAW GLOBAL.
    assert launch_deps(u) == {
        ("L0", "L0", "RAW", "d_x", GLOBAL), ("L0", "L0", "RAW", "d_y", GLOBAL),
        ("L0", "L0", "WAR", "d_x", GLOBAL), ("L0", "L0", "WAR", "d_y", GLOBAL),
        ("L0", "L0", "WAW", "d_x", THREAD), ("L0", "L0", "WAW", "d_y", THREAD),
        ("L0", "L0", "WAW", "d_flag", GLOBAL),
    }
    # the flag store is guarded by a data-dependent test: a may-write, inexact
    assert inexact_accesses(u) == [("relax", "store", "param:3")]
    # the D2H copy of the flag decides whether the loop goes on: control edges to the next
    # iterations of the body and to everything after the loop
    copy = next(st for st in u.statements if st.kind == "copy" and st.vars == ("_loop1",))
    ctrl = {d.dst for d in u.dependences if d.kind == "CTRL" and d.src == copy.id}
    later = {st.id for st in u.statements if st.vars == ("_loop1",)} | {
        st.id for st in u.statements if int(st.id[1:]) > int(copy.id[1:])}
    assert ctrl == later


def test_gaussian():
    u = uar_of("gaussian.cu")
    # Per step t: Fan1 (1-D) writes column t of m below the pivot; Fan2 (2-D) reads that column
    # (every thread of row r reads m[r][t]) -> RAW GLOBAL. Fan1 reads a[r][t], which Fan2's
    # thread (r - 1 - t, 0) overwrites -> WAR, one-to-one -> THREAD. Across steps t < t': every
    # launch of step t' reads the pivot row t' that Fan2 of step t wrote, one element for all
    # threads -> RAW GLOBAL (Fan2 -> Fan1 and Fan2 -> Fan2, on a and b); an element a[r][c]
    # or b[r] rewritten or re-read later is touched by one thread in each step -> WAW, WAR
    # THREAD.
    assert launch_deps(u) == {
        ("L0", "L1", "RAW", "d_m", GLOBAL), ("L0", "L1", "WAR", "d_a", THREAD),
        ("L1", "L0", "RAW", "d_a", GLOBAL),
        ("L1", "L1", "RAW", "d_a", GLOBAL), ("L1", "L1", "RAW", "d_b", GLOBAL),
        ("L1", "L1", "WAR", "d_a", THREAD), ("L1", "L1", "WAR", "d_b", THREAD),
        ("L1", "L1", "WAW", "d_a", THREAD), ("L1", "L1", "WAW", "d_b", THREAD),
    }
    d = dep(u, "L0", "L1", "RAW", "d_m")  # within one step only
    assert same(d.relation, f"{{ {d.src}[t] -> {d.dst}[t'] : t' = t and 0 <= t <= 62 }}")
    d = dep(u, "L1", "L0", "RAW", "d_a")  # Fan2 at t feeds Fan1 at every later step
    assert same(d.relation, f"{{ {d.src}[t] -> {d.dst}[t'] : 0 <= t < t' <= 62 }}")


def test_lstm_cell():
    u = uar_of("lstm_cell.cu")
    # Cell (l, t) thread j writes c_out[j] that cell (l, t + 1) thread j reads as c_prev[j]
    # -> RAW THREAD (identity). It writes h_out, read by cell (l, t + 1) as h_prev and by
    # (l + 1, t) as x, both staged whole into shared memory by every block -> GLOBAL, along
    # both loops. Every slot is written once, after it was last read: no WAR or WAW.
    assert launch_deps(u) == {("L0", "L0", "RAW", "d_c", THREAD),
                              ("L0", "L0", "RAW", "d_h", GLOBAL)}
    s = dep(u, "L0", "L0", "RAW", "d_c").src
    assert same(dep(u, "L0", "L0", "RAW", "d_c").relation,
                f"{{ {s}[l, t] -> {s}[l, t + 1] : 0 <= l <= 1 and 0 <= t <= 2 }}")
    assert same(dep(u, "L0", "L0", "RAW", "d_h").relation,
                f"{{ {s}[l, t] -> {s}[l, t + 1] : 0 <= l <= 1 and 0 <= t <= 2; "
                f"{s}[0, t] -> {s}[1, t] : 0 <= t <= 3 }}")


@pytest.mark.parametrize("program", EXACT_PROGRAMS)
def test_affine_programs_are_exact(program):
    # every index in these kernels is quasi-affine in the thread ids, loop counters and the
    # constant scalar arguments, and every guard is affine
    assert inexact_accesses(uar_of(program)) == []
    exact, total = uar_of(program).exactness()
    assert exact == total > 0
