"""The values of the access analysis: pieces of quasi-affine expressions, and their isl space.

A value is a `Val`: a few `Piece`s, each a quasi-affine `Expr` over the instance dimensions
(block ids `bx, by, bz`, thread ids `tx, ty, tz`, one dimension per enclosing loop) and the
host loop variables (isl parameters), valid where its isl `cond` holds (None: everywhere); a
pointer piece also has a `Base` (which parameter or shared array it points into). `select`s and
phis that merge different values become several pieces. Whatever cannot be expressed is unknown
(`pieces is None`, or a pointer piece with `expr None`) with the reason recorded; a value built
by over-approximation (a select on an unknown condition keeps both sides) has `exact=False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from sirius.analysis.expr import Expr

THREAD_DIMS = ("bx", "by", "bz", "tx", "ty", "tz")
MAX_PIECES = 16
_ADDRSPACE_RE = re.compile(r"addrspace\((\d+)\)")
_SPACE_OF = {1: "global", 3: "shared", 4: "const", 5: "local"}


@dataclass(frozen=True, slots=True)
class Binding:
    """What a launch fixes: grid and block sizes, the integer scalar arguments (None where the
    value is not an integer the host model knows) and the dynamic shared memory bytes."""

    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    scalars: tuple[Expr | None, ...]
    smem: Expr = Expr(0)

    def host_vars(self) -> list[str]:
        out: set[str] = set()
        for e in (*self.grid, *self.block, *(s for s in self.scalars if s is not None), self.smem):
            out |= e.variables()
        return sorted(out)


@dataclass(frozen=True, slots=True)
class Base:
    """Where a pointer points: `param` (kernel parameter `ref`), `shared` (array `ref`, an IR
    global), `global`/`const` (a module global), `local` (thread-private), `loaded` (a pointer
    read from memory: `ref` is the frozenset of the bases it was loaded through; it points
    wherever a pointer stored there may point, see sirius.analysis.uar.pointsto) or `any`
    (nothing is known: every allocation and every module global)."""

    space: str
    ref: int | str | frozenset = ""

    def __str__(self) -> str:
        if self.space == "loaded":
            inner = ", ".join(sorted(str(b) for b in self.ref))  # type: ignore[union-attr]
            return f"*({inner})"
        return f"{self.space}:{self.ref}"


ANY = Base("any")
MAX_LOAD_DEPTH = 3  # pointers loaded through pointers loaded through ...: deeper is `*(any)`


def loaded(sources) -> Base:
    """The base of a pointer loaded from memory reached through `sources` (bases; None is
    unknown). Nesting deeper than MAX_LOAD_DEPTH is cut to a load from anywhere."""
    srcs = frozenset(ANY if s is None else s for s in sources) or frozenset({ANY})
    if _depth(srcs) >= MAX_LOAD_DEPTH:
        srcs = frozenset({ANY})
    return Base("loaded", srcs)


def _depth(srcs: frozenset) -> int:
    return max((1 + _depth(b.ref) for b in srcs if b.space == "loaded"), default=0)


@dataclass(frozen=True, slots=True)
class Piece:
    cond: isl.Set | None
    expr: Expr | None
    base: Base | None = None


@dataclass(frozen=True, slots=True)
class Val:
    pieces: tuple[Piece, ...] | None
    exact: bool = True
    reason: str = ""

    @property
    def known(self) -> bool:
        return self.pieces is not None

    def inexact(self, reason: str) -> Val:
        return Val(self.pieces, False, reason)

    def single(self) -> Expr | None:
        if self.pieces and len(self.pieces) == 1 and self.pieces[0].cond is None:
            return self.pieces[0].expr
        return None


def same(a: Val, b: Val) -> bool:
    """The same value (conditions compared by identity: cheap and sufficient for phis)."""
    if a.pieces is None or b.pieces is None:
        return False
    return a.exact == b.exact and len(a.pieces) == len(b.pieces) and all(
        p.cond is q.cond and p.expr == q.expr and p.base == q.base
        for p, q in zip(a.pieces, b.pieces, strict=False))


def const(v: int | Expr) -> Val:
    return Val((Piece(None, Expr.of(v)),))


def unknown(reason: str) -> Val:
    return Val(None, False, reason)


@dataclass(frozen=True, slots=True)
class Cond:
    """Where an i1 value may be true; `exact` when it is true exactly there."""

    may: isl.Set
    exact: bool = True
    reason: str = ""


# offset maps by their text, shared by every Space: a kernel is summarised again in every view
# of a module that has it (the analysis, then the post-fusion passes on the fused kernels, whose
# fragments index as the originals do); isl maps are values, never changed in place
_OFFSET_MAPS: dict[str, isl.Map] = {}


class Space:
    """The isl space of one kernel under one binding: dimension and parameter names."""

    def __init__(self, dims: list[str], params: list[str]):
        self.dims = dims
        self.params = params
        self._head = f"[{', '.join(params)}] -> " if params else ""
        self._tuple = f"[{', '.join(dims)}]"
        self.universe = isl.Set(f"{self._head}{{ {self._tuple} }}")
        self.empty = self.universe.subtract(self.universe)
        self._cache: dict[str, isl.Set] = {}

    def set(self, constraint: str) -> isl.Set:
        s = self._cache.get(constraint)
        if s is None:
            s = isl.Set(f"{self._head}{{ {self._tuple} : {constraint} }}")
            self._cache[constraint] = s
        return s

    def map_to_offset(self, expr: Expr) -> isl.Map:
        text = f"{self._head}{{ {self._tuple} -> [o] : o = {expr} }}"
        m = _OFFSET_MAPS.get(text)
        if m is None:  # parsing is milliseconds for TVM's div/mod indexing; unrolled code repeats
            if len(_OFFSET_MAPS) >= 20000:
                _OFFSET_MAPS.clear()
            m = _OFFSET_MAPS[text] = isl.Map(text)
        return m

    def later(self, dim: str, step: int) -> isl.Map:
        """{ [.., dim, ..] -> [.., w, ..] : w comes after dim (step > 0: w > dim) }"""
        out = ["__w" if d == dim else d for d in self.dims]
        rel = ">" if step > 0 else "<"
        return isl.Map(f"{self._head}{{ {self._tuple} -> [{', '.join(out)}] : __w {rel} {dim} }}")


def collapse(vals: list[Val], reason: str) -> Val:
    """A pointer with too many cases: each base it may point into, anywhere in it."""
    bases = {p.base for v in vals for p in v.pieces}
    if None in bases:
        return unknown(reason)
    return Val(tuple(Piece(None, None, b) for b in sorted(bases, key=str)), False, reason)


def meet(a: isl.Set | None, b: isl.Set | None) -> isl.Set | None:
    """The intersection, None standing for everywhere."""
    if a is None:
        return b
    if b is None:
        return a
    return a.intersect(b)


def space_of_global(global_text: str) -> str:
    decl = global_text.split(" = ", 1)[-1]
    head = re.split(r"\b(?:global|constant)\b", decl, maxsplit=1)[0]
    m = _ADDRSPACE_RE.search(head)
    space = _SPACE_OF.get(int(m.group(1)) if m else 0, "global")
    if space == "global" and re.search(r"\bconstant\b", decl):
        return "const"
    return space
