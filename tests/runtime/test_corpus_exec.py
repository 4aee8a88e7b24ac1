"""Every corpus program run on the CPU executor and checked against a numpy reference computed
from the inputs the executor gave it (`RunResult.initial`), for two seeds; plus hand-computed
results with chosen inputs for the warp-shuffle reduction, the atomics histogram and the tiled
matmul.

Tolerances (see execsupport's docstring for the error bound used):
  * bitwise, where the reference repeats the kernel's float32 operations in the same order and a
    contraction into an fma cannot change the result (copies, `s * x`, `y + b`, fmaxf, `v * v`,
    the shuffle tree of block_reduce, the stencil's `0.25f * (((l + r) + u) + d)`, converge_loop's
    `b - 0.25f * s` and helper_launch's `acc + 0.5f * x`, where the product is exact, and the
    integer histograms);
  * within one or two float32 roundings where clang may contract `a * b + c` into an fma and the
    product is inexact (early_return's `y * y - x`, transpose_elementwise's `1.5f * t + 0.25f`);
  * the sum-of-products bound gamma(n + 2) * sum |terms| for the matrix products (matmul, qkv,
    two_mm), computed per element from a float64 reference;
  * for the two recurrences (gaussian, lstm_cell), a stated absolute tolerance with its reason.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.runtime.execsupport import (
    KERNELS,
    U32,
    assert_bitwise,
    assert_within,
    gamma,
    run,
    run_cached,
)

SEEDS = (11, 12)
F32 = np.float32


# ---- block_reduce ------------------------------------------------------------------------------
def warp_reduce(v: np.ndarray) -> np.ndarray:
    """Lane 0 of warp_reduce_sum over the last axis (32 lanes): v += shfl_down(v, o) for
    o = 16, 8, 4, 2, 1, where a lane whose source lane l + o is past 31 gets its own value."""
    v = v.astype(F32)
    for off in (16, 8, 4, 2, 1):
        down = v.copy()
        down[..., :32 - off] = v[..., off:]
        v = v + down
    return v[..., 0]


def reduce_sum_ref(x: np.ndarray, nblocks: int, block: int) -> np.ndarray:
    """reduce_sum<<<nblocks, block>>>(x, out, len(x)) in float32, same association order."""
    padded = np.zeros(nblocks * block, F32)
    padded[:x.size] = x
    warp_sums = warp_reduce(padded.reshape(nblocks, block // 32, 32))  # (blocks, warps)
    lanes = np.zeros((nblocks, 32), F32)
    lanes[:, :block // 32] = warp_sums
    return warp_reduce(lanes)


def check_block_reduce(r) -> None:
    x = r.initial["d_in"]
    partial = reduce_sum_ref(x, 79, 256)
    assert_bitwise(r.final["d_partial"], partial, "d_partial")
    assert_bitwise(r.final["d_result"], reduce_sum_ref(partial, 1, 128), "d_result")
    # and the whole thing is a sum: within the bound of a tree of depth 8 + 7 over 20000 terms
    assert_within(r.final["d_result"][0], np.sum(x, dtype=np.float64),
                  gamma(15) * np.sum(np.abs(x), dtype=np.float64), "d_result vs exact sum")
    assert_bitwise(r.final["d_in"], x, "d_in (read only)")


# ---- converge_loop -----------------------------------------------------------------------------
def jacobi_step(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    left = np.concatenate([[F32(0)], x[:-1]])
    right = np.concatenate([x[1:], [F32(0)]])
    # b - 0.25f * (left + right): the scaling by 0.25 is exact, so an fma and a multiply-then-
    # subtract both round b - s/4 once, which is what rounding the float64 value does: bitwise.
    return (b.astype(np.float64) - 0.25 * (left + right).astype(np.float64)).astype(F32)


def check_converge_loop(r, trips: int = 3) -> None:
    x, b = r.initial["d_x"], r.initial["d_b"]
    xs = [x]
    for _ in range(trips):
        xs.append(jacobi_step(xs[-1], b))
    # step k reads the newest iterate and writes d_y at even k, d_x at odd k (ping-pong)
    newest, older = ("d_y", "d_x") if trips % 2 == 1 else ("d_x", "d_y")
    assert_bitwise(r.final[newest], xs[trips], newest)
    assert_bitwise(r.final[older], xs[trips - 1], older)
    moved = np.abs(xs[trips] - xs[trips - 1]) > F32(1e-5)
    assert r.final["d_flag"].tolist() == [int(moved.any())]
    assert any(f"ran {trips} times" in n for n in r.notes)
    assert len(r.launches) == trips


def test_converge_loop_runs_opaque_trips_steps():
    # 4 steps instead of 3: the newest iterate now lands in d_x, not d_y.
    check_converge_loop(run("converge_loop.cu", seed=SEEDS[0], opaque_trips=4), trips=4)
    check_converge_loop(run("converge_loop.cu", seed=SEEDS[0], opaque_trips=1), trips=1)


# ---- early_return ------------------------------------------------------------------------------
def check_early_return(r) -> None:
    x = r.initial["d_x"]
    # y = 2x + 0.5: 2x is exact, so fused or not there is a single rounding: bitwise.
    y = (2.0 * x.astype(np.float64) + 0.5).astype(F32)
    assert_bitwise(r.final["d_y"], y, "d_y")
    # z = y*y - x may be an fma: within one rounding of the exact value plus one of y*y.
    exact = y.astype(np.float64) ** 2 - x
    assert_within(r.final["d_z"], exact, U32 * (np.abs(exact) + y.astype(np.float64) ** 2),
                  "d_z")


# ---- elementwise_chain -------------------------------------------------------------------------
def check_elementwise_chain(r) -> None:
    x, bias = r.initial["d_x"], r.initial["d_bias"]
    y = F32(0.5) * x
    z = np.fmax(y + bias, F32(0))
    assert_bitwise(r.final["d_y"], y, "d_y")
    assert_bitwise(r.final["d_z"], z, "d_z")
    assert_bitwise(r.final["d_out"], z * z, "d_out")


# ---- gaussian ----------------------------------------------------------------------------------
def gaussian_inputs(seed: int) -> dict[str, np.ndarray]:
    """Elimination without pivoting needs a matrix that does not need pivoting: random entries
    in [-1, 1) plus 64 on the diagonal (strictly diagonally dominant), fresh per seed."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (64, 64)) + 64 * np.eye(64)
    return {"d_a": a.astype(F32).reshape(-1)}


def check_gaussian(r) -> None:
    a = r.initial["d_a"].reshape(64, 64).copy()
    b = r.initial["d_b"].copy()
    m = r.initial["d_m"].reshape(64, 64).copy()
    assert not m.any(), "d_m is cleared by cudaMemset before the first launch"
    for t in range(63):  # Fan1 then Fan2, float32, rounding twice where the GPU may fuse
        m[t + 1:, t] = a[t + 1:, t] / a[t, t]
        a[t + 1:, t:] = a[t + 1:, t:] - m[t + 1:, t, None] * a[t, t:]
        b[t + 1:] = b[t + 1:] - m[t + 1:, t] * b[t]
    # The reference rounds a - m * a_t twice where the executor may fuse it (one rounding), and
    # the differences feed later steps; diagonal dominance keeps them from growing (observed:
    # 1e-7 on entries up to 66, 2e-9 on multipliers of about 1/64). Tolerances: 1e-5 (about
    # 2 ulp(64)) on a and b, 1e-8 (about 10 ulp(1/64)) on m; a wrong pivot row, a missing
    # update or a stale multiplier is off by more than 1e-3.
    assert_within(r.final["d_m"].reshape(64, 64), m, 1e-8, "d_m")
    assert_within(r.final["d_a"].reshape(64, 64), a, 1e-5, "d_a")
    assert_within(r.final["d_b"], b, 1e-5, "d_b")
    assert not np.triu(r.final["d_m"].reshape(64, 64)).any(), "Fan1 writes below the diagonal"


# ---- helper_launch -----------------------------------------------------------------------------
def check_helper_launch(r) -> None:
    x, rows = r.initial["d_x"], r.initial["d_rows"].reshape(3, 512)
    # scale: 2x (exact); add_relu: max(2x + x, 0) (one rounding): bitwise
    y1 = np.fmax(F32(2) * x + x, F32(0))
    y2 = np.fmax(F32(2) * y1 + y1, F32(0))
    assert_bitwise(r.final["d_y1"], y1, "d_y1")
    assert_bitwise(r.final["d_tmp"], F32(2) * y1, "d_tmp (second forward's scratch)")
    acc = y2.copy()
    for k in range(3):  # acc += 0.5 x: 0.5 x is exact, so an fma rounds the same: bitwise
        acc = acc + F32(0.5) * rows[k]
    assert_bitwise(r.final["d_y2"], acc, "d_y2")
    win = np.zeros(96, F32)  # cudaMemset 0, then d_win[16:80] = d_y2[32:96]
    win[16:80] = acc[32:96]
    assert_bitwise(r.final["d_win"].view(F32), win, "d_win")


# ---- histogram_atomics -------------------------------------------------------------------------
def check_histogram_atomics(r) -> None:
    data = r.initial["d_data"]
    assert not r.initial["d_hist"].any(), "cudaMemset(d_hist, 0) precedes the launch"
    assert_bitwise(r.final["d_hist"], np.bincount(data % 64, minlength=64).astype(np.uint32),
                   "d_hist")


# ---- lstm_cell ---------------------------------------------------------------------------------
def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def check_lstm_cell(r) -> None:
    H, L, T = 64, 2, 4
    w = r.initial["d_w"].astype(np.float64).reshape(L, 4 * H, H)
    u = r.initial["d_u"].astype(np.float64).reshape(L, 4 * H, H)
    bias = r.initial["d_b"].astype(np.float64).reshape(L, 4 * H)
    h = r.initial["d_h"].astype(np.float64).reshape(L + 1, T + 1, H)
    c = r.initial["d_c"].astype(np.float64).reshape(L, T + 1, H)
    assert not h[1:].any() and not h[0, 0].any() and not c.any(), "memsets before the launches"
    for layer in range(L):
        for t in range(T):
            g = bias[layer] + w[layer] @ h[layer, t + 1] + u[layer] @ h[layer + 1, t]
            i, f, cand, o = (sigmoid(g[:H]), sigmoid(g[H:2 * H]), np.tanh(g[2 * H:3 * H]),
                             sigmoid(g[3 * H:]))
            c[layer, t + 1] = f * c[layer, t] + i * cand
            h[layer + 1, t + 1] = o * np.tanh(c[layer, t + 1])
    # A gate is a sum of 129 float32 terms of size <= 1; the worst-case bound gamma(131) * 129
    # = 1e-3 is far too loose to catch anything, while rounding errors of random sign grow
    # like sqrt(n) u: about 1e-6 (observed: <= 1.1e-6 over 8 chained cells). sigmoid' <= 1/4
    # and tanh' <= 1 do not amplify it; libm's expf/tanhf add 1-2 ulp. 2e-5 absolute leaves a
    # 20x margin and still catches a wrong gate order, a missed barrier or a wrong offset
    # (errors >= 1e-2).
    assert_within(r.final["d_h"].reshape(L + 1, T + 1, H), h, 2e-5, "d_h")
    assert_within(r.final["d_c"].reshape(L, T + 1, H), c, 2e-5, "d_c")


# ---- matmul_bias_act ---------------------------------------------------------------------------
def check_matmul_bias_act(r) -> None:
    A = r.initial["d_A"].astype(np.float64).reshape(64, 64)
    B = r.initial["d_B"].astype(np.float64).reshape(64, 64)
    bias = r.initial["d_bias"].astype(np.float64)
    C = A @ B + bias[None, :]
    # 64 products summed (exact in float64), then + bias: gamma(66) * sum of |terms|
    tol = gamma(66) * (np.abs(A) @ np.abs(B) + np.abs(bias)[None, :])
    assert_within(r.final["d_C"].reshape(64, 64), C, tol, "d_C (matmul + bias, in place)")
    # tanh' <= 1: the error of C passes through, plus libm tanhf (<= 2 ulp of |out| <= 1)
    assert_within(r.final["d_out"].reshape(64, 64), np.tanh(C), tol + 4 * U32, "d_out")


# ---- qkv_branches ------------------------------------------------------------------------------
def check_qkv_branches(r) -> None:
    X = r.initial["d_X"].astype(np.float64).reshape(32, 64)
    for name in "QKV":
        W = r.initial[f"d_W{name.lower()}"].astype(np.float64).reshape(64, 64)
        b = r.initial[f"d_b{name.lower()}"].astype(np.float64)
        tol = gamma(66) * (np.abs(X) @ np.abs(W) + np.abs(b)[None, :])
        assert_within(r.final[f"d_{name}"].reshape(32, 64), X @ W + b[None, :], tol, f"d_{name}")


# ---- stencil_pingpong --------------------------------------------------------------------------
def jacobi2d(u: np.ndarray) -> np.ndarray:
    out = u.copy()  # the boundary keeps its value
    out[1:-1, 1:-1] = F32(0.25) * (((u[1:-1, :-2] + u[1:-1, 2:]) + u[:-2, 1:-1]) + u[2:, 1:-1])
    return out


def check_stencil_pingpong(r) -> None:
    bufs = {"d_in": r.initial["d_in"].reshape(64, 64), "d_out": r.initial["d_out"].reshape(64, 64)}
    src, dst = "d_in", "d_out"
    for _ in range(5):  # the kernel writes every cell of its output buffer
        bufs[dst] = jacobi2d(bufs[src])
        src, dst = dst, src
    for name in bufs:
        assert_bitwise(r.final[name].reshape(64, 64), bufs[name], name)


# ---- transpose_elementwise ---------------------------------------------------------------------
def check_transpose_elementwise(r) -> None:
    t = r.initial["d_in"].reshape(128, 64).T.reshape(-1)
    assert_bitwise(r.final["d_t"], t, "d_t (transpose through the shared tile)")
    exact = 1.5 * t.astype(np.float64) + 0.25  # fused: one rounding; else two
    assert_within(r.final["d_out"], exact, U32 * (2 * np.abs(exact) + 0.5), "d_out")


# ---- two_mm ------------------------------------------------------------------------------------
def check_two_mm(r) -> None:
    NI, NJ, NK, NL = 32, 40, 48, 36
    alpha, beta = 1.5, 1.2
    A = r.initial["d_A"].astype(np.float64).reshape(NI, NK)
    B = r.initial["d_B"].astype(np.float64).reshape(NK, NJ)
    C = r.initial["d_C"].astype(np.float64).reshape(NJ, NL)
    D0 = r.initial["d_D"].astype(np.float64).reshape(NI, NL)
    tmp = alpha * A @ B
    # acc += (alpha * A) * B: two roundings per term plus the sum: gamma(NK + 2)
    tmp_tol = gamma(NK + 2) * (alpha * np.abs(A) @ np.abs(B))
    assert_within(r.final["d_tmp"].reshape(NI, NJ), tmp, tmp_tol, "d_tmp")
    D = beta * D0 + tmp @ C
    abs_c = np.abs(C)
    d_tol = (gamma(NJ + 2) * (beta * np.abs(D0) + (np.abs(tmp) + tmp_tol) @ abs_c)
             + tmp_tol @ abs_c)  # the rounding of D's own sum, plus tmp's error carried through
    assert_within(r.final["d_D"].reshape(NI, NL), D, d_tol, "d_D")


# ---- block_reverse -------------------------------------------------------------------------------
def check_block_reverse(r) -> None:
    """t = 2x + 1, then y[i] = t[mirror of i in its 256-block] + t[i] / 2: every product is
    exact (by 2, by 0.5), so each result is one float32 rounding of an exact value."""
    x = r.initial["x"]
    t = x * np.float32(2) + np.float32(1)
    assert_bitwise(r.final["t"], t, "t")
    i = np.arange(4096)
    mirror = (i // 256) * 256 + 255 - i % 256
    assert_bitwise(r.final["y"], t[mirror] + np.float32(0.5) * t, "y")


CHECKS = {
    "block_reduce.cu": check_block_reduce,
    "block_reverse.cu": check_block_reverse,
    "converge_loop.cu": check_converge_loop,
    "early_return.cu": check_early_return,
    "elementwise_chain.cu": check_elementwise_chain,
    "gaussian.cu": check_gaussian,
    "helper_launch.cu": check_helper_launch,
    "histogram_atomics.cu": check_histogram_atomics,
    "lstm_cell.cu": check_lstm_cell,
    "matmul_bias_act.cu": check_matmul_bias_act,
    "qkv_branches.cu": check_qkv_branches,
    "stencil_pingpong.cu": check_stencil_pingpong,
    "transpose_elementwise.cu": check_transpose_elementwise,
    "two_mm.cu": check_two_mm,
}
INPUTS = {"gaussian.cu": gaussian_inputs}


def corpus_run(program: str, seed: int, order: str = "forward"):
    """The run the reference checks use (cached when the inputs are the executor's own)."""
    if program in INPUTS:
        return run(program, seed=seed, order=order, inputs=INPUTS[program](seed))
    return run_cached(program, seed, order)


def test_every_corpus_program_has_a_reference():
    assert sorted(p.name for p in KERNELS.glob("*.cu")) == sorted(CHECKS)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("program", sorted(CHECKS))
def test_corpus_program_matches_numpy(program, seed):
    r = corpus_run(program, seed)
    assert set(r.final) == {b.name for b in r.program.buffers}
    CHECKS[program](r)


def test_seeds_give_fresh_inputs():
    a = run_cached("elementwise_chain.cu", SEEDS[0]).initial["d_x"]
    b = run_cached("elementwise_chain.cu", SEEDS[1]).initial["d_x"]
    assert not np.array_equal(a, b)
    assert a.min() >= -1 and a.max() < 1 and np.unique(a).size > 4000


# ---- hand-computed results with chosen inputs --------------------------------------------------
def test_block_reduce_all_ones():
    r = run("block_reduce.cu", inputs={"d_in": np.ones(20000, F32)})
    # 78 full blocks of 256 and a last block holding 20000 - 78 * 256 = 32 elements
    assert r.final["d_partial"].tolist() == [256.0] * 78 + [32.0]
    assert r.final["d_result"].tolist() == [20000.0]


def test_block_reduce_periodic_quarters():
    i = np.arange(20000)
    x = ((i % 17) * 0.25 - 2.0).astype(F32)  # the program's own data; every partial sum is exact
    r = run("block_reduce.cu", inputs={"d_in": x})
    # one period (k = 0..16) sums to 0.25 * 136 - 17 * 2 = 0, and 20000 = 17 * 1176 + 8, so the
    # total is the first 8 terms: 0.25 * (0 + ... + 7) - 8 * 2 = 7 - 16 = -9
    assert r.final["d_result"].tolist() == [-9.0]
    expected = [sum((k % 17) * 0.25 - 2.0 for k in range(256 * b, min(256 * b + 256, 20000)))
                for b in range(79)]
    assert r.final["d_partial"].tolist() == expected


def test_histogram_uniform_bins():
    r = run("histogram_atomics.cu", inputs={"d_data": np.arange(8192, dtype=np.uint32)})
    assert r.final["d_hist"].tolist() == [8192 // 64] * 64


def test_histogram_three_values():
    data = (np.arange(8192) % 3).astype(np.uint32)  # 8192 = 3 * 2730 + 2
    r = run("histogram_atomics.cu", inputs={"d_data": data})
    assert r.final["d_hist"].tolist() == [2731, 2731, 2730] + [0] * 61


def test_histogram_unsigned_modulo():
    # data[i] % 64 is unsigned: 0xffffffff lands in bin 63 (a signed % would give -1, outside
    # the shared array), and 64 * k + 5 in bin 5.
    data = np.where(np.arange(8192) % 2 == 0, 0xFFFFFFFF, 64 * 12345 + 5).astype(np.uint32)
    r = run("histogram_atomics.cu", inputs={"d_data": data})
    expected = [0] * 64
    expected[63] = expected[5] = 4096
    assert r.final["d_hist"].tolist() == expected


def _matmul(A, B, bias):
    return run("matmul_bias_act.cu", inputs={"d_A": A.astype(F32).reshape(-1),
                                             "d_B": B.astype(F32).reshape(-1),
                                             "d_bias": bias.astype(F32)})


def test_matmul_identity():
    k, j = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    B = (k - j) / 64.0  # exact in float32
    r = _matmul(np.eye(64), B, np.zeros(64))
    assert_bitwise(r.final["d_C"].reshape(64, 64), B.astype(F32), "I * B")
    assert_within(r.final["d_out"].reshape(64, 64), np.tanh(B), 2 * U32, "tanh(B)")


def test_matmul_lower_triangular_ones():
    # A[i][k] = 1 for k <= i, B[k][j] = j + 1: C[i][j] = (i + 1)(j + 1), summed across all four
    # 16-wide tiles of k; bias[c] = -c makes C + bias = (i + 1)(j + 1) - j = i j + i + 1.
    A = np.tril(np.ones((64, 64)))
    B = np.tile(np.arange(1, 65, dtype=np.float64), (64, 1))
    r = _matmul(A, B, -np.arange(64.0))
    i, j = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    assert_bitwise(r.final["d_C"].reshape(64, 64), (i * j + i + 1).astype(F32), "C + bias")


def test_matmul_constant_with_bias():
    # every product is 0.125 * 1; 64 of them: C = 8; bias[c] = c / 64 - 8: C + bias = c / 64
    r = _matmul(np.full((64, 64), 0.125), np.ones((64, 64)), np.arange(64) / 64.0 - 8.0)
    c = np.tile(np.arange(64) / 64.0, (64, 1))
    assert_bitwise(r.final["d_C"].reshape(64, 64), c.astype(F32), "C + bias")
    assert_within(r.final["d_out"].reshape(64, 64), np.tanh(c), 2 * U32, "tanh")
    assert math.isclose(float(r.final["d_out"][63]), math.tanh(63 / 64), rel_tol=1e-6)
