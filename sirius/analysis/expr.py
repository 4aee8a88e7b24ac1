"""Quasi-affine integer expressions over named variables (host loop variables).

An `Expr` is `const + sum(coeff * atom)` where an atom is a variable name, a `floor(e / d)` /
`e mod d` of another Expr by a positive constant (what isl calls quasi-affine), or the `min` /
`max` of two Exprs (a piecewise quasi-affine value, as isl reads it: `MIN(n, total - t)` as a
launch argument). Expressions are immutable, canonical in their affine part (equal expressions
compare equal; min/max are kept as written, their arguments ordered) and print in isl syntax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

Atom = Union[str, "FloorDiv", "Mod", "MinMax"]


@dataclass(frozen=True, slots=True)
class FloorDiv:
    num: Expr
    den: int

    def __str__(self) -> str:
        return f"floor(({self.num})/{self.den})"


@dataclass(frozen=True, slots=True)
class Mod:
    num: Expr
    den: int

    def __str__(self) -> str:
        simple = len(self.num.terms) == 1 and self.num.terms[0][1] == 1 and not self.num.const
        return f"({self.num} mod {self.den})" if simple else f"(({self.num}) mod {self.den})"


@dataclass(frozen=True, slots=True)
class MinMax:
    kind: str  # min | max
    args: tuple[Expr, Expr]

    def __str__(self) -> str:
        return f"{self.kind}({self.args[0]}, {self.args[1]})"

    def pick(self, x: int, y: int) -> int:
        return min(x, y) if self.kind == "min" else max(x, y)


def _atom_key(a: Atom) -> tuple[int, str]:
    return (0, a) if isinstance(a, str) else (1, str(a))


@dataclass(frozen=True, slots=True)
class Expr:
    const: int = 0
    terms: tuple[tuple[Atom, int], ...] = ()

    # construction -------------------------------------------------------------------------
    @staticmethod
    def var(name: str) -> Expr:
        return Expr(0, ((name, 1),))

    @staticmethod
    def of(x: int | Expr) -> Expr:
        return x if isinstance(x, Expr) else Expr(int(x))

    @staticmethod
    def _make(const: int, coeffs: dict[Atom, int]) -> Expr:
        terms = tuple(sorted(((a, c) for a, c in coeffs.items() if c != 0),
                             key=lambda t: _atom_key(t[0])))
        return Expr(const, terms)

    # queries ------------------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return not self.terms

    def variables(self) -> set[str]:
        out: set[str] = set()
        for a, _ in self.terms:
            if isinstance(a, str):
                out.add(a)
            elif isinstance(a, MinMax):
                out |= a.args[0].variables() | a.args[1].variables()
            else:
                out |= a.num.variables()
        return out

    # arithmetic ---------------------------------------------------------------------------
    def __add__(self, other: int | Expr) -> Expr:
        o = Expr.of(other)
        coeffs = dict(self.terms)
        for a, c in o.terms:
            coeffs[a] = coeffs.get(a, 0) + c
        return Expr._make(self.const + o.const, coeffs)

    __radd__ = __add__

    def __neg__(self) -> Expr:
        return Expr(-self.const, tuple((a, -c) for a, c in self.terms))

    def __sub__(self, other: int | Expr) -> Expr:
        return self + (-Expr.of(other))

    def __rsub__(self, other: int | Expr) -> Expr:
        return Expr.of(other) - self

    def scale(self, k: int) -> Expr:
        if k == 0:
            return Expr(0)
        return Expr(self.const * k, tuple((a, c * k) for a, c in self.terms))

    def mul(self, other: Expr) -> Expr | None:
        """The product, or None when it is not affine (two non-constant factors)."""
        if other.is_const:
            return self.scale(other.const)
        if self.is_const:
            return other.scale(self.const)
        return None

    def floordiv(self, d: int) -> Expr:
        if d <= 0:
            raise ValueError("floordiv by a non-positive constant")
        if d == 1:
            return self
        if self.is_const:
            return Expr(self.const // d)
        if all(c % d == 0 for _, c in self.terms):
            # floor((d*a + c)/d) = a + floor(c/d)
            return Expr(self.const // d, tuple((a, c // d) for a, c in self.terms))
        return Expr._make(0, {FloorDiv(self, d): 1})

    def mod(self, d: int) -> Expr:
        if d <= 0:
            raise ValueError("mod by a non-positive constant")
        if self.is_const:
            return Expr(self.const % d)
        if all(c % d == 0 for _, c in self.terms):
            return Expr(self.const % d)
        return Expr._make(0, {Mod(self, d): 1})

    def minmax(self, kind: str, other: int | Expr) -> Expr:
        """min(self, other) or max(self, other) (`kind`); a plain Expr when the two differ by a
        constant (then one of them is always the answer)."""
        if kind not in ("min", "max"):
            raise ValueError(f"minmax of kind {kind!r} (min or max)")
        o = Expr.of(other)
        diff = self - o
        if diff.is_const:
            return (self if diff.const <= 0 else o) if kind == "min" else \
                (self if diff.const >= 0 else o)
        a, b = sorted((self, o), key=str)
        return Expr._make(0, {MinMax(kind, (a, b)): 1})

    # evaluation ---------------------------------------------------------------------------
    def evaluate(self, env: dict[str, int]) -> int:
        total = self.const
        for a, c in self.terms:
            total += c * _eval_atom(a, env)
        return total

    def substitute(self, env: dict[str, Expr]) -> Expr:
        out = Expr(self.const)
        for a, c in self.terms:
            if isinstance(a, str):
                out = out + (env[a] if a in env else Expr.var(a)).scale(c)
            elif isinstance(a, FloorDiv):
                out = out + a.num.substitute(env).floordiv(a.den).scale(c)
            elif isinstance(a, MinMax):
                x, y = (e.substitute(env) for e in a.args)
                out = out + x.minmax(a.kind, y).scale(c)
            else:
                out = out + a.num.substitute(env).mod(a.den).scale(c)
        return out

    def bounds(self, ranges: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
        """Inclusive [min, max] over the box `ranges` (interval arithmetic), None if unbounded."""
        lo = hi = self.const
        for a, c in self.terms:
            if isinstance(a, str):
                if a not in ranges:
                    return None
                alo, ahi = ranges[a]
            elif isinstance(a, FloorDiv):
                b = a.num.bounds(ranges)
                if b is None:
                    return None
                alo, ahi = b[0] // a.den, b[1] // a.den
            elif isinstance(a, MinMax):
                bx, by = a.args[0].bounds(ranges), a.args[1].bounds(ranges)
                if bx is None or by is None:
                    return None
                alo, ahi = a.pick(bx[0], by[0]), a.pick(bx[1], by[1])
            else:
                alo, ahi = 0, a.den - 1
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        return lo, hi

    # printing -----------------------------------------------------------------------------
    def __str__(self) -> str:
        parts: list[str] = []
        for a, c in self.terms:
            s = str(a)
            if c == 1:
                parts.append(f"+ {s}")
            elif c == -1:
                parts.append(f"- {s}")
            elif c < 0:
                parts.append(f"- {-c}*{s}")
            else:
                parts.append(f"+ {c}*{s}")
        if self.const or not parts:
            parts.append(f"+ {self.const}" if self.const >= 0 else f"- {-self.const}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def to_json(self) -> int | str:
        return self.const if self.is_const else str(self)


def _eval_atom(a: Atom, env: dict[str, int]) -> int:
    if isinstance(a, str):
        return env[a]
    if isinstance(a, FloorDiv):
        return a.num.evaluate(env) // a.den
    if isinstance(a, MinMax):
        return a.pick(a.args[0].evaluate(env), a.args[1].evaluate(env))
    return a.num.evaluate(env) % a.den


def evaluate_text(text: int | str, env: dict[str, int]) -> int:
    """Evaluate an expression as printed (`4*t + 16`, `floor((t + 15)/16)`, `((t) mod 2)`,
    `min(256, 1000 - t)`)."""
    if isinstance(text, int):
        return text
    py = text.replace(" mod ", " % ")
    py = py.replace("/", "//")
    return int(eval(py, {"__builtins__": {}, "floor": lambda x: x, "min": min, "max": max},  # noqa: S307
                    dict(env)))
