"""GPU features of the CPU executor, one small whole program each (tests/runtime/programs):
warp shuffles and votes, atomics, barriers in loops, dynamic shared memory, 3-D launches, vector
loads and stores, 64-bit indexing, libdevice math, and the rejection of inline PTX assembly.
Every expected value is derived from the program's source (its header comment says what each
kernel computes) and the inputs the test chose or the executor reported."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sirius.runtime.device import KernelFault
from tests.runtime.execsupport import assert_bitwise, assert_within, gamma, run

F32 = np.float32
ORDERS = ("forward", "reverse", "random:5")


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- warp shuffles -----------------------------------------------------------------------------
def shuffle_ref(v: np.ndarray) -> np.ndarray:
    """The 8 shuffles of warp_shuffle.cu for every thread (rows: operations)."""
    w = v.reshape(-1, 32)
    lane = np.arange(32)
    pos = lane & 7  # position in an 8-lane segment

    def pick(src, valid=True):
        return np.where(valid, w[:, np.clip(src, 0, 31)], w).reshape(-1)

    return np.stack([
        pick(lane - 3, lane >= 3),                 # up 3: lanes 0..2 keep their value
        pick(lane + 5, lane + 5 <= 31),            # down 5: lanes 27..31 keep theirs
        pick(lane ^ 7),                            # xor 7
        pick((7 * lane + 3) & 31),                 # idx
        pick(lane + 3, pos + 3 <= 7),              # down 3 within 8-lane segments
        pick(lane - 2, pos >= 2),                  # up 2 within segments
        pick((lane & ~7) + (lane + 1) % 8),        # idx lane + 1, taken modulo the width 8
        pick(lane ^ 3),                            # xor 3 within segments
    ])


def shuffle_inputs(seed: int) -> dict[str, np.ndarray]:
    g = rng(seed)
    ints = g.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32)
    floats = g.uniform(-1e3, 1e3, 128).astype(F32)
    # special values travel bit for bit: -0.0, infinities, a NaN with a payload, a subnormal
    floats[:5] = np.array([0x80000000, 0x7F800000, 0xFF800000, 0x7FC12345, 0x00000007],
                          dtype=np.uint32).view(F32)
    return {"d_ai": ints, "d_af": floats}


@pytest.mark.parametrize("order", ORDERS)
def test_warp_shuffles(order):
    inputs = shuffle_inputs(1)
    r = run("programs/warp_shuffle.cu", order=order, inputs=inputs)
    assert_bitwise(r.final["d_oi"].reshape(8, 128), shuffle_ref(inputs["d_ai"]), "int shuffles")
    assert_bitwise(r.final["d_of"].reshape(8, 128), shuffle_ref(inputs["d_af"]),
                   "float shuffles")
    assert [s.stats.mode for s in r.launches] == ["loops", "loops"]


# ---- warp votes --------------------------------------------------------------------------------
def vote_ref(x: np.ndarray) -> np.ndarray:
    """warp_vote.cu: blocks of 48 threads = a full warp and a 16-lane warp."""
    n = x.size
    out = np.zeros((7, n), np.uint32)
    p = x > 64
    for start in range(0, n, 48):
        for w0, size in ((start, 32), (start + 32, 16)):
            lanes = np.arange(size)
            pw = p[w0:w0 + size]
            ids = w0 + lanes
            present = (1 << size) - 1
            ballot = int(sum(1 << k for k in lanes if pw[k]))
            out[0, ids] = ballot
            out[1, ids] = ballot != 0
            out[2, ids] = ballot == present
            out[3, ids] = present
            out[4, ids] = np.where(lanes < 16, ballot & 0xFFFF, 0)
            alive = lanes < 24
            am2 = (1 << min(size, 24)) - 1
            out[5, ids] = np.where(alive, am2, 0xDEAD)
            out[6, ids] = np.where(alive, ballot & am2, 0xDEAD)
    return out


@pytest.mark.parametrize("order", ORDERS)
def test_warp_votes(order):
    x = rng(2).integers(0, 128, 96).astype(np.int32)
    x[0:32] = 100    # block 0, warp 0: every lane votes yes -> all = 1
    x[32:48] = 3     # block 0, warp 1 (16 lanes): nobody -> any = 0, ballot = 0
    r = run("programs/warp_vote.cu", order=order, inputs={"d_in": x})
    got = r.final["d_out"].reshape(7, 96)
    assert_bitwise(got, vote_ref(x), "votes")
    # the hand-made warps, spelled out
    assert got[:, 0].tolist() == [0xFFFFFFFF, 1, 1, 0xFFFFFFFF, 0xFFFF, 0xFFFFFF, 0xFFFFFF]
    assert got[:, 32].tolist() == [0, 0, 0, 0xFFFF, 0, 0xFFFF, 0]
    assert got[5, 24] == 0xDEAD


@pytest.mark.parametrize("order", ORDERS)
def test_divergent_warp_shuffles(order):
    # lanes 0..15 shuffle among themselves first (mask 0xffff, width 16); then every lane takes
    # part in a full-warp shuffle of w = 1000 + v from lane 0 (warp_divergent.cu, kernel split)
    v = (np.arange(32) * 3).astype(np.int32)
    r = run("programs/warp_divergent.cu", order=order, inputs={"d_in": v})
    assert r.final["d_a"].tolist() == [3 * (lane + 1) for lane in range(15)] + [45] + [-1] * 16
    assert r.final["d_b"].tolist() == [1000] * 32


def test_activemask_fast_path():
    # warp_divergent.cu, kernel am_only, block of 48: warp 1 has 16 lanes; lanes >= 24 of each
    # warp return before the second __activemask
    r = run("programs/warp_divergent.cu", inputs={"d_in": np.zeros(32, np.int32)})
    assert r.final["d_am"].tolist() == [0xFFFFFFFF] * 32 + [0xFFFF] * 16
    assert r.final["d_am2"].tolist() == [0xFFFFFF] * 24 + [0xDEAD] * 8 + [0xFFFF] * 16


# ---- atomics -----------------------------------------------------------------------------------
INT_MIN, INT_MAX = -2**31, 2**31 - 1


def atomics_inputs(seed: int) -> dict[str, np.ndarray]:
    g = rng(seed)
    return {
        "d_vi": g.integers(-1000, 1001, 4096).astype(np.int32),
        "d_vu": g.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32),
        # quarters in [-32, 32]: every partial sum is exact, so float atomicAdd is order-free
        "d_vf": (g.integers(-128, 129, 4096) * 0.25).astype(F32),
        "d_gi": np.array([0, INT_MAX, INT_MIN, -1, 0], np.int32),
        "d_gu": np.array([0, 2**32 - 1, 0, 2**32 - 1, 0], np.uint32),
        "d_gf": np.array([0.0, -1.0, -1e30, 0.0, 0.0], F32),
    }


def same_multiset(a, b) -> bool:
    return np.array_equal(np.sort(np.asarray(a).ravel()), np.sort(np.asarray(b).ravel()))


def check_atomics(r, inp) -> None:
    vi, vu, vf = inp["d_vi"], inp["d_vu"], inp["d_vf"]
    gi, gu, gf = r.final["d_gi"], r.final["d_gu"], r.final["d_gf"]
    # global: add, min, max, CAS-loop add
    assert gi[[0, 1, 2, 4]].tolist() == [vi.sum(), vi.min(), vi.max(), vi.sum()]
    assert gu[[0, 1, 2]].tolist() == [int(vu.astype(np.uint64).sum()) % 2**32, vu.min(),
                                      vu.max()]
    # exch: the values returned plus the last one left are the start value plus every value
    assert same_multiset(np.append(r.final["d_old_i"], gi[3]), np.append(vi, -1))
    assert same_multiset(np.append(r.final["d_old_u"], gu[3]), np.append(vu, 2**32 - 1))
    assert same_multiset(np.append(r.final["d_old_f"], gf[1]), np.append(vf, F32(-1)))
    # tickets: atomicAdd returns every old value exactly once
    assert gu[4] == 4096
    assert np.array_equal(np.sort(r.final["d_ticket"]), np.arange(4096))
    assert gf[0] == vf.astype(np.float64).sum() and gf[2] == vf.max()
    # shared memory: per block of 128 over the first 1024 values
    bi = r.final["d_bi"].reshape(8, 5)
    bu = r.final["d_bu"].reshape(8, 5)
    bf = r.final["d_bf"].reshape(8, 5)
    for b in range(8):
        s = slice(128 * b, 128 * b + 128)
        assert bi[b, [0, 1, 2, 4]].tolist() == [vi[s].sum(), vi[s].min(), vi[s].max(),
                                                vi[s].sum()]
        assert bi[b, 3] in vi[s] and bu[b, 3] in vu[s] and bf[b, 1] in vf[s]
        assert bu[b, [0, 1, 2, 4]].tolist() == [int(vu[s].astype(np.uint64).sum()) % 2**32,
                                                vu[s].min(), vu[s].max(), 128]
        assert bf[b, [0, 2, 3, 4]].tolist() == [vf[s].astype(np.float64).sum(), vf[s].max(),
                                                0.0, 0.0]
        assert np.array_equal(np.sort(r.final["d_sticket"][s]), np.arange(128))


@pytest.mark.parametrize("order", ORDERS)
def test_atomics(order):
    inp = atomics_inputs(3)
    r = run("programs/atomics.cu", order=order, inputs=inp)
    check_atomics(r, inp)
    assert [s.stats.mode for s in r.launches] == ["fast", "loops"]


def test_atomics_from_several_workers():
    # forward order with 2 workers: blocks of the barrier-free kernel run on two OS threads at
    # once, so the global atomics really race; the results must still be exact.
    inp = atomics_inputs(4)
    check_atomics(run("programs/atomics.cu", inputs=inp, jobs=2), inp)


def test_float_atomic_add_random_data():
    # Random floats in [-1, 1): the float sum depends on the order the atomics happen in, so
    # orders may differ in the last bits (they need not: a GPU gives no order either). Each is
    # within the summation bound gamma(n) * sum |x| of the exact sum.
    for order in ("forward", "reverse"):
        r = run("programs/atomics.cu", seed=6, order=order)
        vf = r.initial["d_vf"].astype(np.float64)
        start = float(r.initial["d_gf"][0])
        exact = start + vf.sum()
        assert_within(r.final["d_gf"][0], exact, gamma(4097) * (abs(start) + np.abs(vf).sum()),
                      f"float atomicAdd ({order})")


# ---- barriers in loops -------------------------------------------------------------------------
@pytest.mark.parametrize("order", ORDERS)
def test_barrier_in_loops(order):
    x = rng(7).integers(-5000, 5000, 512).astype(np.int32)
    r = run("programs/barrier_loop.cu", order=order, inputs={"d_in": x})
    s = x.reshape(4, 128)
    for k in range(5):  # s[t] <- s[(t + 1) % 128] + k
        s = np.roll(s, -1, axis=1) + k
    assert_bitwise(r.final["d_rot"], s.reshape(-1), "rotated")
    assert r.final["d_sums"].tolist() == s.sum(axis=1).tolist()
    # hand check of one element: after 5 rotations thread 0 holds x[5] + 0 + 1 + 2 + 3 + 4
    assert r.final["d_rot"][0] == x[5] + 10
    # barriers per block: 1 + 2 * 5 in the rotation loop + 7 halving steps = 18; 4 blocks
    assert r.launches[0].stats.barriers == 4 * 18


# ---- dynamic shared memory ---------------------------------------------------------------------
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("check_bounds", [False, True])
def test_dynamic_shared_memory(order, check_bounds):
    # with bounds checks: the static `count` ends at byte 4 and the dynamic area starts 16-aligned
    # at byte 16, so its last 512 bytes end at 528, past static end + dynamic bytes (516): the
    # window a launch may touch must start from the aligned start (fuzz seed 163)
    x = rng(8).uniform(-1, 1, 256).astype(F32)
    r = run("programs/dyn_smem.cu", order=order, inputs={"d_in": x}, check_bounds=check_bounds)
    blocks = x.reshape(4, 64)
    assert_bitwise(r.final["d_out"], blocks[:, ::-1].reshape(-1), "reversed")
    neighbour = np.roll(blocks, -1, axis=1)
    assert_bitwise(r.final["d_out2"], (F32(2) * neighbour + F32(64)).reshape(-1),
                   "doubled neighbour + count")
    st = r.launches[0].stats
    assert (st.smem, st.mode, st.barriers) == (2 * 64 * 4, "loops", 4 * 2)


# ---- 3-D grids and blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("order", ORDERS)
def test_3d_grid_and_block(order):
    r = run("programs/grid3d.cu", order=order)
    ids = r.final["d_ids"].reshape(-1, 4)
    expected = []
    mirror = []
    for bz in range(4):
        for by in range(3):
            for bx in range(2):
                lb = (bz * 3 + by) * 2 + bx
                for tz in range(3):
                    for ty in range(2):
                        for tx in range(4):
                            expected.append((bx + 10 * by + 100 * bz, tx + 10 * ty + 100 * tz,
                                             2 + 30 + 400, 4 + 20 + 300))
                            mirror.append(lb * 24 + ((2 - tz) * 2 + (1 - ty)) * 4 + (3 - tx))
    assert [tuple(row) for row in ids.tolist()] == expected
    assert r.final["d_mirror"].tolist() == mirror
    assert [(s.stats.grid, s.stats.block, s.stats.mode) for s in r.launches] == [
        ((2, 3, 4), (4, 2, 3), "fast"), ((2, 3, 4), (4, 2, 3), "loops")]


# ---- vector loads and stores -------------------------------------------------------------------
def test_float4_float2():
    r = run("programs/vector_ldst.cu", seed=9)
    v = r.initial["d_in"]
    q = v.reshape(256, 4)
    out4 = np.stack([F32(2) * q[:, 3], q[:, 2] + F32(1), q[:, 1], -q[:, 0]], axis=1)
    assert_bitwise(r.final["d_out4"], out4.reshape(-1), "float4")
    p = v.reshape(512, 2)
    assert_bitwise(r.final["d_out2"], np.stack([p[:, 1], p[:, 0] * p[:, 1]], 1).reshape(-1),
                   "float2")
    # 256 float4 (16 bytes) / 512 float2 (8 bytes) loaded and stored: 4096 bytes each way
    for s in r.launches:
        assert (s.stats.global_load_bytes, s.stats.global_store_bytes) == (4096, 4096)


# ---- 64-bit indexing ---------------------------------------------------------------------------
def test_64bit_indexing():
    g = rng(10)
    x = g.uniform(-1, 1, 1000).astype(F32)
    xi = g.integers(-2**20, 2**20, 1000).astype(np.int32)
    r = run("programs/index64.cu", inputs={"d_in": x, "d_in_i": xi})
    big = 4294967311
    idx = [(i * big) % 1000 for i in range(1000)]  # Python ints: no overflow
    assert idx[1] == 311 and idx[3] == 933  # 2^32 + 15 = 4294967311; 4294967311 % 1000 = 311
    assert_bitwise(r.final["d_out"], x[idx], "gather with 64-bit products")
    assert_bitwise(r.final["d_out2"], x, "pointer moved 2^33 elements and back")
    wide = [(int(v) << 33) + i * big for i, v in enumerate(xi)]
    assert r.final["d_w"].dtype == np.int64
    assert r.final["d_w"].tolist() == wide


# ---- libdevice math ----------------------------------------------------------------------------
def math_inputs(seed: int) -> dict[str, np.ndarray]:
    g = rng(seed)
    return {"d_x": g.uniform(-4, 4, 256).astype(F32),
            "d_y": g.uniform(0.01, 10, 256).astype(F32),
            "d_z": g.uniform(-4, 4, 256).astype(F32)}


# function k of fmath: (float64 reference, max ulps); None = exact (correctly rounded or exact)
def fmath_refs(a, b, c):
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    three_a = F32(3) * a  # the kernel's float32 product, then the rounding function
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)
    return [
        (np.exp(a64), 2), (erf(a64), 2), (np.tanh(a64), 2), (1 / np.sqrt(b64), 2),
        (np.fmax(a, c), None), (np.fmin(a, c), None), (a64 * b64 + c64, 1), (np.log(b64), 1),
        (np.sin(a64), 2), (np.cos(a64), 2), (np.sqrt(b), None), (b64 ** a64, 4),
        (np.arctan2(a64, c64), 3), (np.log1p(b64), 1), (np.expm1(a64), 1),
        (np.floor(three_a), None), (np.abs(a), None), (np.exp2(a64), 2), (np.log2(b64), 1),
        (erfc(a64), 4), (np.exp(a64), 8), (a64 / b64, 2), (np.clip(a, 0, 1), None),
        (np.sinh(a64), 3), (np.cosh(a64), 2), (np.arcsin(a64 / 4), 2), (np.arctan(a64), 2),
        (np.cbrt(c64), 1), (np.fmod(a, b), None), (np.log10(b64), 2), (np.trunc(three_a), None),
        (np.sign(three_a) * np.floor(np.abs(three_a.astype(np.float64)) + 0.5), None),
    ]


FMATH_NAMES = ["expf", "erff", "tanhf", "rsqrtf", "fmaxf", "fminf", "fmaf", "logf", "sinf",
               "cosf", "sqrtf", "powf", "atan2f", "log1pf", "expm1f", "floorf", "fabsf", "exp2f",
               "log2f", "erfcf", "__expf", "__fdividef", "__saturatef", "sinhf", "coshf",
               "asinf", "atanf", "cbrtf", "fmodf", "log10f", "truncf", "roundf"]


@pytest.fixture(scope="module")
def math_run():
    inp = math_inputs(11)
    g = rng(12)
    ia = g.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    ib = g.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    ia[:4] = [0, -1, INT_MIN, INT_MAX]
    ib[:4] = [INT_MAX, INT_MIN, -1, 0]
    inp.update({"d_a": ia, "d_b": ib})
    return inp, run("programs/libm.cu", inputs=inp)


@pytest.mark.parametrize("k", range(32), ids=FMATH_NAMES)
def test_libdevice_float(math_run, k):
    # Tolerances in ulps are CUDA's documented maximum errors for these functions (CUDA C++
    # Programming Guide, "Mathematical Functions": expf 2, erff 2, tanhf 2, rsqrtf 2, logf 1,
    # sinf/cosf 2, powf 4, atan2f 3, log1pf/expm1f 1, exp2f 2, log2f 1, erfcf 4, sinhf 3,
    # coshf 2, asinf 2, atanf 2, cbrtf 1, log10f 2; __expf 2 + 1.16 |x| <= 7 for |x| <= 4,
    # __fdividef 2); glibc's libm, which the executor calls, is within them. Functions that are
    # exact or correctly rounded (fmaxf, fminf, sqrtf, floorf, fabsf, __saturatef, fmodf,
    # truncf, roundf) must match bit for bit.
    inp, r = math_run
    ref, ulps = fmath_refs(inp["d_x"], inp["d_y"], inp["d_z"])[k]
    got = r.final["d_out"].reshape(32, 256)[k]
    if ulps is None:
        assert_bitwise(got, np.asarray(ref).astype(F32), FMATH_NAMES[k])
    else:
        np.testing.assert_array_max_ulp(got, np.asarray(ref).astype(F32), maxulp=ulps)


def test_libdevice_int(math_run):
    inp, r = math_run
    a, b = inp["d_a"].astype(np.int64), inp["d_b"].astype(np.int64)
    au, bu = a & 0xFFFFFFFF, b & 0xFFFFFFFF
    got = r.final["d_iout"].reshape(10, 256).astype(np.int64)
    assert got[0].tolist() == np.maximum(a, b).tolist()
    assert got[1].tolist() == np.minimum(a, b).tolist()
    # abs(INT_MIN) wraps to INT_MIN, as two's complement negation does on the GPU
    assert got[2].tolist() == [x if x == INT_MIN else abs(x) for x in a.tolist()]
    assert got[3].tolist() == [bin(x).count("1") for x in au.tolist()]
    assert got[4].tolist() == [32 - x.bit_length() for x in au.tolist()]
    assert (got[5] & 0xFFFFFFFF).tolist() == [int(f"{x:032b}"[::-1], 2) for x in au.tolist()]
    assert got[6].tolist() == ((a * b) >> 32).tolist()
    assert got[7].tolist() == [(x & -x).bit_length() for x in au.tolist()]
    assert (got[8] & 0xFFFFFFFF).tolist() == np.maximum(au, bu).tolist()
    assert (got[9] & 0xFFFFFFFF).tolist() == np.minimum(au, bu).tolist()
    # the special rows spelled out: clz(0) = 32, ffs(0) = 0, popc(-1) = 32, mulhi(-1, MIN) = 0
    assert got[4, 0] == 32 and got[7, 0] == 0 and got[3, 1] == 32 and got[6, 1] == 0


# ---- inline PTX assembly -----------------------------------------------------------------------
def test_inline_ptx_kernel_is_rejected_by_name():
    with pytest.raises(KernelFault) as e:
        run("programs/half_asm.cu")
    msg = e.value.message
    assert "cannot run kernel half_axpy" in msg and "inline PTX assembly" in msg
    assert "scale_f32" not in msg
    assert e.value.loc is not None and e.value.loc.file.endswith("half_asm.cu")
    assert e.value.loc.line == 35  # the launch of half_axpy in main
