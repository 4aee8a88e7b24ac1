"""Every positional isl call of sirius lives here; the rest of the code names dimensions.

Sets and maps are built from isl text with named dimensions (`{ [bx, tx, k] : ... }`), and the
helpers below find a dimension by its name before handing a position to isl. `evaluate` tests
points against a set with numpy (the soundness check runs it on millions of trace records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TypeVar

import islpy as isl
import numpy as np

T = isl.dim_type
IslObj = isl.Set | isl.Map | isl.BasicSet | isl.BasicMap
R = TypeVar("R")


def bounded(operations: int, f: Callable[[], R], default: R) -> R:
    """f() if isl finishes it within `operations` elementary operations, else `default`.
    (Some questions, like the equality of two sets with many divisions, can take isl minutes;
    every caller passes the conservative answer as the default.)
    Inside another bounded() call with a budget at least the outer one's, the outer budget
    holds: the count goes on (isl cannot say how much of it is left), and once it is
    spent every isl call fails, so each level returns its default. A smaller inner budget
    applies while f runs, and the outer count starts over after it (so the outer question may
    spend up to its budget again: still bounded)."""
    ctx = isl.DEFAULT_CONTEXT
    outer = ctx.get_max_operations()
    if outer and operations >= outer:
        try:
            return f()
        except isl.Error:
            return default
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        return f()
    except isl.Error:
        return default
    finally:
        ctx.set_max_operations(outer)
        ctx.reset_operations()


def finite_count(s: isl.Set) -> int | None:
    """How many integer points `s` holds, None when they are not finitely many. (Unbudgeted,
    as `covers_by_count` explains; fast for the bounded sets of one launch.)"""
    n = s.count_val()
    return n.to_python() if n.is_int() else None


def subset_by_count(a: isl.Set, b: isl.Set, max_points: int = 1 << 20) -> bool | None:
    """Whether a is a subset of b, for finite sets, by counting: |a u b| = |b|. None when
    either count is not finite or b has more than `max_points` points. isl's own test takes
    minutes where both sets are unions of pieces with divisions (a transpose's reads against
    a tiled matmul's writes); the counts take milliseconds there."""
    nb = finite_count(b)
    if nb is None or nb > max_points:
        return None
    nu = finite_count(a.union(b))
    return None if nu is None else nu == nb


def points(s: isl.Set) -> list[tuple[int, ...]]:
    """Every integer point of a bounded set, as tuples of its set dimensions (callers bound
    the count first: `finite_count`)."""
    n = s.dim(T.set)
    out: list[tuple[int, ...]] = []
    s.foreach_point(lambda p: out.append(tuple(p.get_coordinate_val(T.set, i).to_python()
                                               for i in range(n))))
    return out


def covers_by_count(box: isl.Set, cover: isl.Set, budget: int,
                    max_points: int = 1 << 22, max_pieces: int = 64) -> bool:
    """Whether every point of `box` (a set that is one box) lies in `cover`, decided by
    counting: the pieces of `cover` clipped to the box are pairwise disjoint and hold as many
    points as the box. It answers the subset questions isl's own test takes minutes on (a
    union of tiles with divisions covering a whole buffer) by enumeration: 2.9 s for the
    786432 bytes of paper-shape BERT's attention scores. False when it cannot tell: `box` not
    one box or over `max_points` points, more than `max_pieces` pieces, or the disjointness
    test over `budget` operations.
    (`count_val` is not called under a budget: cut short it answers a smaller count, not an
    error; the clipped pieces bound its work by the box's size.)"""
    if box.n_basic_set() != 1 or not box.is_box() or box.is_empty():
        return False
    points = 1
    for i in range(box.dim(T.set)):
        lo, hi = box.dim_min_val(i), box.dim_max_val(i)
        if not (lo.is_int() and hi.is_int()):
            return False
        points *= hi.to_python() - lo.to_python() + 1
    if points > max_points:
        return False
    pieces = [p for p in (isl.Set.from_basic_set(b).intersect(box)
                          for b in cover.get_basic_sets()) if not p.is_empty()]
    if len(pieces) > max_pieces:
        return False
    disjoint = bounded(budget, lambda: all(a.intersect(b).is_empty() for k, a in
                                           enumerate(pieces) for b in pieces[k + 1:]), False)
    return disjoint and sum(p.count_val().to_python() for p in pieces) == points


# names ----------------------------------------------------------------------------------------
def names(obj: IslObj, kind: isl.dim_type) -> list[str]:
    return [obj.get_dim_name(kind, i) or "" for i in range(obj.dim(kind))]


def in_names(m: isl.Map) -> list[str]:
    return names(m, T.in_)


def out_names(m: isl.Map) -> list[str]:
    return names(m, T.out)


_KINDS = {"in": T.in_, "out": T.out, "set": T.set}


def name_dims(obj: IslObj, kind: str, new: Sequence[str]) -> IslObj:
    """Name the dimensions of one tuple (`in`, `out` or `set`), in order."""
    for i, n in enumerate(new):
        obj = obj.set_dim_name(_KINDS[kind], i, n)
    return obj


def primed(obj: IslObj, kind: str) -> IslObj:
    """Every dimension of one tuple renamed `name'` (the target side of a dependence)."""
    return name_dims(obj, kind, [f"{n}'" for n in names(obj, _KINDS[kind])])


def set_names(s: isl.Set) -> list[str]:
    return names(s, T.set)


def param_names(obj: IslObj) -> list[str]:
    return names(obj, T.param)


def _find(obj: IslObj, name: str, kinds: Sequence[isl.dim_type]) -> tuple[isl.dim_type, int]:
    for kind in kinds:
        for i in range(obj.dim(kind)):
            if obj.get_dim_name(kind, i) == name:
                return kind, i
    raise KeyError(f"no dimension named {name!r} in {obj}")


def _kinds(obj: IslObj) -> tuple[isl.dim_type, ...]:
    if isinstance(obj, isl.Set | isl.BasicSet):
        return (T.set, T.param)
    return (T.in_, T.out, T.param)


def has_name(obj: IslObj, name: str) -> bool:
    try:
        _find(obj, name, _kinds(obj))
    except KeyError:
        return False
    return True


def involves(obj: IslObj, dims: Iterable[str]) -> bool:
    """Whether any constraint of the set mentions one of the named set dimensions."""
    for name in dims:
        if has_name(obj, name):
            kind, i = _find(obj, name, _kinds(obj))
            if obj.involves_dims(kind, i, 1):
                return True
    return False


def rename(obj: IslObj, old: str, new: str) -> IslObj:
    kind, i = _find(obj, old, _kinds(obj))
    return obj.set_dim_name(kind, i, new)


def set_tuple(obj: isl.Map, in_name: str | None, out_name: str | None) -> isl.Map:
    if in_name is not None:
        obj = obj.set_tuple_name(T.in_, in_name)
    if out_name is not None:
        obj = obj.set_tuple_name(T.out, out_name)
    return obj


# dimension surgery ----------------------------------------------------------------------------
def project_out(obj: IslObj, drop: Iterable[str]) -> IslObj:
    """Existentially quantify the named dimensions (set, input, output or parameter)."""
    for name in drop:
        if not has_name(obj, name):
            continue
        kind, i = _find(obj, name, _kinds(obj))
        obj = obj.project_out(kind, i, 1)
    return obj


def project_onto(obj: IslObj, keep: Iterable[str], kind: isl.dim_type = T.set) -> IslObj:
    keep = set(keep)
    return project_out(obj, [n for n in names(obj, kind) if n not in keep])


def free(s: isl.Set, dims: Iterable[str]) -> isl.Set:
    """Remove every constraint on the named set dimensions (they become unconstrained)."""
    for name in dims:
        _, i = _find(s, name, (T.set,))
        s = s.eliminate(T.set, i, 1)
    return s


def forget(s: isl.Set, dims: Iterable[str]) -> isl.Set:
    """Quantify the named set dimensions away and pin them to 0 (a loop that was left)."""
    for name in dims:
        _, i = _find(s, name, (T.set,))
        s = s.eliminate(T.set, i, 1).fix_val(T.set, i, 0)
    return s


def params_to_in(m: isl.Map, moved: Sequence[str]) -> isl.Map:
    """Move the named parameters to the front of the input tuple (in the given order)."""
    tuple_name = m.get_tuple_name(T.in_)
    for pos, name in enumerate(moved):
        if not has_name(m, name):
            m = m.insert_dims(T.in_, pos, 1).set_dim_name(T.in_, pos, name)
            continue
        kind, i = _find(m, name, (T.param,))
        m = m.move_dims(T.in_, pos, kind, i, 1)
    return m.set_tuple_name(T.in_, tuple_name) if tuple_name else m


def params_to_set(s: isl.Set, moved: Sequence[str]) -> isl.Set:
    tuple_name = s.get_tuple_name()
    for pos, name in enumerate(moved):
        if not has_name(s, name):
            s = s.insert_dims(T.set, pos, 1).set_dim_name(T.set, pos, name)
            continue
        kind, i = _find(s, name, (T.param,))
        s = s.move_dims(T.set, pos, kind, i, 1)
    return s.set_tuple_name(tuple_name) if tuple_name else s


def fix_params(obj: IslObj, values: Mapping[str, int]) -> IslObj:
    for name, v in values.items():
        if has_name(obj, name):
            kind, i = _find(obj, name, (T.param,))
            obj = obj.fix_val(kind, i, int(v))
    return obj


def flat(m: isl.Map) -> isl.Set:
    """The map as one set over its input dimensions followed by its output dimensions."""
    return m.wrap().flatten()


def regroup(s: isl.Set, ins: Sequence[str], outs: Sequence[str]) -> isl.Map:
    """A map from the named dimensions `ins` to `outs` of a set; the others are projected out."""
    dims = set_names(s)
    pos = {n: i for i, n in enumerate(dims)}
    gen = [f"i{i}" for i in range(len(dims))]
    tup = s.get_tuple_name() or ""
    pick = lambda sel: ", ".join(gen[pos[n]] for n in sel)  # noqa: E731
    m = isl.Map(f"{{ {tup}[{', '.join(gen)}] -> [[{pick(ins)}] -> [{pick(outs)}]] }}")
    out = s.apply(m).unwrap()
    for i, n in enumerate(ins):
        out = out.set_dim_name(T.in_, i, n)
    for i, n in enumerate(outs):
        out = out.set_dim_name(T.out, i, n)
    return out


def bounds(s: isl.Set, dim: str) -> tuple[int, int] | None:
    """Inclusive [min, max] of a dimension over a set (parameters included), None if unbounded
    or empty."""
    s = project_onto(project_out(s, param_names(s)), [dim])
    if s.is_empty():
        return None
    lo, hi = s.dim_min_val(0), s.dim_max_val(0)
    if not (lo.is_int() and hi.is_int()):
        return None
    return lo.to_python(), hi.to_python()


# evaluation with numpy ------------------------------------------------------------------------
def _frac(v: isl.Val) -> Fraction:
    return Fraction(str(v))


def _int_row(coeffs: list[Fraction], const: Fraction) -> tuple[list[int], int, int]:
    den = 1
    for c in [*coeffs, const]:
        den = den * c.denominator // np.gcd(den, c.denominator)
    return [int(c * den) for c in coeffs], int(const * den), den


class Compiled:
    """A set ready to test many points with numpy: per basic set, its divisions and
    constraints as integer coefficient rows over (dims, params, divs).

    Existentially quantified variables must become explicit divisions (isl's compute_divs);
    for a basic set where that exceeds `budget` isl operations, its existentials are dropped
    instead (`remove_divs`, a superset) and `loose` is set: the test may then accept a point
    just outside the set, never reject one inside."""

    def __init__(self, s: isl.Set, budget: int = 200_000):
        self.loose = False
        pieces = []
        for bs in s.get_basic_sets():
            one = isl.Set.from_basic_set(bs)
            got = bounded(budget, one.compute_divs, None)
            if got is None:
                got, self.loose = one.remove_divs(), True
            pieces.append(got)
        basics = [bs for p in pieces for bs in p.get_basic_sets()]
        self.dims = set_names(s)
        self.params = param_names(s)
        nd, npar = len(self.dims), len(self.params)
        self.parts: list[tuple[list[tuple[list[int], int, int]], list[tuple[list[int], int, bool]]]]
        self.parts = []
        for bs in basics:
            divs = []
            for j in range(bs.dim(T.div)):
                aff = bs.get_div(j)
                coeffs = [_frac(aff.get_coefficient_val(T.in_, i)) for i in range(nd)]
                coeffs += [_frac(aff.get_coefficient_val(T.param, i)) for i in range(npar)]
                coeffs += [_frac(aff.get_coefficient_val(T.div, i)) for i in range(j)]
                divs.append(_int_row(coeffs, _frac(aff.get_constant_val())))
            cons = []
            for con in bs.get_constraints():
                row = [int(_frac(con.get_coefficient_val(T.set, i))) for i in range(nd)]
                row += [int(_frac(con.get_coefficient_val(T.param, i))) for i in range(npar)]
                row += [int(_frac(con.get_coefficient_val(T.div, i)))
                        for i in range(bs.dim(T.div))]
                cons.append((row, int(_frac(con.get_constant_val())), con.is_equality()))
            self.parts.append((divs, cons))

    def __call__(self, columns: Mapping[str, np.ndarray], params: Mapping[str, int]
                 ) -> np.ndarray:
        n = len(next(iter(columns.values())))
        base: list[np.ndarray | int] = [np.asarray(columns[d], dtype=np.int64)
                                        for d in self.dims]
        base += [int(params[p]) for p in self.params]
        result = np.zeros(n, dtype=bool)
        for divs, cons in self.parts:
            values = list(base)
            for row, const, den in divs:
                values.append(np.floor_divide(_dot(row, values, const, n), den))
            ok = np.ones(n, dtype=bool)
            for row, const, eq in cons:
                acc = _dot(row, values, const, n)
                ok &= (acc == 0) if eq else (acc >= 0)
            result |= ok
        return result


def _dot(row: list[int], values: list, const: int, n: int) -> np.ndarray:
    acc = np.full(n, const, dtype=np.int64)
    for c, v in zip(row, values, strict=False):
        if c:
            acc = acc + c * v
    return acc


def evaluate(s: isl.Set, columns: Mapping[str, np.ndarray],
             params: Mapping[str, int]) -> np.ndarray:
    """Whether each point (one per row of the equal-length `columns`, by dimension name) lies in
    `s` with the parameters fixed to `params`. Missing parameters are quantified away."""
    missing = [p for p in param_names(s) if p not in params]
    return Compiled(project_out(s, missing))(columns, params)


def intervals_mod(s: isl.Set, key: str, value: str, modulus: int,
                  keys: int) -> list[tuple[int, int] | None] | None:
    """For each k in 0..keys-1: the inclusive [min, max] of (`value` mod `modulus`) over the
    points of `s` where (`key` mod `modulus`) = k (None where there is none); `key` and
    `value` are affine expressions of the set's named dimensions. None when `s` has
    parameters or an interval is unbounded."""
    if param_names(s):
        return None
    dims = set_names(s)
    tup = s.get_tuple_name() or ""
    m = isl.Map(f"{{ {tup}[{', '.join(dims)}] -> [k, v] : k = ({key}) mod {modulus} and "
                f"v = ({value}) mod {modulus} }}")
    kv = s.apply(m)
    out: list[tuple[int, int] | None] = []
    for k in range(keys):
        at = kv.intersect(isl.Set(f"{{ [k, v] : k = {k} }}"))
        if at.is_empty():
            out.append(None)
            continue
        got = bounds(at, "v")
        if got is None:
            return None
        out.append(got)
    return out


def has_unknown_divs(s: isl.Set) -> bool:
    """Whether a basic set of `s` has an existentially quantified variable with no known
    expression (what a projection leaves). isl's subtraction and counting on such sets can
    run for hours without checking the operation budget, so callers ask first."""
    for b in s.get_basic_sets():
        for i in range(b.dim(T.div)):
            try:
                b.get_div(i)
            except isl.Error:
                return True
    return False
