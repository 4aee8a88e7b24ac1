"""Access relations of programs/bitwise_cases.cu: an `or` whose operands share bits, and a
switch on the block index, each compared with the relation written by hand (the bytes each
thread touches, relative to the start of the buffer)."""

from __future__ import annotations

import islpy as isl

from tests.analysis.support import uar_of

PROGRAM = "bitwise_cases.cu"


def stores(launch: int) -> isl.Map:
    uar = uar_of(PROGRAM)
    le = uar.launch_effects[launch]
    ids = {b.name: b.id for b in uar.program.buffers}
    (name,) = [n for n in ("d_a", "d_b") if (ids[n], "store") in le.global_]
    assert all(a.exact for a in le.summary.accesses), [a.reason for a in le.summary.accesses]
    return le.global_[(ids[name], "store")]


def test_an_or_whose_operands_share_bits():
    """out[t | 5], t < 48: t | 5 = t + 5 - (t & 5), where t & 5 = (t mod 2) + (t mod 8) -
    (t mod 4); read as t + 5 it would miss t = 1, 4, 5, ... and claim bytes never written."""
    got = stores(0)
    want = isl.Map("{ [bx, by, bz, tx, ty, tz] -> [x] : bx = 0 and by = 0 and bz = 0 and ty = 0 "
                   "and tz = 0 and 0 <= tx < 48 and exists (i = tx + 5 - (tx mod 2) - (tx mod 8) "
                   "+ (tx mod 4) : 4 i <= x < 4 i + 4) }")
    assert got.is_equal(want), f"\n got: {got}\nwant: {want}"
    assert {t | 5 for t in range(48)} == {t + 5 - (t & 5) for t in range(48)}


def test_a_switch_on_the_block_index_gives_each_block_its_case():
    """Each case's store is restricted to the blocks the switch sends there (the default to
    the rest), not to every block."""
    got = stores(1)
    want = isl.Map("{ [bx, by, bz, tx, ty, tz] -> [x] : by = 0 and bz = 0 and ty = 0 and tz = 0 "
                   "and 0 <= bx < 4 and 0 <= tx < 64 and 256 bx + 4 tx <= x < 256 bx + 4 tx + 4 }")
    assert got.is_equal(want), f"\n got: {got}\nwant: {want}"
