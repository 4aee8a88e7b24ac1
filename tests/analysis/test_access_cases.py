"""Access relations of the kernels of programs/affine_cases.cu, each compared with the relation
written by hand from its source: the bytes each thread (bx, by, bz, tx, ty, tz) touches in a
buffer, relative to the start of the buffer."""

from __future__ import annotations

import islpy as isl
import pytest

from sirius.analysis.uar.soundness import check_trace
from tests.analysis.support import uar_of

PROGRAM = "affine_cases.cu"
KERNELS = ["bits", "guarded", "choose", "fields", "gather", "opaque", "narrow", "nest", "reverse"]


def touched(launch: int, buffer: str, kind: str, space: str = "global") -> isl.Map:
    """The kernel-level byte relation { [bx, by, bz, tx, ty, tz] -> [x] } of one launch."""
    uar = uar_of(PROGRAM)
    le = uar.launch_effects[launch]
    if space == "shared":
        return le.shared[(le.summary.shared_globals.index(buffer), kind)]
    ids = {b.name: b.id for b in uar.program.buffers}
    return le.global_[(ids[buffer], kind)]


def hand(constraint: str, x: int = 1, y: int = 1) -> isl.Map:
    """Threads of a grid (x) of blocks of `y` threads (1-D), with the byte constraint."""
    return isl.Map(f"{{ [bx, by, bz, tx, ty, tz] -> [x] : by = 0 and bz = 0 and ty = 0 and "
                   f"tz = 0 and 0 <= bx < {x} and 0 <= tx < {y} and ({constraint}) }}")


def word(index: str, size: int = 4) -> str:
    return f"{size} * ({index}) <= x < {size} * ({index}) + {size}"


def assert_same(got: isl.Map, want: isl.Map) -> None:
    assert got.is_equal(want), f"\n got: {got}\nwant: {want}"


def test_launch_order():
    uar = uar_of(PROGRAM)
    assert [le.summary.name for le in uar.launch_effects] == KERNELS


def test_shifts_masks_division_remainder():
    # in[t / 3 + (t % 3) * 32 + bx * 64], out[(t >> 2) * 16 + (t & 3)], <<<2, 64>>>
    assert_same(touched(0, "d_in", "load"),
                hand(word("floor(tx / 3) + 32 * (tx mod 3) + 64 * bx"), 2, 64))
    assert_same(touched(0, "d_out", "store"),
                hand(word("16 * floor(tx / 4) + (tx mod 4)"), 2, 64))


def test_affine_guard_restricts_the_domain():
    # i = 64 bx + tx; only i < 100 with i even: y[i / 2] = x[i]
    guard = "64 * bx + tx < 100 and (tx mod 2) = 0"
    assert_same(touched(1, "d_x", "load"), hand(f"{guard} and {word('64 * bx + tx')}", 2, 64))
    assert_same(touched(1, "d_y", "store"),
                hand(f"{guard} and {word('32 * bx + floor(tx / 2)')}", 2, 64))


def test_select_becomes_two_pieces():
    # j = t < 16 ? 2t : t - 16
    assert_same(touched(2, "d_x", "load"),
                hand(f"(tx < 16 and {word('2 * tx')}) or (tx >= 16 and {word('tx - 16')})",
                     1, 32))


def test_struct_field_and_vector():
    # p[t].c: 8 bytes at 16 t + 8; v[t + 1], w[t]: float4, 16 bytes
    assert_same(touched(3, "d_p", "load"), hand(word("2 * tx + 1", 8), 1, 64))
    assert_same(touched(3, "d_v4", "load"), hand(word("tx + 1", 16), 1, 64))
    assert_same(touched(3, "d_w4", "store"), hand(word("tx", 16), 1, 64))


def test_gather_covers_the_whole_buffer():
    summary = uar_of(PROGRAM).launch_effects[4].summary
    by_base = {(a.base.ref, a.kind): a for a in summary.accesses}
    assert by_base[(0, "load")].exact and by_base[(2, "store")].exact
    x = by_base[(1, "load")]
    assert (x.whole, x.exact) == (True, False) and "loaded from memory" in x.reason
    assert_same(touched(4, "d_x", "load"), hand("0 <= x < 4096", 1, 64))  # d_x: 1024 floats


def test_noinline_call_is_analysed_at_its_call_site():
    # touch(t < 16 ? a : b, t) stores p[t]: a for the first 16 threads, b for the others
    assert_same(touched(5, "d_a", "store"), hand(f"tx < 16 and {word('tx')}", 1, 32))
    assert_same(touched(5, "d_b", "store"), hand(f"tx >= 16 and {word('tx')}", 1, 32))
    le = uar_of(PROGRAM).launch_effects[5]
    assert not [k for k in le.global_ if k[1] == "load"]  # touch reads nothing
    assert all(a.exact for a in le.summary.accesses)
    assert not [w for w in uar_of(PROGRAM).warnings if "touch" in w]


def test_eight_bit_arithmetic_wraps():
    # c = (unsigned char)(t + 250): t + 250 for t < 6, t - 6 from then on
    assert_same(touched(6, "d_x", "load"), hand(word("(tx + 250) mod 256"), 1, 64))


def test_nested_loops():
    # i in [0, 4), j = t, t + 8, ... < 10 with 8 threads: a[10 i + j]
    want = hand("exists (i, j: 0 <= i < 4 and tx <= j < 10 and (j - tx) mod 8 = 0 and "
                f"{word('10 * i + j')})", 1, 8)
    assert_same(touched(7, "d_a", "store"), want)
    assert all(lp.exact for lp in uar_of(PROGRAM).launch_effects[7].summary.loops)


def test_dynamic_shared_memory():
    ir = uar_of(PROGRAM).launch_effects[8].summary.shared_globals[0]
    assert_same(touched(8, ir, "store", "shared"), hand(word("tx"), 1, 64))
    assert_same(touched(8, ir, "load", "shared"), hand(word("63 - tx"), 1, 64))


@pytest.mark.parametrize("launch", range(len(KERNELS)))
def test_exactness(launch):
    summary = uar_of(PROGRAM).launch_effects[launch].summary
    inexact = {a.base.ref for a in summary.accesses if not a.exact}
    # only gather's x (data-dependent index) is an over-approximation (opaque's call is analysed
    # at its call site, exactly)
    expected = {"gather": {1}}.get(summary.name, set())
    assert inexact == expected


def test_read_and_write_sets_by_level():
    summary = uar_of(PROGRAM).launch_effects[0].summary  # bits<<<2, 64>>>
    writes = {b.ref: m for (b, mode), m in summary.effects("kernel").items() if mode == "write"}
    # out[16 (t >> 2) + (t & 3)] for t < 64: rows of 4 ints every 16, 16 rows
    assert writes[1].range().is_equal(isl.Set(
        "{ [x] : exists (r, c: 0 <= r < 16 and 0 <= c < 4 and 64 r + 4 c <= x < 64 r + 4 c + 4) }"))
    reads = {b.ref: m for (b, mode), m in summary.effects("block").items() if mode == "read"}
    # block bx reads in[64 bx + q + 32 r] with q = t / 3, r = t % 3, t < 64: q <= 21 for r = 0,
    # q <= 20 for r = 1 and 2 -> ints [0, 21], [32, 52], [64, 84] after 64 bx
    ints = "(0 <= i <= 21 or 32 <= i <= 52 or 64 <= i <= 84)"
    assert reads[0].is_equal(isl.Map(
        f"{{ [bx, by, bz] -> [x] : by = 0 and bz = 0 and 0 <= bx < 2 and exists (i: {ints} "
        "and 256 bx + 4 i <= x < 256 bx + 4 i + 4) }"))


def test_no_trace_needed_for_the_report():
    rep = check_trace(uar_of(PROGRAM), [])
    assert rep.ok and rep.records == 0
    assert rep.static_accesses == sum(len(le.summary.accesses)
                                      for le in uar_of(PROGRAM).launch_effects)
