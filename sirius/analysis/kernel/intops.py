"""Integer operations of LLVM on quasi-affine expressions: constant shifts, divisions,
remainders and bit masks become floor/mod terms (exact in isl); None where the result is not
quasi-affine."""

from __future__ import annotations

import math
import re

from sirius.analysis.expr import Expr


def signed(x: int, ty: str) -> int:
    """The signed value of an integer constant of LLVM type `ty` (llvmlite reads them unsigned)."""
    m = re.fullmatch(r"i(\d+)", ty)
    if m:
        bits = int(m.group(1))
        x &= (1 << bits) - 1
        if bits > 1 and x >= 1 << (bits - 1):
            x -= 1 << bits
    return x


def pow2(c: Expr | None) -> int | None:
    if c is None or not c.is_const or c.const <= 0 or c.const & (c.const - 1):
        return None
    return c.const.bit_length() - 1


def div(a: Expr, b: Expr) -> Expr | None:
    return a.floordiv(b.const) if b.is_const and b.const > 0 else None


def rem(a: Expr, b: Expr) -> Expr | None:
    return a.mod(b.const) if b.is_const and b.const > 0 else None


def shl(a: Expr, b: Expr) -> Expr | None:
    return a.scale(1 << b.const) if b.is_const and 0 <= b.const < 63 else None


def shr(a: Expr, b: Expr) -> Expr | None:
    return a.floordiv(1 << b.const) if b.is_const and 0 <= b.const < 63 else None


def bit_runs(m: int) -> list[tuple[int, int]]:
    """The maximal runs [lo, hi) of set bits of m >= 0."""
    runs, lo = [], 0
    while m >> lo:
        if (m >> lo) & 1:
            hi = lo
            while (m >> hi) & 1:
                hi += 1
            runs.append((lo, hi))
            lo = hi
        else:
            lo += 1
    return runs


def and_mask(a: Expr, b: Expr) -> Expr | None:
    """a & m for a constant m: each run of bits [lo, hi) of m keeps
    (a mod 2^hi) - (a mod 2^lo) (floor mod: right for negative a too); a negative m clears
    the runs of ~m from a."""
    if a.is_const and b.is_const:
        return Expr(a.const & b.const)
    if a.is_const:
        a, b = b, a
    if not b.is_const:
        return None
    m = b.const
    runs = bit_runs(m if m >= 0 else ~m)
    if len(runs) > 4:
        return None
    kept = Expr(0)
    for lo, hi in runs:
        kept = kept + a.mod(1 << hi) - a.mod(1 << lo)
    return kept if m >= 0 else a - kept


def xor(a: Expr, b: Expr) -> Expr | None:
    if a.is_const and b.is_const:
        return Expr(a.const ^ b.const)
    return -a - 1 if b.is_const and b.const == -1 else None  # ~a


def low_zero_bits(e: Expr) -> int:
    """How many low bits of e are known to be zero (e's coefficients are all even...)."""
    g = e.const
    for _, c in e.terms:
        g = math.gcd(g, c)
    return 64 if g == 0 else (abs(g) & -abs(g)).bit_length() - 1


def or_disjoint(x: Expr, y: Expr) -> Expr | None:
    if x.is_const and y.is_const:
        return Expr(x.const | y.const)
    if x.is_const:
        x, y = y, x
    if y.is_const and 0 <= y.const < (1 << low_zero_bits(x)):
        return x + y  # the set bits of y are below every possibly set bit of x
    return None


def bit_width(ty: str) -> int:
    return int(ty[1:]) if ty[1:].isdigit() else 64
