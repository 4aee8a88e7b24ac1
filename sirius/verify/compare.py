"""The comparison rule of differential verification (docs/verify.md#tolerance): one array
against its reference, element by element, bitwise or within a float tolerance."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# (rtol, atol) by float dtype: |got - ref| <= atol + rtol * |ref|. float32 as the issue fixes it;
# float64 the same (fusion changes contraction, not precision); float16 one ulp near 1.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5), "float32": (1e-5, 1e-6), "float64": (1e-5, 1e-6)}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One array against its reference. `first_index` is the first element that differs (None
    when none does), `first_got` / `first_want` its two values as the dtype prints them."""

    elements: int
    mismatches: int
    max_abs: float
    max_rel: float
    bitwise: bool
    tolerance: str  # "bitwise" or "rtol=1e-05 atol=1e-06"
    message: str = ""
    first_index: int | None = None
    first_got: str = ""
    first_want: str = ""

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and not self.message


def tolerance_text(exact: bool) -> str:
    if exact:
        return "every buffer bitwise equal (exact)"
    return ("ints bitwise; floats bitwise or |got-ref| <= atol + rtol*|ref| "
            "(f32/f64: rtol 1e-5 atol 1e-6; f16: rtol 1e-3 atol 1e-5); NaN == NaN")


def tol_text(a: np.ndarray, exact: bool) -> str:
    """The tolerance column of one buffer: `bitwise` or `rtol=.. atol=..`."""
    tol = TOLERANCES.get(a.dtype.name)
    return "bitwise" if exact or tol is None else f"rtol={tol[0]:g} atol={tol[1]:g}"


def compare(got: np.ndarray, ref: np.ndarray, *, exact: bool = False) -> Comparison:
    """Compare `got` with the reference `ref` element by element (the rule in docs/verify.md)."""
    got, ref = np.asarray(got).reshape(-1), np.asarray(ref).reshape(-1)
    tol = None if exact else TOLERANCES.get(ref.dtype.name)
    text = tol_text(ref, exact)
    if got.dtype != ref.dtype or got.size != ref.size:
        return Comparison(ref.size, ref.size, math.inf, math.inf, False, text,
                          f"got {got.size} x {got.dtype}, expected {ref.size} x {ref.dtype}")
    bits_equal = got.view(np.uint8) == ref.view(np.uint8)
    same = bits_equal.reshape(ref.size, -1).all(axis=1) if ref.size else bits_equal
    bitwise = bool(same.all())
    if ref.dtype.kind == "f":
        g, r = got.astype(np.float64), ref.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        finite = np.isfinite(g) & np.isfinite(r)
        # a NaN or infinity must be matched exactly; finite values differ by |got - ref|
        with np.errstate(invalid="ignore"):
            diff = np.where(finite, np.abs(g - r), np.where(both_nan | (g == r), 0.0, math.inf))
        tiny = float(np.finfo(ref.dtype).tiny)
        scale = np.where(np.isfinite(r), np.maximum(np.abs(r), tiny), 1.0)
        good = same | both_nan
        if tol is not None:
            rtol, atol = tol
            good |= finite & (diff <= atol + rtol * np.abs(np.where(finite, r, 0.0)))
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        diff = np.abs(g - r)
        scale = np.maximum(np.abs(r), 1.0)
        good = same
    with np.errstate(invalid="ignore"):
        rel = diff / scale
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    bad = np.flatnonzero(~good)
    if not bad.size:
        return Comparison(ref.size, 0, max_abs, max_rel, bitwise, text)
    i = int(bad[0])
    return Comparison(ref.size, int(bad.size), max_abs, max_rel, bitwise, text,
                      first_index=i, first_got=_show(got[i]), first_want=_show(ref[i]))


def _show(x: np.generic) -> str:
    """An element as its dtype prints it (float32 0.1 is `0.1`, not 0.10000000149011612)."""
    return str(x)
