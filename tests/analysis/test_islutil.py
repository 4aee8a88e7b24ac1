"""islutil: name-based dimension surgery, the operation budget, and the numpy point test."""

from __future__ import annotations

import itertools

import islpy as isl
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sirius.analysis import islutil


def test_names_and_projection():
    m = isl.Map("[n] -> { S[t, bx, tx] -> B[x] : x = 4tx + 512bx + n and 0 <= tx < 128 }")
    assert islutil.names(m, islutil.T.in_) == ["t", "bx", "tx"]
    assert islutil.param_names(m) == ["n"]
    p = islutil.project_out(m, ["tx", "n"])
    assert islutil.names(p, islutil.T.in_) == ["t", "bx"]
    assert islutil.param_names(p) == []
    assert islutil.has_name(m, "bx") and not islutil.has_name(m, "ty")


def test_params_move_to_the_input_tuple_in_order():
    m = isl.Map("[l, t] -> { S[bx] -> B[x] : x = 256t + 1280l + bx }")
    got = islutil.params_to_in(m, ["l", "t", "r"])  # r is not there: a free dimension
    assert islutil.names(got, islutil.T.in_) == ["l", "t", "r", "bx"]
    assert got.get_tuple_name(islutil.T.in_) == "S"
    assert got.is_equal(isl.Map("{ S[l, t, r, bx] -> B[x] : x = 256t + 1280l + bx }"))


def test_forget_and_free():
    s = isl.Set("{ [tx, k] : 0 <= tx < 4 and tx <= k < 8 }")
    assert islutil.forget(s, ["k"]).is_equal(isl.Set("{ [tx, k] : 0 <= tx < 4 and k = 0 }"))
    assert islutil.free(s, ["k"]).is_equal(isl.Set("{ [tx, k] : 0 <= tx < 4 }"))
    assert islutil.involves(s, ["k"]) and not islutil.involves(islutil.free(s, ["k"]), ["k"])


def test_regroup_picks_and_orders_dimensions():
    s = isl.Set("{ [a, b, c] : b = a + 1 and c = 2a and 0 <= a < 3 }")
    m = islutil.regroup(s, ["c"], ["a"])
    assert m.is_equal(isl.Map("{ [c] -> [a] : c = 2a and 0 <= a < 3 }"))
    assert islutil.names(m, islutil.T.in_) == ["c"]
    assert m.is_single_valued()


def test_bounds():
    s = isl.Set("[n] -> { [tx, x] : 0 <= tx < 16 and x = 4tx + 8 }")
    assert islutil.bounds(s, "x") == (8, 68)
    assert islutil.bounds(isl.Set("{ [x] : x >= 0 }"), "x") is None


def test_bounded_gives_the_default_past_the_budget():
    hard = isl.Set("{ [a, b] : exists (e, f: 7e = a + 3b and 11f = 2a - b + 5 and "
                   "0 <= a < 1000 and 0 <= b < 1000) }")
    assert islutil.bounded(1, lambda: hard.compute_divs().lexmin(), "too hard") == "too hard"
    # and the context is unlimited again afterwards
    assert not hard.compute_divs().lexmin().is_empty()


SETS = [
    "[n] -> { [a, b] : exists (e: a = 3e + b) and 0 <= b < n and a < 20 }",
    "{ [a, b] : (a + 2b) mod 5 = 1 and -3 <= a <= 9 and 0 <= b <= 4 }",
    "{ [a, b] : a = floor((b + 7) / 4) or (b > 2 and a < b) }",
    "{ [a, b] : exists (e: 4e <= a - b <= 4e + 1 and 0 <= e < 3) }",
]


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(SETS), st.integers(1, 6))
def test_numpy_evaluation_matches_isl(text, n):
    s = isl.Set(text)
    pts = np.array(list(itertools.product(range(-5, 21), range(-3, 10))))
    got = islutil.evaluate(s, {"a": pts[:, 0], "b": pts[:, 1]}, {"n": n})
    fixed = islutil.fix_params(s, {"n": n}) if islutil.param_names(s) else s
    for (a, b), inside in zip(pts, got, strict=True):
        point = isl.Set(f"{{ [{a}, {b}] }}")
        want = not point.intersect(islutil.project_out(fixed, islutil.param_names(fixed))
                                   .reset_tuple_id()).is_empty()
        assert bool(inside) == want, (text, n, a, b)


def test_evaluation_without_a_parameter_value_quantifies_it():
    s = isl.Set("[n] -> { [a] : 0 <= a < n and n <= 10 }")
    got = islutil.evaluate(s, {"a": np.arange(-2, 14)}, {})
    assert list(np.nonzero(got)[0] - 2) == list(range(0, 10))


# ---- covers_by_count --------------------------------------------------------------------------
# The write set of BERT's attention-score GEMM at paper shape (12 x 128 x 128 floats, four
# 256-byte column strips per tile row): isl's subset test on it runs for minutes; it covers the
# 786432 bytes exactly, so dropping any strip must leave it short.
_STRIP = ("exists (e0, e1: 0 <= e0 <= 31 and 0 <= e1 <= 23 and -{hi} + x - 2048e0 - 256e1 <= "
          "65024*floor((e1)/2) <= -{lo} + x - 2048e0 - 256e1)")


def _strips(offsets):
    return isl.Set("{ [x] : " + " or ".join(_STRIP.format(lo=o, hi=o + 255) for o in offsets)
                   + " }")


def test_covers_by_count_proves_a_tiled_cover():
    whole = isl.Set("{ [x] : 0 <= x <= 786431 }")
    assert islutil.covers_by_count(whole, _strips([0, 512, 1024, 1536]), 30_000)


def test_covers_by_count_sees_a_missing_strip():
    whole = isl.Set("{ [x] : 0 <= x <= 786431 }")
    assert not islutil.covers_by_count(whole, _strips([0, 512, 1024]), 30_000)
    # the same strip twice covers as many bytes as four, but overlapping pieces are refused
    assert not islutil.covers_by_count(whole, _strips([0, 512, 1024, 1024]), 30_000)


def test_covers_by_count_small_cases():
    box = isl.Set("{ [x, y] : 0 <= x < 4 and 0 <= y < 6 }")
    halves = isl.Set("{ [x, y] : 0 <= x < 4 and 0 <= y < 3 or 0 <= x < 4 and 3 <= y < 9 }")
    assert islutil.covers_by_count(box, halves, 30_000)  # pieces clipped to the box
    hole = isl.Set("{ [x, y] : 0 <= x < 4 and 0 <= y < 6 and not (x = 2 and y = 5) }")
    assert not islutil.covers_by_count(box, hole, 30_000)
    evens = isl.Set("{ [x] : exists e : x = 2e and 0 <= x < 10 }")
    assert not islutil.covers_by_count(evens, isl.Set("{ [x] : 0 <= x < 10 }"), 30_000)  # no box
    big = isl.Set("{ [x] : 0 <= x < 10000000 }")
    assert not islutil.covers_by_count(big, big, 30_000)  # over max_points: no answer


def test_a_dense_write_covers_its_box_only_without_holes():
    """dependences._covers_box: an exact write is a killer only if it writes every byte of
    its [lo, hi]; a hole or a stride anywhere in the range says no."""
    from sirius.analysis.uar.dependences import _covers_box

    assert _covers_box("{ [x] : 0 <= x <= 1023 }", (0, 1023))
    assert _covers_box("{ [x] : 0 <= x <= 511 or 512 <= x <= 1023 }", (0, 1023))
    assert not _covers_box("{ [x] : 0 <= x <= 511 or 513 <= x <= 1023 }", (0, 1023))
    assert not _covers_box("{ [x] : 0 <= x <= 1023 and x mod 4 < 2 }", (0, 1021))
    assert not _covers_box("{ [x] : 0 <= x <= 1023 }", (0, 2047))
