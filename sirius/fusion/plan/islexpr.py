"""isl quasi-affine functions as sirius Exprs: a single-valued map as one tuple of Exprs of its
input dims, and the small simplifications the thread maps need (shared by map and permutation
re-indexing)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import lcm

import islpy as isl

from sirius.analysis.expr import Expr, FloorDiv, MinMax, Mod

T = isl.dim_type

__all__ = ["aff_expr", "aff_numerator", "frac", "simplify_expr", "single_function"]


def single_function(m: isl.Map, in_vars: Sequence[str]) -> tuple[Expr, ...] | None:
    """The map as one tuple of quasi-affine Exprs of its input dims (named `in_vars`), or None
    (several different pieces, parameters, not a function)."""
    if not m.is_single_valued():
        return None
    pma = isl.PwMultiAff.from_map(m.coalesce())
    pieces: list[isl.MultiAff] = []
    pma.foreach_piece(lambda _s, ma: pieces.append(ma))
    if not pieces:
        return None
    ma = pieces[0]
    if any(not p.plain_is_equal(ma) for p in pieces[1:]):
        # isl splits a function into pieces by its own rules; one piece's formula may still be
        # the whole function (checked on the whole domain)
        dom = m.domain()
        for p in pieces:
            if isl.Map.from_multi_aff(p).intersect_domain(dom).is_equal(m):
                ma = p
                break
        else:
            return None
    out = []
    for k in range(ma.dim(T.out)):
        e = aff_expr(ma.get_at(k), in_vars)
        if e is None:
            return None
        out.append(e)
    return tuple(out)


def aff_expr(aff: isl.Aff, in_vars: Sequence[str]) -> Expr | None:
    """An isl quasi-affine expression as an Expr (floor of the whole when its coefficients are
    fractions)."""
    num = aff_numerator(aff, in_vars)
    if num is None:
        return None
    e, den = num
    return e.floordiv(den) if den != 1 else e


def aff_numerator(aff: isl.Aff, in_vars: Sequence[str]) -> tuple[Expr, int] | None:
    """(N, d) with aff = N / d, N an Expr with integer coefficients."""
    if any(frac(aff.get_coefficient_val(T.param, k)) != 0
           for k in range(aff.dim(T.param))):
        return None
    terms: list[tuple[Expr, Fraction]] = []
    for k in range(aff.dim(T.in_)):
        c = frac(aff.get_coefficient_val(T.in_, k))
        if c:
            terms.append((Expr.var(in_vars[k]), c))
    for k in range(aff.dim(T.div)):
        c = frac(aff.get_coefficient_val(T.div, k))
        if c:
            d = aff_expr(aff.get_div(k), in_vars)  # the div is floor(its aff)
            if d is None:
                return None
            terms.append((d, c))
    const = frac(aff.get_constant_val())
    den = lcm(const.denominator, *(c.denominator for _, c in terms))
    out = Expr(int(const * den))
    for e, c in terms:
        out = out + e.scale(int(c * den))
    return out, den


def frac(v: isl.Val) -> Fraction:
    return Fraction(str(v))


def simplify_expr(e: Expr) -> Expr:
    """floor(floor(x/a)/b) = floor(x/(a*b)) (a, b > 0), recursively."""
    out = Expr(e.const)
    for a, c in e.terms:
        if isinstance(a, str):
            out = out + Expr.var(a).scale(c)
            continue
        if isinstance(a, MinMax):
            x, y = (simplify_expr(v) for v in a.args)
            out = out + x.minmax(a.kind, y).scale(c)
            continue
        num = simplify_expr(a.num)
        if isinstance(a, FloorDiv):
            inner = num.terms[0][0] if len(num.terms) == 1 and num.terms[0][1] == 1 \
                and not num.const else None
            if isinstance(inner, FloorDiv):
                out = out + inner.num.floordiv(inner.den * a.den).scale(c)
            else:
                out = out + num.floordiv(a.den).scale(c)
        else:
            assert isinstance(a, Mod)
            out = out + num.mod(a.den).scale(c)
    return out
