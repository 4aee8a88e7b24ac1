"""Wavefront rewrite of host loop nests (global fusion, P2/P3: the loop-nest part).

A perfect nest of host loops `for l: for t: { launches }` (the LSTM of the paper: cell (l, t)
needs (l, t-1) and (l-1, t)) runs its instances one after another, although the instances on a
wavefront, e.g. the anti-diagonal `w = i + j` (i, j the iteration counts of the two outer
loops), are independent. This pass rewrites such a nest into a sequence of wavefronts
("stages") each launching every instance of the stage, so that a later planner step can fuse
the launches of one stage horizontally (P3) while the stages stay ordered (P2).

For each nest it

1. collects the UAR statements of the body and the dependences among them;
2. asks isl for a schedule of those statements (validity and proximity = the dependences) and
   reads candidate skews `w = a*i + b*j` off its outermost band when that band is permutable
   and its rows are one affine function of (l, t) for every statement: the band's first two
   rows each alone and their sum (`[l, 4l + t]` gives l, 4l + t and 5l + t);
3. checks these and a fixed list of skews (SKEWS: i + j, 2i + j, i + 2j, ...) with isl, never
   trusting the schedule: every dependence must go from a stage to a later one, or stay inside
   one instance (l, t) (then the body order, which the rewrite keeps, orders it). The legal
   skew with the fewest stages is used (isl's band first on a tie); a skew that puts one
   instance in every stage only serializes the nest and is not; when no skew is left the nest
   is left alone, with the reason recorded;
4. emits the stages. Under `w = i + j`: the short stages of the start (prologue) and of the end
   (epilogue) unrolled into launches with constant arguments, the stages of equal size in
   between as a host `Loop` over `w` whose body launches the stage's members with arguments
   affine in `w` ("loops stay loops"); under any other skew every stage unrolled (their sizes
   vary), in stage order. Each instance is emitted exactly once (checked before the nest is
   replaced).

Dependences between the nest and statements outside it need no check: the rewritten nest stays
where the original was and runs every instance, so whatever ran before (after) it still does.
docs/fusion-wavefront.md has the details and an example.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import islpy as isl

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import (
    Arg,
    BufferArg,
    DevRef,
    HostProgram,
    Launch,
    Loop,
    Op,
    Rotating,
    ScalarArg,
)
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.dependences import Dependence
from sirius.analysis.uar.effects import Statement
from sirius.diagnostics import Location
from sirius.fusion.plan.skews import (
    NestRange,
    Refuse,
    band_skews,
    legal_skew,
    nest_schedule,
    permutable,
    relation,
    skew_text,
    skewed,
)

UNROLL_LIMIT = 64  # launches an unrolled loop of independent iterations may become


# records ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Wavefront:
    """What the pass did with one loop nest (a loop whose body is exactly one loop)."""

    loc: Location | None  # the outer loop's
    path: tuple[int, ...]  # index of the outer loop in each enclosing body, outermost first
    vars: tuple[str, ...]  # the two skewed loop variables, outer first
    statements: tuple[str, ...] = ()  # UAR ids of the body's launches
    schedule: str | None = None  # the isl schedule of the body statements, as a map
    permutable: bool | None = None  # whether isl's outermost band is permutable
    skew: str | None = None  # "w = l + t"
    skew_from: str | None = None  # "isl band" (isl's schedule) or "fixed list" (SKEWS)
    stages: tuple[int, ...] = ()  # instances (l, t) per stage, in stage order
    launches: int | None = None  # launches the nest runs (before = after); None when
    # an inner loop's trip count depends on a loop around the nest
    launch_ops: tuple[int, int] = (0, 0)  # Launch ops in the program text, before and after
    var: str | None = None  # the stage loop's variable
    loop: tuple[int, int] | None = None  # stages [first, last] run by the stage loop
    reason: str | None = None  # why the nest was left alone; None when rewritten

    @property
    def rewritten(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict:
        return {"loc": str(self.loc) if self.loc else None, "path": list(self.path),
                "vars": list(self.vars), "statements": list(self.statements),
                "schedule": self.schedule, "permutable": self.permutable, "skew": self.skew,
                "skew_from": self.skew_from, "stages": list(self.stages),
                "launches": self.launches,
                "launch_ops": list(self.launch_ops), "var": self.var,
                "loop": list(self.loop) if self.loop else None, "reason": self.reason}

    def __str__(self) -> str:
        head = f"{self.loc or '?'}: nest ({', '.join(self.vars)})"
        if self.reason is not None:
            return f"{head}: left alone: {self.reason}"
        loop = (f"stages {self.loop[0]}..{self.loop[1]} as a loop over {self.var}"
                if self.loop else "all stages unrolled")
        return (f"{head}: {self.skew} ({self.skew_from}); {self.launches} launches in "
                f"{len(self.stages)} stages of {list(self.stages)}; {loop}; "
                f"schedule {self.schedule}")


@dataclass(frozen=True, slots=True)
class Unrolled:
    """What the pass did with one host loop that holds only launches: unrolled when its
    iterations are independent, so that the planner can fuse the launches of different
    iterations (they run in the same order as before)."""

    loc: Location | None
    var: str
    statements: tuple[str, ...] = ()
    trips: int | None = None
    launches: int | None = None  # launch ops the unrolled loop became
    reason: str | None = None  # why the loop was left alone; None when unrolled
    checked: bool = True  # whether its iterations were proven independent (else: unrolled in
    #                       order for a megakernel, dependences kept by the launch order)

    @property
    def rewritten(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict:
        return {"loc": str(self.loc) if self.loc else None, "var": self.var,
                "statements": list(self.statements), "trips": self.trips,
                "launches": self.launches, "reason": self.reason,
                "independent": self.checked}

    def __str__(self) -> str:
        head = f"{self.loc or '?'}: loop {self.var}"
        if self.reason is not None:
            return f"{head}: left a loop: {self.reason}"
        if not self.checked:
            return (f"{head}: {self.trips} iterations unrolled in their order into "
                    f"{self.launches} launches ({', '.join(self.statements)}), so that they can "
                    "join a megakernel (the launch order keeps every dependence between them)")
        return (f"{head}: {self.trips} independent iterations unrolled into {self.launches} "
                f"launches ({', '.join(self.statements)}), so that they can fuse")


@dataclass(frozen=True, slots=True)
class WavefrontResult:
    host: HostProgram  # the input itself when no nest was rewritten
    nests: tuple[Wavefront, ...]  # every nest considered, in program order
    # each launch the rewrite made -> the original instances it stands for
    origins: dict[Launch, str] = field(default_factory=dict)
    unrolled: tuple[Unrolled, ...] = ()  # every loop of launches considered for unrolling

    @property
    def rewritten(self) -> tuple[Wavefront, ...]:
        return tuple(n for n in self.nests if n.rewritten)

    def provenance(self, launch: Launch) -> str | None:
        """`S6[l = 1, t = w - 1] (lstm_cell.cu:166)` for a launch of the rewritten program that
        the rewrite made, None for any other launch."""
        return self.origins.get(launch)


# the pass --------------------------------------------------------------------------------------
def wavefront_rewrite(host: HostProgram, uar: UAR, *, var: str = "w",
                      min_loop_stages: int = 2, unroll: int = UNROLL_LIMIT,
                      nests: bool = True, sequential: bool = False) -> WavefrontResult:
    """Rewrite every eligible host loop nest of `host` into wavefront stages (see the module
    doc). `uar` must be built on `host` (its statements refer to the ops of `host`). Stages of
    equal size become a loop when there are at least `min_loop_stages` of them. A loop of
    launches whose iterations are independent is unrolled when it runs at most `unroll`
    launches (0: never); `nests=False` leaves every nest alone (unrolling only).
    `sequential` (a megakernel will take the launches): a loop of launches is unrolled even
    when its iterations depend on each other, and a nest's stages all, whenever the loop runs
    at most `unroll` launches, so that its launches join one megakernel; the order of every
    launch is kept, so this is sound whatever the dependences."""
    by_op = {id(st.op): st for st in uar.statements}
    if any(id(op) not in by_op for op in host.launches()):
        raise ValueError("the UAR was built for another host program")
    used = {lp.var for lp in _loops(host.ops)}
    name = next(n for n in (var, *(f"{var}{k}" for k in range(1, 1000))) if n not in used)
    rw = _Rewriter(uar, by_op, name, min_loop_stages, unroll, nests, sequential)
    ops = rw.ops(host.ops, ())
    new = host if ops is host.ops else dataclasses.replace(host, ops=ops)
    return WavefrontResult(new, tuple(rw.records), rw.origins, tuple(rw.unrolls))


class _Rewriter:
    def __init__(self, uar: UAR, by_op: dict[int, Statement], var: str, min_loop_stages: int,
                 unroll: int, nests: bool = True, sequential: bool = False):
        self.uar = uar
        self.sequential = sequential
        self.by_op = by_op
        self.var = var
        self.min_loop_stages = min_loop_stages
        self.unroll_limit = unroll
        self.nests = nests
        self.records: list[Wavefront] = []
        self.unrolls: list[Unrolled] = []
        self.origins: dict[Launch, str] = {}

    def ops(self, ops: tuple[Op, ...], path: tuple[int, ...]) -> tuple[Op, ...]:
        out: list[Op] = []
        changed = False
        for i, op in enumerate(ops):
            if (self.nests and isinstance(op, Loop) and len(op.body) == 1
                    and isinstance(op.body[0], Loop)):
                record, new = self.nest(op, path + (i,))
                self.records.append(record)
                if new is not None:
                    out.extend(new)
                    changed = True
                    continue
            if (isinstance(op, Loop) and self.unroll_limit and op.body
                    and all(isinstance(o, Launch) for o in op.body)):
                record_u, new_ops = self.unroll(op)
                self.unrolls.append(record_u)
                if new_ops is not None:
                    out.extend(new_ops)
                    changed = True
                    continue
            if isinstance(op, Loop):
                body = self.ops(op.body, path + (i,))
                if body is not op.body:
                    op, changed = dataclasses.replace(op, body=body), True
            out.append(op)
        return tuple(out) if changed else ops

    def nest(self, outer: Loop, path: tuple[int, ...]) -> tuple[Wavefront, tuple[Op, ...] | None]:
        inner = outer.body[0]
        assert isinstance(inner, Loop)
        record = Wavefront(outer.loc, path, (outer.var, inner.var))
        try:
            ranges = (_range(outer), _range(inner))
            if min(r.trips for r in ranges) < 2:
                raise Refuse("a loop of the nest runs fewer than 2 times: no two instances "
                              "can share a wavefront")
            _check_body(inner.body)
            stmts = [self.by_op[id(op)] for op in _launches(inner.body)]
            record = dataclasses.replace(record, statements=tuple(st.id for st in stmts))
            depth = next(k for k, lp in enumerate(stmts[0].loops) if lp is outer)
            deps = _restricted(self.uar.dependences, stmts, depth)
            schedule = nest_schedule(stmts, [rel for _, rel in deps])
            record = dataclasses.replace(
                record, schedule=None if schedule is None else str(schedule.get_map()),
                permutable=permutable(schedule))
            skew, origin = legal_skew(deps, depth, ranges, band_skews(schedule, ranges))
        except Refuse as e:
            return dataclasses.replace(record, reason=str(e)), None
        rl, rt = ranges
        count = _count_launches(inner.body, ranges)
        if skew != (1, 1):  # stages of varying size: all unrolled, in stage order
            order = skewed(skew, rl.trips, rt.trips)
            stages = tuple(len(m) for m in order)
            new = tuple(self.place(op, {rl.var: rl.at(i), rt.var: rt.at(j)})
                        for m in order for i, j in m for op in inner.body)
            loop = None
        else:
            stages = tuple(len(_members(w, rl.trips, rt.trips))
                           for w in range(rl.trips + rt.trips - 1))
            whole = self.sequential and count is not None and count <= self.unroll_limit
            new, loop = self.emit(inner.body, ranges, outer.loc, unrolled=whole)
        _check_instances(inner.body, ranges, new, self.var)
        record = dataclasses.replace(
            record, skew=skew_text(self.var, skew, ranges), skew_from=origin, stages=stages,
            launches=count,
            launch_ops=(len(list(_launches(inner.body))), len(list(_launches(new)))),
            var=self.var if loop else None, loop=loop)
        return record, new

    def unroll(self, lp: Loop) -> tuple[Unrolled, tuple[Op, ...] | None]:
        """`lp` (a loop whose body is launches) as its iterations one after another, when no
        dependence links two different iterations (the order of every launch is kept, so this
        is always sound; it is done only where it lets the iterations fuse)."""
        stmts = [self.by_op[id(op)] for op in lp.body]
        record = Unrolled(lp.loc, lp.var, tuple(st.id for st in stmts),
                          checked=not self.sequential)
        try:
            rng = _range(lp)
            record = dataclasses.replace(record, trips=rng.trips)
            if rng.trips < 2:
                raise Refuse("it runs fewer than 2 times")
            for op in lp.body if not self.sequential else ():  # rotating: resolved below
                if any(isinstance(a, BufferArg) and isinstance(a.address, Rotating)
                       for a in op.args):
                    raise Refuse(f"launch {op.kernel} ({op.loc}) takes a rotating "
                                  "(ping-pong) address")
            if rng.trips * len(lp.body) > self.unroll_limit:
                raise Refuse(f"{rng.trips * len(lp.body)} launches, more than the "
                              f"{self.unroll_limit} that are unrolled")
            depth = next(k for k, x in enumerate(stmts[0].loops) if x is lp)
            for d, rel in () if self.sequential else \
                    _restricted(self.uar.dependences, stmts, depth):
                hit = rel.intersect(relation(rel, [f"b{depth} != a{depth}"]))
                if not hit.is_empty():
                    what = f"{d.kind} on {d.buffer}" if d.buffer else d.kind
                    raise Refuse(f"its iterations depend on each other: {d.src} -> {d.dst} "
                                  f"({what}), e.g. {hit.sample()}")
        except Refuse as e:
            return dataclasses.replace(record, reason=str(e)), None
        new = tuple(self.place(op, {lp.var: rng.at(i)})
                    for i in range(rng.trips) for op in lp.body)
        return dataclasses.replace(record, launches=len(new)), new

    def emit(self, body: tuple[Op, ...], ranges: tuple[NestRange, NestRange], loc: Location | None,
             unrolled: bool = False) -> tuple[tuple[Op, ...], tuple[int, int] | None]:
        rl, rt = ranges
        nl, nt = rl.trips, rt.trips
        last = nl + nt - 2
        small, big = min(nl, nt), max(nl, nt)
        steady = (small - 1, big - 1)  # the stages with `small` members

        def stage(w: int) -> list[Op]:
            return [self.place(op, {rl.var: rl.at(i), rt.var: rt.at(w - i)})
                    for i in _members(w, nl, nt) for op in body]

        if unrolled or steady[1] - steady[0] + 1 < self.min_loop_stages:
            return tuple(op for w in range(last + 1) for op in stage(w)), None
        wv = Expr.var(self.var)
        loop_body: list[Op] = []
        for k in range(small):
            # the k-th member of stage w, in increasing i
            i, j = (Expr(k), wv - k) if nl <= nt else (wv - (nt - 1) + k, Expr(nt - 1 - k))
            loop_body += [self.place(op, {rl.var: rl.at(i), rt.var: rt.at(j)}) for op in body]
        loop = Loop(self.var, Expr(steady[0]), Expr(steady[1] + 1), 1, tuple(loop_body), loc)
        ops = [op for w in range(steady[0]) for op in stage(w)]
        ops.append(loop)
        ops += [op for w in range(steady[1] + 1, last + 1) for op in stage(w)]
        return tuple(ops), steady

    def place(self, op: Op, env: dict[str, Expr]) -> Op:
        """`op` of the nest's body with the skewed variables replaced; records the origin of
        every launch it holds."""
        new = _subst(op, env)
        self._origins(op, new, env)
        return new

    def _origins(self, old: Op, new: Op, env: dict[str, Expr]) -> None:
        if isinstance(old, Launch) and isinstance(new, Launch):
            st = self.by_op[id(old)]
            where = ", ".join(f"{v} = {env[v]}" if v in env else v for v in st.vars)
            self.origins[new] = f"{st.id}[{where}] ({old.loc})"
        elif isinstance(old, Loop) and isinstance(new, Loop):
            for a, b in zip(old.body, new.body, strict=True):
                self._origins(a, b, env)


# eligibility -----------------------------------------------------------------------------------
def _range(lp: Loop) -> NestRange:
    if lp.hi is None:
        raise Refuse(f"loop {lp.var} has a trip count unknown to the analysis")
    if not (lp.lo.is_const and lp.hi.is_const):
        raise Refuse(f"the bounds of loop {lp.var} are not constant: [{lp.lo}, {lp.hi})")
    lo, hi = lp.lo.const, lp.hi.const
    return NestRange(lp.var, lo, lp.step, len(range(lo, hi, lp.step)))


def _check_body(ops: tuple[Op, ...]) -> None:
    if not any(True for _ in _launches(ops)):
        raise Refuse("the body launches no kernel")
    for op in ops:
        if isinstance(op, Launch):
            if any(isinstance(a, BufferArg) and isinstance(a.address, Rotating)
                   for a in op.args):
                raise Refuse(f"launch {op.kernel} ({op.loc}) takes a rotating (ping-pong) "
                              "address")
        elif isinstance(op, Loop):
            if op.hi is None:
                raise Refuse(f"inner loop {op.var} ({op.loc}) has an unknown trip count")
            _check_body(op.body)
        else:
            kind = type(op).__name__.lower()
            raise Refuse(f"the body holds a {kind} ({op.loc}); only launches and loops of "
                          "launches are rewritten")


def _restricted(deps: Sequence[Dependence], stmts: list[Statement], depth: int
                ) -> list[tuple[Dependence, isl.Map]]:
    """The dependences among `stmts`, restricted to equal values of the `depth` loops around
    the nest (those carried by an enclosing loop hold whatever the nest does)."""
    ids = {st.id for st in stmts}
    out = []
    for d in deps:
        if d.src in ids and d.dst in ids:
            rel = d.relation.intersect(relation(d.relation,
                                                 [f"b{k} = a{k}" for k in range(depth)]))
            if not rel.is_empty():
                out.append((d, rel))
    return out


# emission --------------------------------------------------------------------------------------
def _members(w: int, nl: int, nt: int) -> range:
    """The iteration counts i of the outer loop in stage w (j = w - i)."""
    return range(max(0, w - (nt - 1)), min(nl - 1, w) + 1)


def _subst(op: Op, env: dict[str, Expr]) -> Op:
    if isinstance(op, Launch):
        return dataclasses.replace(
            op, grid=tuple(e.substitute(env) for e in op.grid),  # type: ignore[arg-type]
            block=tuple(e.substitute(env) for e in op.block),  # type: ignore[arg-type]
            smem=op.smem.substitute(env), args=tuple(_subst_arg(a, env) for a in op.args))
    if isinstance(op, Loop):
        return dataclasses.replace(op, lo=op.lo.substitute(env),
                                   hi=None if op.hi is None else op.hi.substitute(env),
                                   body=tuple(_subst(o, env) for o in op.body))
    raise AssertionError(f"unexpected op in a wavefront body: {op!r}")


def _subst_arg(a: Arg, env: dict[str, Expr]) -> Arg:
    if isinstance(a, BufferArg) and isinstance(a.address, Rotating):
        # a ping-pong address in an unrolled iteration: the buffer of that iteration
        index = a.address.index.substitute(env)
        if not index.is_const:
            raise AssertionError(f"a rotating address left variable: {index}")
        ref = a.address.choices[index.const % len(a.address.choices)]
        return BufferArg(DevRef(ref.buffer, ref.offset.substitute(env)))
    if isinstance(a, BufferArg):
        assert isinstance(a.address, DevRef)
        return BufferArg(DevRef(a.address.buffer, a.address.offset.substitute(env)))
    if isinstance(a, ScalarArg) and isinstance(a.value, Expr):
        return ScalarArg(a.type, a.value.substitute(env))
    return a


def _check_instances(body: tuple[Op, ...], ranges: tuple[NestRange, NestRange],
                     new: tuple[Op, ...], var: str) -> None:
    """Every instance of the original nest appears exactly once in `new` (as the multiset of
    the body ops with the loop variables replaced by their values)."""
    rl, rt = ranges
    want = Counter(_subst(op, {rl.var: rl.at(i), rt.var: rt.at(j)})
                   for i in range(rl.trips) for j in range(rt.trips) for op in body)
    got: Counter[Op] = Counter()
    for op in new:
        if isinstance(op, Loop) and op.var == var:
            assert op.hi is not None
            for w in range(op.lo.const, op.hi.const, op.step):
                got.update(_subst(o, {var: Expr(w)}) for o in op.body)
        else:
            got[op] += 1
    if got != want:
        raise AssertionError(f"wavefront rewrite lost or duplicated instances of the nest at "
                             f"{ranges}: {len(want)} expected, {sum(got.values())} emitted")


# walking ---------------------------------------------------------------------------------------
def _loops(ops: tuple[Op, ...]) -> Iterator[Loop]:
    for op in ops:
        if isinstance(op, Loop):
            yield op
            yield from _loops(op.body)


def _launches(ops: tuple[Op, ...]) -> Iterator[Launch]:
    for op in ops:
        if isinstance(op, Launch):
            yield op
        elif isinstance(op, Loop):
            yield from _launches(op.body)


def _count_launches(body: tuple[Op, ...], ranges: tuple[NestRange, NestRange]) -> int | None:
    """Launches the nest runs; None when an inner loop's trip count depends on a variable of an
    enclosing loop."""
    rl, rt = ranges

    def count(ops: tuple[Op, ...]) -> int | None:
        n = 0
        for op in ops:
            if isinstance(op, Loop):
                if op.hi is None or not (op.lo.is_const and op.hi.is_const):
                    return None
                for v in range(op.lo.const, op.hi.const, op.step):
                    k = count(tuple(_subst(o, {op.var: Expr(v)}) for o in op.body))
                    if k is None:
                        return None
                    n += k
            else:
                n += 1
        return n

    total = 0
    for i in range(rl.trips):
        for j in range(rt.trips):
            k = count(tuple(_subst(op, {rl.var: rl.at(i), rt.var: rt.at(j)}) for op in body))
            if k is None:
                return None
            total += k
    return total
