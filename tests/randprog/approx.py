"""Float64 reference values that carry a float32 error bound (running error analysis).

An `Approx` is an exact (float64) value v, a magnitude M >= |v| and a depth D per element, with
the invariant that the float32 program computes some v' with

    |v' - v| <= gamma(D) * M,    gamma(D) = D u / (1 - D u),  u = 2^-24.

Inputs are exact float32 values (M = |v|, D = 0). Each operation keeps the invariant:
  * a + b:   M = Ma + Mb,  D = max(Da, Db) + 1
  * a * b:   M = Ma * Mb,  D = Da + Db + 1
  * sum of n terms (any order, any tree, with or without fused multiply-adds):
             M = sum Mi,   D = max Di + n - 1          (Higham, ASNA 2nd ed., eq. 3.5)
  * max/min (1-Lipschitz, exact): M = max(Ma, Mb), D = max(Da, Db)
  * f(a) for a function with |f'| <= 1 and |f(x)| <= max(|x|, B), correctly rounded up to k ulps
    (tanhf, the sigmoid): M = max(Ma, B), D = Da + k.
A fused multiply-add rounds once where the bound counts two, so clang's `-ffp-contract=fast`
only makes the computed value closer. The bound is per element and needs no assumption about the
order in which a kernel sums (tree, serial, per-warp shuffles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U32 = 2.0 ** -24
TINY = 2.0 ** -120  # absolute slack for float32 underflow (subnormal results)


def gamma(depth: np.ndarray) -> np.ndarray:
    nu = np.asarray(depth, dtype=np.float64) * U32
    return nu / (1.0 - nu)


@dataclass(frozen=True, slots=True)
class Approx:
    value: np.ndarray   # float64
    mag: np.ndarray     # float64, >= |value|
    depth: np.ndarray   # int64

    @staticmethod
    def exact(a: np.ndarray) -> Approx:
        v = np.asarray(a, dtype=np.float64)
        return Approx(v, np.abs(v), np.zeros(v.shape, dtype=np.int64))

    @staticmethod
    def const(c: float, shape: tuple[int, ...]) -> Approx:
        return Approx(np.full(shape, c), np.full(shape, abs(c)), np.zeros(shape, np.int64))

    def tolerance(self) -> np.ndarray:
        return gamma(self.depth) * self.mag + TINY

    def reshape(self, *shape: int) -> Approx:
        return Approx(self.value.reshape(shape), self.mag.reshape(shape),
                      self.depth.reshape(shape))

    def __getitem__(self, idx) -> Approx:
        return Approx(self.value[idx], self.mag[idx], self.depth[idx])

    @property
    def T(self) -> Approx:  # noqa: N802 (numpy's name)
        return Approx(self.value.T, self.mag.T, self.depth.T)


def add(a: Approx, b: Approx) -> Approx:
    return Approx(a.value + b.value, a.mag + b.mag, np.maximum(a.depth, b.depth) + 1)


def sub(a: Approx, b: Approx) -> Approx:
    return Approx(a.value - b.value, a.mag + b.mag, np.maximum(a.depth, b.depth) + 1)


def mul(a: Approx, b: Approx) -> Approx:
    return Approx(a.value * b.value, a.mag * b.mag, a.depth + b.depth + 1)


def scale(s: float, a: Approx) -> Approx:
    return Approx(s * a.value, abs(s) * a.mag, a.depth + 1)


def shift(a: Approx, c: float) -> Approx:
    return Approx(a.value + c, a.mag + abs(c), a.depth + 1)


def maximum(a: Approx, b: Approx) -> Approx:
    return Approx(np.maximum(a.value, b.value), np.maximum(a.mag, b.mag),
                  np.maximum(a.depth, b.depth))


def minimum(a: Approx, b: Approx) -> Approx:
    return Approx(np.minimum(a.value, b.value), np.maximum(a.mag, b.mag),
                  np.maximum(a.depth, b.depth))


def lipschitz(a: Approx, value: np.ndarray, bound: float, ulps: int) -> Approx:
    """f(a) for a 1-Lipschitz f with |f(x)| <= max(|x|, bound), computed within `ulps`."""
    return Approx(value, np.maximum(a.mag, bound), a.depth + ulps)


def total(parts: list[Approx]) -> Approx:
    """The sum of the terms `parts` (same shape), in any order."""
    n = len(parts)
    value = np.sum([p.value for p in parts], axis=0)
    mag = np.sum([p.mag for p in parts], axis=0)
    depth = np.max([p.depth for p in parts], axis=0) + max(n - 1, 0)
    return Approx(value, mag, depth)


def sum_rows(a: Approx) -> Approx:
    """Sum along the last axis of a 2-D Approx: one value per row."""
    n = a.value.shape[-1]
    return Approx(a.value.sum(axis=-1), a.mag.sum(axis=-1), a.depth.max(axis=-1) + n)


def matmul(a: Approx, b: Approx) -> Approx:
    """(M, K) x (K, N): every output a sum of K rounded products."""
    k = a.value.shape[1]
    depth = int(a.depth.max(initial=0)) + int(b.depth.max(initial=0)) + k + 1
    value = a.value @ b.value
    return Approx(value, a.mag @ b.mag, np.full(value.shape, depth, dtype=np.int64))
