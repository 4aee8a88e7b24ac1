"""The skew of a host loop nest's wavefront (wavefront.py): the nest's loops as iteration
counts (`NestRange`), isl's schedule of the nest and the skews its outermost permutable band
suggests, the fixed list after them, and the proof that a skew puts every dependence between
two instances into a later stage (`check_legal`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.uar.dependences import Dependence
from sirius.analysis.uar.effects import Statement

SCHEDULE_BUDGET = 500_000  # isl operations for computing one nest's schedule


@dataclass(frozen=True, slots=True)
class NestRange:
    """The iterations of a host loop with constant bounds: lo + step*i, i in [0, trips)."""

    var: str
    lo: int
    step: int
    trips: int

    def at(self, i: Expr | int) -> Expr:
        return Expr.of(i).scale(self.step) + self.lo

    def index(self) -> str:
        """The iteration count i as a function of the variable, as text."""
        v, lo, s = self.var, self.lo, self.step
        num = v if lo == 0 else f"({v} - {lo})" if s > 0 else f"({lo} - {v})"
        if s < 0 and lo == 0:
            num = f"-{v}"
        return num if abs(s) == 1 else f"{num}/{abs(s)}"


class Refuse(Exception):
    """A nest is left alone; the message says why."""


def relation(like: isl.Map, constraints: list[str]) -> isl.Map:
    """`{ S[a0, ..] -> S'[b0, ..] : constraints }` in the space of `like` (tuple names, sizes
    and parameters)."""
    params = islutil.param_names(like)
    head = f"[{', '.join(params)}] -> " if params else ""
    src = ", ".join(f"a{k}" for k in range(len(islutil.in_names(like))))
    dst = ", ".join(f"b{k}" for k in range(len(islutil.out_names(like))))
    cond = " and ".join(constraints) or "true"
    return isl.Map(f"{head}{{ {like.get_tuple_name(isl.dim_type.in_)}[{src}] -> "
                   f"{like.get_tuple_name(isl.dim_type.out)}[{dst}] : {cond} }}")


def nest_schedule(stmts: list[Statement], rels: list[isl.Map]) -> isl.Schedule | None:
    """isl's schedule of the body statements, the dependences as validity and proximity
    constraints; None when isl runs out of its budget. isl's guard against loop coalescing is
    off for this question: it rejects a coefficient as large as another loop's extent, which is
    exactly what a steep wavefront (5l + t over 3 values of l) needs."""
    domain = isl.UnionSet.from_set(stmts[0].domain)
    for st in stmts[1:]:
        domain = domain.union(isl.UnionSet.from_set(st.domain))
    validity = isl.UnionMap("{ }")
    for rel in rels:
        validity = validity.union(isl.UnionMap.from_map(rel))
    sc = isl.ScheduleConstraints.on_domain(domain).set_validity(validity).set_proximity(validity)
    ctx = domain.get_ctx()
    coalescing = ctx.get_schedule_treat_coalescing()
    ctx.set_schedule_treat_coalescing(0)
    try:
        return islutil.bounded(SCHEDULE_BUDGET, sc.compute_schedule, None)
    finally:
        ctx.set_schedule_treat_coalescing(coalescing)


def _outer_band(sched: isl.Schedule) -> isl.ScheduleNode | None:
    """The outermost band node of a schedule tree, None when it has none."""
    node = sched.get_root()
    while node.get_type() != isl.schedule_node_type.band and node.n_children() > 0:
        node = node.child(0)
    return node if node.get_type() == isl.schedule_node_type.band else None


def permutable(sched: isl.Schedule | None) -> bool | None:
    band = None if sched is None else _outer_band(sched)
    return None if band is None else bool(band.band_get_permutable())


def band_skews(sched: isl.Schedule | None, nest: tuple[NestRange, NestRange]
                ) -> tuple[tuple[int, int], ...]:
    """The skews isl's schedule suggests: its outermost band's first two rows that involve the
    nest's loops, each alone and their sum (any positive sum of a permutable band's rows keeps
    every dependence's distance non-negative; `check_legal` decides which separate the
    instances). A row c_l*l + c_t*t is c_l*s_l*i + c_t*s_t*j plus a constant in iteration
    counts; each skew is divided by its gcd. Nothing when the band is not permutable, or a row
    is not one affine function of the loops for every statement (a per-statement shift or
    coefficient, an inner loop's variable, a division): such a row does not map an instance
    (l, t), all its launches, to one stage. The coefficients of the loops around the nest,
    fixed inside it, are dropped."""
    band = None if sched is None else _outer_band(sched)
    if band is None or not band.band_get_permutable():
        return ()
    partial = band.band_get_partial_schedule()
    rows: list[tuple[int, int]] = []
    for k in range(band.band_n_member()):
        if len(rows) == 2:
            break
        row = _row(partial.get_at(k), nest)
        if row is None:
            return ()
        if row != (0, 0):
            rows.append(row)
    if len(rows) == 2:
        rows.append((rows[0][0] + rows[1][0], rows[0][1] + rows[1][1]))
    skews = (_reduced(r) for r in rows)
    return tuple(dict.fromkeys(s for s in skews if s != (0, 0)))


def _row(row: isl.UnionPwAff, nest: tuple[NestRange, NestRange]) -> tuple[int, int] | None:
    """The coefficients (a, b) of i and j in one band row, when the row is the same affine
    function of the loops for every statement; None otherwise."""
    pieces = row.get_pw_aff_list()
    forms = {_affine(aff, nest[1].var)
             for k in range(pieces.n_pw_aff()) for _, aff in pieces.get_at(k).get_pieces()}
    if len(forms) != 1 or None in forms:
        return None
    (form,) = forms
    assert form is not None
    coefs = dict(form[0])
    return tuple(coefs.get(r.var, 0) * r.step for r in nest)  # type: ignore[return-value]


def _affine(aff: isl.Aff, inner: str) -> tuple[frozenset[tuple[str, int]], int] | None:
    """One statement's piece of a schedule row as (its non-zero coefficients by loop name, its
    constant), when it is an integer affine function of the loops down to the nest's `inner`
    one (no division, no parameter, no deeper loop); None otherwise."""
    if aff.dim(isl.dim_type.div):
        return None
    coefs: dict[str, int] = {}
    deeper = False
    for name, (kind, pos) in sorted(aff.get_var_dict().items(), key=lambda x: x[1][1]):
        val = aff.get_coefficient_val(kind, pos)
        if not val.is_int():
            return None
        c = val.to_python()
        if c and (kind != isl.dim_type.in_ or deeper):
            return None
        if c:
            coefs[name] = c
        deeper = deeper or (kind == isl.dim_type.in_ and name == inner)
    const = aff.get_constant_val()
    return (frozenset(coefs.items()), const.to_python()) if const.is_int() else None


def _reduced(skew: tuple[int, int]) -> tuple[int, int]:
    g = math.gcd(*skew)
    return skew if g == 0 else (skew[0] // g, skew[1] // g)


# the skews tried after isl's band: the plain wavefront, then steeper ones (a dependence from
# (l - 1, t + 1) to (l, t) needs 2l + t)
SKEWS = ((1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (3, 2), (2, 3))


def legal_skew(deps: list[tuple[Dependence, isl.Map]], depth: int,
                ranges: tuple[NestRange, NestRange], band: tuple[tuple[int, int], ...]
                ) -> tuple[tuple[int, int], str]:
    """The skew (a, b) with the fewest stages w = a*i + b*j (i, j the iteration counts) under
    which every dependence goes to a later stage or stays in one instance, checked with isl,
    and where it came from: "isl band" (`band`, first on a tie) or "fixed list" (SKEWS). A skew
    with one instance in every stage only serializes the nest: not used. Refuse, with the plain
    wavefront's counterexample, when no skew is left."""
    rl, rt = ranges
    tried = [*band, *(s for s in SKEWS if s not in band)]
    plain = None
    for skew in sorted(tried, key=lambda s: _stage_count(s, rl.trips, rt.trips)):
        if _stage_count(skew, rl.trips, rt.trips) == rl.trips * rt.trips:
            break  # this one and the rest: one instance per stage (after l + t, which is not)
        try:
            check_legal(deps, depth, ranges, skew)
            return skew, "isl band" if skew in band else "fixed list"
        except Refuse as e:
            plain = e if skew == (1, 1) else plain
    assert plain is not None
    raise plain


def _stage_count(skew: tuple[int, int], nl: int, nt: int) -> int:
    return len({skew[0] * i + skew[1] * j for i in range(nl) for j in range(nt)})


def check_legal(deps: list[tuple[Dependence, isl.Map]], depth: int,
                 ranges: tuple[NestRange, NestRange], skew: tuple[int, int] = (1, 1)) -> None:
    """Refuse unless every dependence goes to a later stage or stays in one instance."""
    rl, rt = ranges
    # w(b) - w(a) = a*dl/step_l + b*dt/step_t; scaled by |step_l*step_t| > 0
    cl = skew[0] * (1 if rl.step > 0 else -1) * abs(rt.step)
    ct = skew[1] * (1 if rt.step > 0 else -1) * abs(rl.step)
    dl, dt = f"(b{depth} - a{depth})", f"(b{depth + 1} - a{depth + 1})"
    for d, rel in deps:
        bad = relation(rel, [f"{cl}*{dl} + {ct}*{dt} <= 0", f"({dl} != 0 or {dt} != 0)"])
        hit = rel.intersect(bad)
        if not hit.is_empty():
            what = f"{d.kind} on {d.buffer}" if d.buffer else d.kind
            raise Refuse(f"dependence {d.src} -> {d.dst} ({what}) links two instances of one "
                          f"wavefront ({rl.var} + {rt.var} does not increase, and no other skew "
                          "tried, from isl's band or the fixed list, gives a stage of two "
                          f"instances), e.g. {hit.sample()}")


def skewed(skew: tuple[int, int], nl: int, nt: int) -> list[list[tuple[int, int]]]:
    """The instances (i, j) of each non-empty stage w = a*i + b*j, stages in order, i
    increasing in a stage."""
    a, b = skew
    stages: dict[int, list[tuple[int, int]]] = {}
    for i in range(nl):
        for j in range(nt):
            stages.setdefault(a * i + b * j, []).append((i, j))
    return [stages[w] for w in sorted(stages)]


def skew_text(var: str, skew: tuple[int, int], ranges: tuple[NestRange, NestRange]) -> str:
    """`w = 5*l + t`, `w = l`, `w = l - t`: the skew over the iteration counts as text."""
    text = ""
    for c, r in zip(skew, ranges, strict=True):
        if c:
            sign = (" - " if c < 0 else " + ") if text else ("-" if c < 0 else "")
            text += f"{sign}{'' if abs(c) == 1 else f'{abs(c)}*'}{r.index()}"
    return f"{var} = {text}"
