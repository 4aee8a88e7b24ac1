"""Floating-point host values: constants evaluated as the hardware rounds them, and integer
quotients whose ceil/floor is integer division (docs/host-model.md#floats).

Grid sizes are often written `(unsigned)ceil((float)n / block.x)`. When n is a constant the
whole expression is evaluated in the program's float format (IEEE single or double, round to
nearest even). When n is an affine function of host loop variables it becomes `FltInt(n, 24,
block.x)`, which stands for fl(n / block.x), and ceil of it becomes the integer expression
ceil(n / block.x) -- but only after proving over the loop ranges that |n| < 2^24 (2^53 for
double) and the divisor is an integer below that bound: then (float)n and the divisor are exact,
and the rounded quotient cannot reach or cross an integer (if n/d is not an integer it is at
least 1/d from one, while the rounding error is at most |n/d| 2^-24 < 1/d), so
ceil(fl(n/d)) = ceil(n/d) and floor likewise. Anything else stays unknown, with the reason.
"""

from __future__ import annotations

import math
import re
import struct

from sirius.analysis.expr import Expr
from sirius.analysis.host.values import AV, Flt, FltInt, Int, Unknown, const, int_bits

Ranges = dict[str, tuple[int, int]]
MANT = {"float": 24, "double": 53}


def round_to(v: float, ty: str) -> float:
    """`v` (a double) rounded to the float type `ty` (float: IEEE single, nearest even)."""
    if ty != "float" or math.isnan(v) or math.isinf(v):
        return v
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _exact(e: Expr, mant: int, ranges: Ranges, what: str) -> Unknown | None:
    """None when |e| < 2^mant over `ranges`, else why not."""
    b = e.bounds(ranges)
    if b is None:
        return Unknown(f"{what}: the range of {e} over the host loops is not known, so its "
                       "float conversion cannot be proved exact")
    if max(-b[0], b[1]) >= 1 << mant:
        return Unknown(f"{what}: {e} reaches {max(-b[0], b[1])} >= 2^{mant} over the host "
                       f"loops, where the {'float' if mant == 24 else 'double'} conversion "
                       "is not exact")
    return None


def _as_exact(av: AV, mant: int, ranges: Ranges) -> Expr | None:
    """An exactly represented integer value: FltInt of divisor 1, or an integral constant."""
    if isinstance(av, FltInt) and av.den == 1 and av.mant == mant:
        return av.e
    if isinstance(av, Flt) and av.v.is_integer() and abs(av.v) < 2.0 ** mant:
        return Expr(int(av.v))
    return None


def to_float(op: str, a: AV, src_ty: str, dst_ty: str, ranges: Ranges) -> AV:
    """sitofp / uitofp."""
    if isinstance(a, Int) and a.e.is_const:
        v = a.e.const
        if op == "uitofp":
            v &= (1 << int_bits(src_ty)) - 1
        return Flt(round_to(float(v), dst_ty))
    if not isinstance(a, Int):
        return a if isinstance(a, Unknown) else Unknown(f"'{op}' of a value sirius does not "
                                                        "track")
    mant = MANT.get(dst_ty)
    if mant is None:
        return Unknown(f"conversion of a loop-dependent value to {dst_ty}")
    why = _exact(a.e, mant, ranges, f"({dst_ty})({a.e})")
    if why is not None:
        return why
    b = a.e.bounds(ranges)
    if op == "uitofp" and b is not None and b[0] < 0:
        return Unknown(f"unsigned conversion of {a.e}, which may be negative")
    return FltInt(a.e, mant)


def from_float(op: str, a: AV, dst_ty: str, ranges: Ranges) -> AV:
    """fptosi / fptoui (truncation toward zero)."""
    bits = int_bits(dst_ty)
    a = norm(a)
    if isinstance(a, Flt):
        if math.isnan(a.v) or math.isinf(a.v):
            return Unknown(f"conversion of {a.v} to an integer")
        return const(int(a.v), bits)
    if isinstance(a, FltInt):
        q = rounded("trunc", a, ranges)
        if isinstance(q, Unknown):
            return q
        b = q.bounds(ranges)
        if op == "fptoui" and (b is None or b[0] < 0):
            return Unknown(f"unsigned conversion of {q}, which may be negative")
        return Int(q, bits)
    return a if isinstance(a, Unknown) else Unknown(f"'{op}' of a value sirius does not track")


def resize(op: str, a: AV, dst_ty: str, ranges: Ranges) -> AV:
    """fpext / fptrunc."""
    a = norm(a)
    if isinstance(a, Flt):
        return Flt(round_to(a.v, dst_ty))
    if isinstance(a, FltInt):
        mant = MANT.get(dst_ty)
        if a.den == 1 and mant is not None and _exact(a.e, mant, ranges, "") is None:
            return FltInt(a.e, mant)
        return Unknown(f"'{op}' of a rounded quotient ({a.e}) / {a.den}")
    return a


def float_binary(op: str, a: AV, b: AV, ty: str, ranges: Ranges) -> AV:
    a, b = norm(a), norm(b)
    if isinstance(a, Flt) and isinstance(b, Flt):
        try:
            v = {"fadd": lambda: a.v + b.v, "fsub": lambda: a.v - b.v,
                 "fmul": lambda: a.v * b.v, "fdiv": lambda: _div(a.v, b.v)}[op]()
        except (KeyError, OverflowError):
            return Unknown("floating-point value computed by host code")
        return Flt(round_to(v, ty))
    mant = MANT.get(ty)
    if mant is None or not (isinstance(a, FltInt) or isinstance(b, FltInt)):
        return _unknown(a, b)
    x, y = _as_exact(a, mant, ranges), _as_exact(b, mant, ranges)
    if op == "fdiv" and x is not None and y is not None and y.is_const and y.const != 0 \
            and not x.is_const:
        d = y.const
        return FltInt(x if d > 0 else -x, mant, abs(d))
    if op == "fmul" and (x is None) != (y is None):
        # x * 2^-k is x / 2^k, exactly as rounded (compilers turn the division into this)
        e, c = (x, b) if x is not None else (y, a)
        if isinstance(c, Flt) and c.v and abs(math.frexp(c.v)[0]) == 0.5 and abs(c.v) < 1 \
                and not e.is_const:
            d = round(1 / abs(c.v))
            if d < 1 << mant:
                return FltInt(e if c.v > 0 else -e, mant, d)
    if op in ("fadd", "fsub", "fmul") and x is not None and y is not None:
        r = x + y if op == "fadd" else x - y if op == "fsub" else x.mul(y)
        if r is None:
            return Unknown("product of two loop-dependent floats")
        why = _exact(r, mant, ranges, f"the float result {r}")
        return why if why is not None else FltInt(r, mant)
    return Unknown(f"float '{op}' of loop-dependent values that sirius does not model (only "
                   "integer values, their sums and products, and their quotients by integer "
                   "constants are)")


def _div(x: float, y: float) -> float:
    if y:
        return x / y
    return math.nan if x == 0 or math.isnan(x) else math.copysign(math.inf, x) * \
        math.copysign(1.0, y)


def norm(a: AV) -> AV:
    """A FltInt that no longer depends on loop variables is a plain float constant."""
    if isinstance(a, FltInt) and a.e.is_const:
        v = value(a)
        return Flt(v) if v is not None else a
    return a


def _unknown(a: AV, b: AV) -> Unknown:
    for v in (a, b):
        if isinstance(v, Unknown):
            return v
    return Unknown("floating-point value computed by host code")


_ROUNDING = re.compile(r"(?:llvm\.)?(ceil|floor|trunc)(?:f|\.f32|\.f64)?")


def float_call(name: str, args: list[AV], ranges: Ranges) -> AV | None:
    """ceil / floor / trunc (libm or LLVM intrinsic) of a host float; None: not one of them."""
    m = _ROUNDING.fullmatch(name)
    if m is None or len(args) != 1:
        return None
    fn, a = m.group(1), norm(args[0])
    if isinstance(a, Flt):
        if math.isnan(a.v) or math.isinf(a.v):
            return a
        return Flt(float({"ceil": math.ceil, "floor": math.floor, "trunc": math.trunc}[fn](a.v)))
    if isinstance(a, FltInt):
        q = rounded(fn, a, ranges)
        return q if isinstance(q, Unknown) else FltInt(q, a.mant)
    return a if isinstance(a, Unknown) else Unknown(f"{name}() of a value sirius does not track")


def rounded(fn: str, a: FltInt, ranges: Ranges) -> Expr | Unknown:
    """ceil, floor or trunc of fl(a.e / a.den) as an integer expression."""
    e, d = a.e, a.den
    if d == 1:
        return e
    if fn == "floor":
        return e.floordiv(d)
    if fn == "ceil":
        return (e + (d - 1)).floordiv(d)
    b = e.bounds(ranges)
    if b is not None and b[0] >= 0:
        return e.floordiv(d)
    if b is not None and b[1] <= 0:
        return (e + (d - 1)).floordiv(d)
    return Unknown(f"truncation of ({e}) / {d}, whose sign changes over the host loops")


def value(a: FltInt) -> float | None:
    """The float value of a constant FltInt (None: it depends on loop variables). Double
    rounding through double is innocuous for a quotient of integers below 2^24."""
    if not a.e.is_const:
        return None
    return round_to(a.e.const / a.den, "float" if a.mant == 24 else "double")
