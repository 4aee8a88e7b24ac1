"""Thread maps of a vertical group's members, and isl proofs that a fused kernel respects every
dependence between them (the legality half of local fusion, DESIGN.md "Fusion and code
generation").

A fused thread is `F[block, thread]` (linear ids; `block` relative to the member's range). A
member's thread map (spec.py) and its guard make the relation

    F_m = { F[block, thread] -> M[bx, by, bz, tx, ty, tz] }

from the fused threads to the member instances they run (`fused_instance_map`). For a dependence
R between members i and j (thread-level instances, restricted to one host iteration), the fused
threads it relates are `C = F_i . R . F_j^-1 = { F[block, thread] -> F[block', thread'] }`:

- every pair in C with `block' = block, thread' = thread`: program order inside the fused thread
  orders the two instances (THREAD);
- every pair with `block' = block`: a block barrier before some member k, i < k <= j (BLOCK);
- anything else cannot be ordered inside one kernel.

`reindex_map` is the paper's "reshape the iteration domain for map operations": a consumer whose
instances depend one-to-one on a producer's is evaluated in the producer's threads (its ids are
the producer's ids pushed through the dependence's thread map), so the dependence becomes
THREAD. Every answer is proved, not assumed: a question isl cannot settle within its operation
budget, an isl error or an unexpected shape makes the answer "not legal" (or "no map").
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import prod

import islpy as isl
import numpy as np

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.analysis.uar.dependences import Dependence
from sirius.fusion.geometry import delinearize, member_id_sets, member_ids
from sirius.fusion.plan.islexpr import simplify_expr, single_function
from sirius.fusion.spec import IDS, Dim3, Member, ThreadMap

BUDGET = 2_000_000  # isl operations for one question (a few seconds at most)
COMPOSED_BUDGET = 100_000  # for the composed function of a re-indexing (_candidate_ids)
ENUMERATE = 1 << 24  # coverage by evaluating every fused thread up to this many
_CHUNK = 1 << 20  # fused threads evaluated at once
T = isl.dim_type
_IDS_PRIMED = tuple(f"{n}'" for n in IDS)


class AlignmentError(Exception):
    """A question this module cannot answer exactly (the caller turns it into "not legal")."""


# the fused threads that run a member ------------------------------------------------------------
def _raw_ids(fused_block: Dim3, fused_grid: Dim3, first_block: int) -> dict[str, Expr]:
    """The fused kernel's raw ids as Exprs of the linear `block` (relative to the member's
    range, which starts at `first_block`) and `thread`."""
    tx, ty, tz = delinearize(Expr.var("thread"), fused_block)
    bx, by, bz = delinearize(Expr.var("block") + first_block, fused_grid)
    return {"tx": tx, "ty": ty, "tz": tz, "bx": bx, "by": by, "bz": bz}


def member_exprs(member: Member, fused_block: Dim3, range_blocks: int,
                 fused_grid: Dim3 | None = None, first_block: int = 0) -> tuple[Expr, ...]:
    """The member's six ids as Exprs of `block` and `thread` only (raw fused ids expanded;
    the fused grid defaults to `(range_blocks, 1, 1)`, a vertical kernel's)."""
    grid = fused_grid or (range_blocks, 1, 1)
    raw = _raw_ids(fused_block, grid, first_block)
    return tuple(e.substitute(raw) for e in member_ids(member, prod(fused_block)))


def member_expr_sets(member: Member, fused_block: Dim3, range_blocks: int,
                     fused_grid: Dim3 | None = None, first_block: int = 0
                     ) -> tuple[tuple[Expr, ...], ...]:
    """`member_exprs` for each instance a fused thread runs (several for a multi-instance
    map, in order)."""
    grid = fused_grid or (range_blocks, 1, 1)
    raw = _raw_ids(fused_block, grid, first_block)
    return tuple(tuple(e.substitute(raw) for e in ids)
                 for ids in member_id_sets(member, prod(fused_block)))


def fused_instance_map(member: Member, fused_block: Dim3, range_blocks: int,
                       fused_grid: Dim3 | None = None, first_block: int = 0) -> isl.Map:
    """{ F[block, thread] -> M[bx, by, bz, tx, ty, tz] }: the member instance(s) each fused
    thread of its block range runs (the codegen's ids and guard: ids inside the member's
    launch; a multi-instance map relates a thread to each of its instances)."""
    dims = member.grid + member.block
    out = None
    for ids in member_expr_sets(member, fused_block, range_blocks, fused_grid, first_block):
        cons = [f"0 <= block < {range_blocks}", f"0 <= thread < {prod(fused_block)}"]
        cons += [f"{n} = {e}" for n, e in zip(IDS, ids, strict=True)]
        cons += [f"0 <= {n} < {d}" for n, d in zip(IDS, dims, strict=True)]
        m = isl.Map(f"{{ F[block, thread] -> M[{', '.join(IDS)}] : {' and '.join(cons)} }}")
        out = m if out is None else out.union(m)
    assert out is not None
    return out.coalesce()


def _rep_instance_map(member: Member, fused_block: Dim3, range_blocks: int,
                      fused_grid: Dim3 | None, first_block: int) -> isl.Map:
    """{ F[block, thread, rep] -> M[..] }: `fused_instance_map` with the instance's position
    in the thread (0 for single-instance maps)."""
    dims = member.grid + member.block
    out = None
    for k, ids in enumerate(member_expr_sets(member, fused_block, range_blocks, fused_grid,
                                             first_block)):
        cons = [f"0 <= block < {range_blocks}", f"0 <= thread < {prod(fused_block)}",
                f"rep = {k}"]
        cons += [f"{n} = {e}" for n, e in zip(IDS, ids, strict=True)]
        cons += [f"0 <= {n} < {d}" for n, d in zip(IDS, dims, strict=True)]
        m = isl.Map(f"{{ F[block, thread, rep] -> M[{', '.join(IDS)}] : "
                    f"{' and '.join(cons)} }}")
        out = m if out is None else out.union(m)
    assert out is not None
    return out


def covers_exactly_once(member: Member, fused_block: Dim3, range_blocks: int,
                        fused_grid: Dim3 | None = None, first_block: int = 0) -> str | None:
    """None when the fused threads run every instance of the member's launch exactly once,
    else why not (with a witness instance). Up to `ENUMERATE` fused threads the ids are
    evaluated for every thread (exact and fast); beyond, isl decides within its budget."""
    return _covers(_shape_only(member), tuple(fused_block), range_blocks,
                   None if fused_grid is None else tuple(fused_grid), first_block)


def _shape_only(member: Member) -> Member:
    """The member without what does not change which thread runs what (cache keys)."""
    return dataclasses.replace(member, smem=0, param_map=None, barrier_before=False)


@functools.lru_cache(maxsize=1024)
def _covers(member: Member, fused_block: Dim3, range_blocks: int, fused_grid: Dim3 | None,
            first_block: int) -> str | None:
    try:
        sets = member_expr_sets(member, fused_block, range_blocks, fused_grid, first_block)
    except (ValueError, KeyError) as e:
        return f"{_who(member)}: its thread map cannot be evaluated ({e})"
    if range_blocks * prod(fused_block) * len(sets) <= ENUMERATE:
        return _count_coverage(member, sets, fused_block, range_blocks)
    try:
        f = _rep_instance_map(member, fused_block, range_blocks, fused_grid, first_block)
    except isl.Error as e:
        return f"{_who(member)}: its thread map has no isl form ({e})"
    box = isl.Set(f"{{ M[{', '.join(IDS)}] : "
                  + " and ".join(f"0 <= {n} < {d}" for n, d in
                                 zip(IDS, member.grid + member.block, strict=True)) + " }")

    def question() -> str | None:
        missing = box.subtract(f.range())
        if not missing.is_empty():
            return f"{_who(member)}: instance {_point(missing)} is run by no fused thread"
        both = f.apply_range(f.reverse())
        same = isl.Map("{ F[b, t, r] -> F[b2, t2, r2] : b2 = b and t2 = t and r2 = r }")
        twice = both.subtract(same.align_params(both.get_space()))
        if not twice.is_empty():
            pair = twice.intersect_domain(twice.domain().lexmin())
            who = "two fused threads" if pair.subtract(isl.Map(
                "{ F[b, t, r] -> F[b, t, r2] }").align_params(pair.get_space())).is_empty() \
                is False else "one fused thread twice"
            return (f"{_who(member)}: instance {_point(pair.domain().apply(f))} is run by "
                    f"{who}, {_pair(pair)}")
        return None

    return islutil.bounded(BUDGET, question,
                           f"{_who(member)}: isl could not decide its coverage within budget")


def _count_coverage(member: Member, sets: tuple[tuple[Expr, ...], ...], fused_block: Dim3,
                    range_blocks: int) -> str | None:
    threads = prod(fused_block)
    dims = member.grid + member.block
    order = (2, 1, 0, 5, 4, 3)  # linear instance id: bz slowest, tx fastest

    def chunks():
        """(block, thread, runs, linear instance id) for consecutive fused threads, for each
        instance a thread runs."""
        total = range_blocks * threads
        for lo in range(0, total, _CHUNK):
            block, thread = np.divmod(np.arange(lo, min(total, lo + _CHUNK), dtype=np.int64),
                                      threads)
            env = {"block": block, "thread": thread}
            for ids in sets:
                vals = [np.broadcast_to(np.asarray(e.evaluate(env), dtype=np.int64),
                                        block.shape) for e in ids]  # type: ignore[arg-type]
                runs = np.ones(block.shape, dtype=bool)
                for v, d in zip(vals, dims, strict=True):
                    runs &= (v >= 0) & (v < d)
                lin = np.zeros(block.shape, dtype=np.int64)
                for k in order:
                    lin = lin * dims[k] + vals[k]
                yield block, thread, runs, lin

    counts = np.zeros(prod(dims), dtype=np.int64)
    for _, _, runs, lin in chunks():
        counts += np.bincount(lin[runs], minlength=len(counts))

    def instance(x: int) -> str:
        coords = {}
        for k in reversed(order):
            x, coords[k] = divmod(x, dims[k])
        return "(" + ", ".join(f"{n}={coords[k]}" for k, n in enumerate(IDS)) + ")"

    missing = np.flatnonzero(counts == 0)
    if len(missing):
        return (f"{_who(member)}: instance {instance(int(missing[0]))} is run by no fused thread"
                f" ({len(missing)} instances missed)")
    twice = np.flatnonzero(counts > 1)
    if not len(twice):
        return None
    at: list[str] = []
    for block, thread, runs, lin in chunks():
        at += [f"(block {int(block[w])}, thread {int(thread[w])})"
               for w in np.flatnonzero(runs & (lin == twice[0]))]
        if len(at) >= 2:
            break
    return (f"{_who(member)}: instance {instance(int(twice[0]))} is run by "
            f"{int(counts[twice[0]])} fused threads, e.g. {', '.join(at[:2])}")


# a dependence, in one host iteration, between thread instances ----------------------------------
def instance_pairs(dep: Dependence, same_iteration_vars: Sequence[str] = ()) -> isl.Map:
    """{ M[bx..tz] -> M[bx'..tz'] }: the dependence's thread-level pairs within one iteration of
    the host loops named in `same_iteration_vars` (default: every loop both statements share:
    host var `v` of the source equated with `v'` of the target); other host vars are
    quantified away (any iteration: an over-approximation)."""
    rel = _thread_relation(dep)
    if rel is None:
        raise AlignmentError(f"no thread-level relation ({dep.width} width)")
    ins, outs = islutil.in_names(rel), islutil.out_names(rel)
    if len(ins) < 6 or len(outs) < 6:
        raise AlignmentError(f"unexpected instance space {rel.get_space()}")
    hs, hd = ins[:-6], outs[:-6]
    wanted = list(same_iteration_vars) or [v for v in hs if f"{v}'" in hd]
    for v in wanted:
        if v not in hs or f"{v}'" not in hd:
            raise AlignmentError(f"host variable {v} is not a loop of both statements")
    s_names = [f"s_{i}" for i in range(len(ins))]
    d_names = [f"d_{i}" for i in range(len(outs))]
    rel = islutil.name_dims(islutil.name_dims(rel, "in", s_names), "out", d_names)
    rel = islutil.set_tuple(rel, "A", "B")
    eqs = [f"d_{hd.index(v + chr(39))} = s_{hs.index(v)}" for v in wanted]
    params = islutil.param_names(rel)
    head = f"[{', '.join(params)}] -> " if params else ""
    eq = isl.Map(f"{head}{{ A[{', '.join(s_names)}] -> B[{', '.join(d_names)}] : "
                 f"{' and '.join(eqs) or 'true'} }}")
    rel = rel.intersect(eq)
    rel = islutil.project_out(rel, s_names[:len(hs)] + d_names[:len(hd)])
    rel = islutil.name_dims(islutil.name_dims(rel, "in", list(IDS)), "out", list(_IDS_PRIMED))
    return islutil.set_tuple(rel, "M", "M")


# the proof for a vertical group ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DepVerdict:
    """What one dependence needs in the fused kernel: `none` (no pair within one iteration),
    `thread` (same fused thread), `block` (same fused block: a barrier between), `illegal`."""

    src: int
    dst: int
    kind: str
    buffer: str | None
    level: str
    why: str | None = None


@dataclass(frozen=True, slots=True)
class GroupCheck:
    ok: bool
    needs_barrier_before: frozenset[int] = frozenset()  # barriers that would make it ok
    reason: str | None = None
    verdicts: tuple[DepVerdict, ...] = ()


def check_group(members: Sequence[Member], fused_block: Dim3, ranges: Sequence[int],
                deps: Sequence[tuple[int, int, Dependence]],
                same_iteration_vars: Sequence[str] = (),
                fused_grid: Dim3 | None = None) -> GroupCheck:
    """Whether the vertical fused kernel (members in order in every fused thread, `ranges[m]`
    blocks for member m) runs every member instance once and orders every dependence
    `(i, j, dep)` (dep from member i's statement to member j's)."""
    if len(ranges) != len(members):
        return GroupCheck(False, reason=f"{len(members)} members but {len(ranges)} ranges")
    problems: list[str] = []
    for m, (member, rng) in enumerate(zip(members, ranges, strict=True)):
        why = covers_exactly_once(member, fused_block, rng, fused_grid)
        if why is not None:
            problems.append(f"member {m} ({why})")
    maps: dict[int, isl.Map] = {}
    verdicts: list[DepVerdict] = []
    for i, j, dep in deps:
        shape = (i, j, tuple(fused_block), fused_grid and tuple(fused_grid),
                 tuple(same_iteration_vars),
                 *((_shape_only(members[m]), ranges[m]) if 0 <= m < len(members) else (m,)
                   for m in (i, j)))
        pairs = _pairs_text(dep, same_iteration_vars) if 0 <= i < len(members) and \
            0 <= j < len(members) else None
        if pairs is not None:  # the question by its structure: layers share the answer
            v = _shared_verdict((pairs, *shape), members, fused_block, ranges, i, j, dep,
                                same_iteration_vars, fused_grid, maps)
        else:
            key = (id(dep), *shape)
            hit = _VERDICTS.get(key)
            if hit is not None and hit[0] is dep:
                v = hit[1]
            else:
                v = _verdict(members, fused_block, ranges, i, j, dep, same_iteration_vars,
                             fused_grid, maps)
                if len(_VERDICTS) > 4096:
                    _VERDICTS.clear()
                _VERDICTS[key] = (dep, v)
        verdicts.append(v)
        if v.level == "illegal":
            problems.append(v.why or "illegal")
    # BLOCK dependences: a barrier before some member k, i < k <= j; place the fewest (greedy
    # interval stabbing at the right ends).
    open_ = sorted(((v.src, v.dst) for v in verdicts if v.level == "block"
                    and not any(members[k].barrier_before for k in range(v.src + 1, v.dst + 1))),
                   key=lambda p: p[1])
    needed: set[int] = set()
    for i, j in open_:
        if not any(i < k <= j for k in needed):
            needed.add(j)
    if problems:
        return GroupCheck(False, frozenset(), "; ".join(problems), tuple(verdicts))
    if needed:
        who = ", ".join(f"member {k} ({_short(members[k].kernel)})" for k in sorted(needed))
        blocked = "; ".join(f"{v.why}" for v in verdicts if v.level == "block"
                            and (v.src, v.dst) in set(open_))
        return GroupCheck(False, frozenset(needed), f"needs a block barrier before {who}: "
                          f"{blocked}", tuple(verdicts))
    return GroupCheck(True, frozenset(), None, tuple(verdicts))


# (id(dep), i, j, shape, vars, (member, range) of i and j) -> (dep, its verdict); the dep is kept
# so that its id is not reused while the entry lives
_VERDICTS: dict[tuple, tuple[Dependence, DepVerdict]] = {}
# (thread-level pairs as text, i, j, shape, vars, (member, range) of i and j) -> (level, the
# reason after the dependence's name): the question `_verdict` asks depends on nothing else, and
# the layers of a model ask it once per layer with other statement and buffer names
_SHARED: dict[tuple, tuple[str, str | None]] = {}
# (id(dep), vars) -> (dep, the text of its `instance_pairs`, or None when it has none)
_PAIRS: dict[tuple, tuple[Dependence, str | None]] = {}


def _pairs_text(dep: Dependence, same_vars: Sequence[str]) -> str | None:
    """`instance_pairs` of a dependence as text (statement names are not in it), or None when
    it has no thread-level relation or isl cannot give one within budget."""
    key = (id(dep), tuple(same_vars))
    hit = _PAIRS.get(key)
    if hit is not None and hit[0] is dep:
        return hit[1]

    def text() -> str | None:
        try:
            return str(instance_pairs(dep, same_vars))
        except (AlignmentError, ValueError, KeyError):
            return None

    got = islutil.bounded(BUDGET, text, None) if _thread_relation(dep) is not None else None
    if len(_PAIRS) > 4096:
        _PAIRS.clear()
    _PAIRS[key] = (dep, got)
    return got


def _dep_name(members: Sequence[Member], i: int, j: int, dep: Dependence) -> str:
    return f"{dep.kind} on {dep.buffer} ({dep.src} -> {dep.dst}), member {i} " \
        f"({_short(members[i].kernel)}) -> member {j} ({_short(members[j].kernel)})"


def _shared_verdict(key: tuple, members: Sequence[Member], fused_block: Dim3,
                    ranges: Sequence[int], i: int, j: int, dep: Dependence,
                    same_vars: Sequence[str], fused_grid: Dim3 | None,
                    maps: dict[int, isl.Map]) -> DepVerdict:
    """`_verdict` through the structural cache, its reason given this dependence's names."""
    prefix = _dep_name(members, i, j, dep) + ": "
    hit = _SHARED.get(key)
    if hit is not None:
        level, rest = hit
        return DepVerdict(i, j, dep.kind, dep.buffer, level,
                          None if rest is None else prefix + rest)
    v = _verdict(members, fused_block, ranges, i, j, dep, same_vars, fused_grid, maps)
    if v.why is None or v.why.startswith(prefix):
        if len(_SHARED) > 4096:
            _SHARED.clear()
        _SHARED[key] = (v.level, None if v.why is None else v.why[len(prefix):])
    return v


def _verdict(members: Sequence[Member], fused_block: Dim3, ranges: Sequence[int], i: int,
             j: int, dep: Dependence, same_vars: Sequence[str], fused_grid: Dim3 | None,
             maps: dict[int, isl.Map]) -> DepVerdict:
    n = len(members)
    what = f"{dep.kind} on {dep.buffer} ({dep.src} -> {dep.dst})"
    if not (0 <= i < n and 0 <= j < n):
        return DepVerdict(i, j, dep.kind, dep.buffer, "illegal",
                          f"{what}: member index out of range")
    name = _dep_name(members, i, j, dep)

    def verdict(level: str, why: str | None = None) -> DepVerdict:
        return DepVerdict(i, j, dep.kind, dep.buffer, level, why)

    def host_question() -> DepVerdict:
        if _host_pairs(dep, same_vars).is_empty():
            return verdict("none")
        return verdict("illegal", f"{name}: {dep.width} dependence, no thread-level relation "
                       "(a kernel boundary must separate them)")

    def question() -> DepVerdict:
        r = instance_pairs(dep, same_vars)
        for m in (i, j):
            if m not in maps:
                maps[m] = fused_instance_map(members[m], fused_block, ranges[m], fused_grid)
        c = maps[i].apply_range(r).apply_range(maps[j].reverse())
        if c.is_empty():
            return verdict("none")
        if i >= j:
            return verdict("illegal", f"{name}: the source runs after the target in the fused "
                           f"kernel (fused thread pair {_pair(c)})")
        same_thread = _pairs_like(c, "b2 = b and t2 = t")
        if c.is_subset(same_thread):
            return verdict("thread")
        same_block = _pairs_like(c, "b2 = b")
        if c.is_subset(same_block):
            bad = c.subtract(same_thread)
            return verdict("block", f"{name}: fused threads {_pair(bad)} of one block")
        bad = c.subtract(same_block)
        return verdict("illegal", f"{name}: crosses fused blocks, e.g. {_pair(bad)}")

    try:
        return islutil.bounded(BUDGET, question if _thread_relation(dep) is not None
                               else host_question,
                               verdict("illegal", f"{name}: isl could not decide within budget"))
    except (AlignmentError, ValueError, KeyError) as e:
        return verdict("illegal", f"{name}: {e}")


def _thread_relation(dep: Dependence) -> isl.Map | None:
    """The thread-level relation (a THREAD dependence's mapping is one too; a BLOCK one's
    relates blocks only)."""
    if dep.instances is not None:
        return dep.instances
    return dep.mapping if dep.width == "THREAD" else None


def _host_pairs(dep: Dependence, same_vars: Sequence[str]) -> isl.Map:
    """The host-level relation within one iteration of the shared loops."""
    rel = dep.relation
    hs, hd = islutil.in_names(rel), islutil.out_names(rel)
    wanted = list(same_vars) or [v for v in hs if f"{v}'" in hd]
    for v in wanted:
        if v not in hs or f"{v}'" not in hd:
            raise AlignmentError(f"host variable {v} is not a loop of both statements")
    s_names = [f"s_{k}" for k in range(len(hs))]
    d_names = [f"d_{k}" for k in range(len(hd))]
    rel = islutil.set_tuple(islutil.name_dims(islutil.name_dims(rel, "in", s_names), "out",
                                              d_names), "A", "B")
    params = islutil.param_names(rel)
    head = f"[{', '.join(params)}] -> " if params else ""
    eqs = [f"d_{hd.index(v + chr(39))} = s_{hs.index(v)}" for v in wanted]
    eq = isl.Map(f"{head}{{ A[{', '.join(s_names)}] -> B[{', '.join(d_names)}] : "
                 f"{' and '.join(eqs) or 'true'} }}")
    return rel.intersect(eq)


def _pairs_like(c: isl.Map, constraint: str) -> isl.Map:
    m = isl.Map(f"{{ F[b, t] -> F[b2, t2] : {constraint} }}")
    return m.align_params(c.get_space())


# map re-indexing ----------------------------------------------------------------------------------
def reindex_map(producer: Member, consumer_launch_shape: tuple[Dim3, Dim3], dep: Dependence,
                fused_block: Dim3, range_blocks: int | None = None,
                same_iteration_vars: Sequence[str] = ()) -> ThreadMap | None:
    """A custom thread map running the consumer of `dep` (from `producer`'s statement) in the
    producer's fused threads: each fused thread runs the consumer instance that depends on the
    producer instance it runs. None when the dependence is not a one-to-one thread map (within
    one host iteration), the ids are not quasi-affine, or the map would not run every consumer
    instance exactly once. `range_blocks` defaults to the producer's fused block count."""
    got = reindex_member(producer, consumer_launch_shape, dep, fused_block, range_blocks,
                         same_iteration_vars)
    return None if got is None else got.mapping


def reindex_member(producer: Member, consumer_launch_shape: tuple[Dim3, Dim3],
                   dep: Dependence, fused_block: Dim3, range_blocks: int | None = None,
                   same_iteration_vars: Sequence[str] = (), consumer: Member | None = None
                   ) -> Member | None:
    """`reindex_map` as a Member (kernel name, params etc. from `consumer` when given) with its
    `blocks` set to the producer's block count."""
    rng = range_blocks if range_blocks is not None else \
        producer.blocks_needed(prod(fused_block))
    if rng is None:
        return None
    grid, block = consumer_launch_shape
    base = consumer or Member("consumer", grid, block)
    if (base.grid, base.block) != (grid, block):
        return None

    def candidates() -> tuple[isl.Map, list[tuple[Expr, ...]]] | None:
        pairs = instance_pairs(dep, same_iteration_vars)
        if not pairs.is_single_valued():
            return None
        composed = fused_instance_map(producer, fused_block, rng).apply_range(pairs)
        return composed, _candidate_ids(producer, fused_block, pairs, composed)

    try:
        got = islutil.bounded(BUDGET, candidates, None)
        if got is None:
            return None
        composed, options = got
        # Candidates are produced lazily, most readable first; the first that passes wins (the
        # second asks isl for the composed function, which can take tens of seconds).
        while True:
            ids = islutil.bounded(BUDGET, lambda: next(options, None), None)
            if ids is None:
                break
            m = dataclasses.replace(base, mapping=ThreadMap.custom(*ids), blocks=rng)
            if covers_exactly_once(m, fused_block, rng) is not None:
                continue
            # every producer instance's partner is run by the thread that ran the producer
            fm = fused_instance_map(m, fused_block, rng)
            if islutil.bounded(BUDGET, lambda fm=fm: composed.is_subset(fm), False):
                return m
    except (AlignmentError, ValueError, KeyError, isl.Error):
        return None
    return None


def _candidate_ids(producer: Member, fused_block: Dim3, pairs: isl.Map,
                   composed: isl.Map) -> Iterator[tuple[Expr, ...]]:
    """Consumer ids as Exprs: the dependence's function of the producer ids composed with the
    producer's map (readable, keeps its variables), or, when the dependence gives none, the
    composed function of (block, thread) isl finds."""
    placeholders = [f"_p{k}" for k in range(6)]
    f = single_function(pairs, placeholders)
    if f is not None:
        env = {p: e for p, e in zip(placeholders, member_ids(producer, prod(fused_block)),
                                    strict=True)}
        yield tuple(simplify_expr(e.substitute(env)) for e in f)
        # isl's PwMultiAff.from_map on the composed map does not heed the operation budget and
        # took 20-50 s on random programs (mod-71 divisions): asked only when the dependence
        # itself gives no function
        return
    # under a budget of its own, far below BUDGET: on a random program's composed map of four
    # divisions it ran 40-60 s before BUDGET stopped it (fuzz seed 99973)
    g = islutil.bounded(COMPOSED_BUDGET, lambda: single_function(composed, ["block", "thread"]),
                        None)
    if g is not None:
        yield tuple(simplify_expr(e) for e in g)


# witnesses and names -----------------------------------------------------------------------------
def _coords(s: isl.Set) -> list[int]:
    p = s.sample_point()
    return [p.get_coordinate_val(T.set, k).to_python() for k in range(s.dim(T.set))]


def _point(s: isl.Set) -> str:
    s = islutil.project_out(s, islutil.param_names(s))
    vals = _coords(s)
    return "(" + ", ".join(f"{n}={v}" for n, v in zip(IDS, vals, strict=False)) + ")"


def _pair(c: isl.Map) -> str:
    flat = islutil.flat(islutil.project_out(c, islutil.param_names(c)))
    v = _coords(flat)
    if len(v) == 6:  # with each instance's position in its thread
        return (f"(block {v[0]}, thread {v[1]}, instance {v[2]}) and "
                f"(block {v[3]}, thread {v[4]}, instance {v[5]})")
    b, t, b2, t2 = v
    return f"(block {b}, thread {t}) -> (block {b2}, thread {t2})"


def _short(kernel: str) -> str:
    """A mangled kernel name's identifier (`_Z8bias_addPfPKfii` -> `bias_add`)."""
    if kernel.startswith("_Z"):
        k = 2
        while k < len(kernel) and kernel[k].isdigit():
            k += 1
        if k > 2:
            n = int(kernel[2:k])
            return kernel[k:k + n]
    return kernel


def _who(member: Member) -> str:
    return _short(member.kernel)
