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
        e = e + (inner.floordiv(d) if draw(st.booleans()) else inner.mod(d)).scale(
            draw(st.integers(-3, 3)))
    return e


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
