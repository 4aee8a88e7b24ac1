"""Quasi-affine expressions: canonical forms, printing that round-trips, evaluation."""

from __future__ import annotations

import islpy as isl
from hypothesis import given
from hypothesis import strategies as st

from sirius.analysis.expr import Expr, evaluate_text

t, l = Expr.var("t"), Expr.var("l")  # noqa: E741


def test_canonical_and_printing():
    e = t.scale(4) + l.scale(1024) + 16
    assert e == l.scale(1024) + 16 + t.scale(4)
    assert str(e) == "1024*l + 4*t + 16"
    assert str(-t + 3) == "-t + 3"
    assert str(t - t) == "0" and (t - t).is_const
    assert (t.scale(4) + 8).floordiv(4) == t + 2  # exact division stays affine
    assert (t.scale(6) + 3).mod(3) == Expr(0)


def test_bounds():
    assert (Expr(1023) - t).floordiv(16).bounds({"t": (0, 5)}) == (63, 63)
    assert (t.scale(2) - l).bounds({"t": (0, 3), "l": (1, 2)}) == (-2, 5)
    assert t.bounds({}) is None


@st.composite
def exprs(draw, depth=0):
    e = Expr(draw(st.integers(-50, 50)))
    for name in ("t", "l"):
        e = e + Expr.var(name).scale(draw(st.integers(-8, 8)))
    if depth < 2 and draw(st.booleans()):
        d = draw(st.integers(1, 9))
        inner = draw(exprs(depth + 1))
        form = draw(st.sampled_from(("floor", "mod", "min", "max")))
        atom = inner.floordiv(d) if form == "floor" else inner.mod(d) if form == "mod" else \
            inner.minmax(form, draw(exprs(depth + 1)))
        e = e + atom.scale(draw(st.integers(-3, 3)))
    return e


def test_min_and_max():
    m = Expr(256).minmax("min", Expr(1000) - t)
    assert str(m) == "min(-t + 1000, 256)"
    assert [m.evaluate({"t": v}) for v in (0, 744, 768)] == [256, 256, 232]
    assert m == (Expr(1000) - t).minmax("min", 256)  # argument order does not matter
    assert m.substitute({"t": Expr(768)}) == Expr(232)
    assert m.bounds({"t": (0, 999)}) == (1, 256)
    assert t.minmax("max", t + 3) == t + 3 and t.minmax("min", t + 3) == t  # constant apart
    assert (m + 63).floordiv(64).evaluate({"t": 768}) == 4
    assert m.variables() == {"t"}
    assert evaluate_text(str((m + 63).floordiv(64)), {"t": 768}) == 4


@given(exprs(), st.integers(-6, 6), st.integers(-6, 6))
def test_bounds_hold(e, tv, lv):
    lo, hi = e.bounds({"t": (-6, 6), "l": (-6, 6)})
    assert lo <= e.evaluate({"t": tv, "l": lv}) <= hi


@given(exprs(), st.integers(-20, 20), st.integers(-20, 20))
def test_printed_form_evaluates_like_the_expression(e, tv, lv):
    env = {"t": tv, "l": lv}
    assert evaluate_text(str(e), env) == e.evaluate(env)


@given(exprs(), st.integers(-20, 20), st.integers(-20, 20))
def test_printed_form_is_isl_syntax(e, tv, lv):
    # isl parses the printed expression and computes the same value.
    s = isl.Set(f"[t, l] -> {{ [v] : v = {e} and t = {tv} and l = {lv} }}")
    point = s.sample_point()
    assert point.get_coordinate_val(isl.dim_type.set, 0).to_python() == \
        e.evaluate({"t": tv, "l": lv})


@given(exprs(), st.integers(-5, 5), st.integers(-5, 5))
def test_substitution(e, a, b):
    sub = e.substitute({"t": l + a})
    assert sub.evaluate({"l": b}) == e.evaluate({"t": b + a, "l": b})
