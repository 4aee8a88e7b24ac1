"""Permutation re-indexing (issue 15 item 1, docs/fusion-alignment.md): a consumer whose read
index permutes the digits of its linear thread id (a transpose, reshape + permute) runs in its
producer's threads, each fused thread running every consumer instance that reads what it wrote.
isl proves the reads injective, the inverse single-valued and the coverage total; the assignment
is then checked for every fused thread. Refusals are AlignmentErrors that name the reason."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import islpy as isl
import numpy as np

from sirius.analysis import islutil
from sirius.analysis.expr import Expr
from sirius.fusion.geometry import delinearize, member_ids
from sirius.fusion.plan.alignment import (
    BUDGET,
    ENUMERATE,
    AlignmentError,
    _point,
    _shape_only,
    _short,
    covers_exactly_once,
    member_expr_sets,
    member_exprs,
)
from sirius.fusion.plan.islexpr import simplify_expr, single_function
from sirius.fusion.spec import IDS, Dim3, Member, ThreadMap

T = isl.dim_type

MAX_INSTANCES = 64  # consumer instances one fused thread may run (the calls are unrolled)


@dataclass(frozen=True, slots=True)
class Permutation:
    """`permutation_member`'s answer: the member, or why there is none."""

    member: Member | None
    reason: str | None = None
    instances: int = 0  # consumer instances per fused thread


def _ids_relation(rel: isl.Map, host_vars: Sequence[str]) -> isl.Map:
    """An effect `{ S[h.., bx..tz] -> b[x] }` as `{ M[bx..tz] -> X[x] }`, the host loop variables
    made parameters (by name: two statements of one host body share them, so the relation is
    the one of a single host iteration)."""
    k = rel.dim(T.in_) - 6
    if k < 0 or k != len(host_vars):
        raise AlignmentError(f"unexpected effect space {rel.get_space()}")
    rel = islutil.name_dims(rel, "in", [*host_vars, *IDS])
    rel = islutil.name_dims(rel, "out", ["x"])
    if k:
        n = rel.dim(T.param)
        rel = rel.move_dims(T.param, n, T.in_, 0, k)
        for j, v in enumerate(host_vars):
            rel = rel.set_dim_name(T.param, n + j, v)
    return islutil.set_tuple(rel, "M", "X")


def permutation_member(producer: Member, writes: isl.Map, reads: isl.Map,
                       host_vars: Sequence[str], fused_block: Dim3, range_blocks: int,
                       consumer: Member) -> Permutation:
    """Permutation re-indexing: the consumer run in the producer's fused threads, each thread
    running every consumer instance that reads an element its producer instance wrote.

    `writes`/`reads`: the producer's write effect and the consumer's read effect on the
    buffer between them (`{ S[h.., bx..tz] -> b[x] }`, bytes), `host_vars` the loop variables
    of the host body both launches sit in. With isl it proves, before building anything:

    - the consumer's read of the producer's elements is injective (no two consumer instances
      read a common byte: a permutation, not `x[i/2]`);
    - each consumer instance reads bytes of one producer instance only (single-valued inverse),
      and every consumer instance reads some (a bijection onto the consumer's domain);
    - every producer instance writes bytes the consumer reads, with the same pattern of offsets
      from its first byte (`D`, the same finite set for every producer instance, at most
      `MAX_INSTANCES` elements).

    The k-th instance a fused thread runs is `key^-1(base(p) + D[k])`: `base(p)` the first byte
    producer instance `p` writes, `key(c)` the first producer-written byte consumer `c` reads,
    both single quasi-affine pieces (div/mod by constants; anything else is refused). The
    member is kept only when it runs every consumer instance exactly once and runs each one in
    the thread of the producer instance it depends on; the group check proves the rest."""
    who = _short(consumer.kernel)

    def no(why: str) -> Permutation:
        return Permutation(None, f"permutation re-indexing of {who}: {why}")

    try:
        w = _ids_relation(writes, host_vars)
        r = _ids_relation(reads, host_vars)
    except AlignmentError as e:
        return no(f"{e}")
    # the question by its structure: the layers of a model ask it once (statement and buffer
    # names are gone from the relations; the members' shapes are in the key)
    key = (str(w), str(r), tuple(host_vars), tuple(fused_block), range_blocks,
           _shape_only(producer), _shape_only(consumer))
    hit = _ANSWERS.get(key)
    if hit is not None:
        if hit.member is None:
            return hit
        return Permutation(dataclasses.replace(consumer, mapping=hit.member.mapping,
                                               blocks=hit.member.blocks), None, hit.instances)

    def question() -> Permutation:
        nonlocal w, r
        w, r = w.align_params(r.get_space()), r.align_params(w.get_space())
        box = isl.Set("{ M[" + ", ".join(IDS) + "] : " + " and ".join(
            f"0 <= {n} < {d}" for n, d in zip(IDS, consumer.grid + consumer.block,
                                              strict=True)) + " }").align_params(r.get_space())
        rw = r.intersect_range(w.range()).intersect_domain(box)
        if rw.is_empty():
            return no("it reads nothing the producer writes")
        same = rw.apply_range(rw.reverse())
        ident = isl.Map("{ M[" + ", ".join(IDS) + "] -> M[" + ", ".join(IDS) + "] }")
        if not same.is_subset(ident.align_params(same.get_space())):
            return no("its read index is not injective (two instances read one element, "
                      f"e.g. {_point(_shared_reader(same))}), so it is not a permutation")
        pairs = w.apply_range(r.reverse()).intersect_range(box)  # producer -> consumer
        if not pairs.reverse().is_single_valued():
            return no("an instance reads elements written by two producer threads")
        if islutil.has_unknown_divs(pairs.range()):  # isl may not stop on its budget there
            return no("isl cannot decide cheaply whether every instance reads what the "
                      "producer writes (the elements read are a projection with unknown "
                      "divisions)")
        missed = box.subtract(pairs.range())
        if not missed.is_empty():
            return no(f"instance {_point(missed)} reads nothing the producer writes (not a "
                      "bijection onto its domain)")
        unread = w.domain().subtract(pairs.domain())
        if not unread.is_empty():
            return no(f"producer instance {_point(unread)} writes nothing it reads")
        rb = r.intersect_domain(box)
        # consumer -> its first producer-written byte (injective); the whole read when it
        # only reads producer-written bytes (a simpler relation for isl)
        key = (rb if rb.is_subset(rw) else rw).coalesce().lexmin()
        base = w.lexmin()  # producer -> its first written byte
        offsets = pairs.apply_range(key).sum(base.neg())  # producer -> key - base
        d = offsets.range()
        if not isl.Map.from_domain_and_range(offsets.domain(), d).is_subset(offsets):
            return no("the producer threads' elements do not follow one pattern of offsets")
        params = islutil.param_names(d)
        d_np = islutil.project_out(d, params)
        if params and not d.is_equal(d_np.align_params(d.get_space()).intersect_params(
                d.params())):
            return no("the offsets depend on host variables")
        if not d_np.is_bounded():
            return no("unbounded offsets")
        points: list[int] = []
        d_np.foreach_point(lambda pt: points.append(
            pt.get_coordinate_val(T.set, 0).to_python()))
        if len(points) > MAX_INSTANCES:
            return no(f"a producer thread's elements are read by {len(points)} instances "
                      f"(at most {MAX_INSTANCES})")
        fwd = single_function(key, list(IDS))
        if fwd is None:
            return no("its read index is not one quasi-affine piece (div/mod by constants)")
        inv = _digit_inverse(fwd[0], consumer)
        if inv is None:
            return no("its read index is not a permutation of the digits of its linear "
                      "thread id (a transpose or reshape + permute of a dense tensor); other "
                      "bijections are not inverted")
        placeholders = [f"_p{k}" for k in range(6)]
        b = single_function(base, placeholders)
        if b is None:
            return no("the producer's first written element is not one quasi-affine piece")
        env = dict(zip(placeholders, member_ids(producer, prod(fused_block)), strict=True))
        at = b[0].substitute(env)
        rows = [tuple(simplify_expr(e.substitute({"x": at + off})) for e in inv)
                for off in sorted(points)]
        m = dataclasses.replace(consumer, mapping=ThreadMap.multi(rows), blocks=range_blocks)
        why = covers_exactly_once(m, fused_block, range_blocks)
        if why is not None:
            return no(why)
        why = _with_producer(producer, m, fwd[0], b[0], set(points), fused_block,
                             range_blocks)
        if why is not None:
            return no(why)
        return Permutation(m, None, len(rows))

    try:
        got = islutil.bounded(BUDGET, question, no("isl could not decide within budget"))
    except (AlignmentError, ValueError, KeyError, isl.Error) as e:
        got = no(f"{e}")
    if len(_ANSWERS) > 1024:
        _ANSWERS.clear()
    _ANSWERS[key] = got
    return got


# permutation_member's answers by the question's structure (see there)
_ANSWERS: dict[tuple, Permutation] = {}


def _with_producer(producer: Member, m: Member, fwd: Expr, base: Expr, offsets: set[int],
                   fused_block: Dim3, range_blocks: int) -> str | None:
    """None when every consumer instance a fused thread runs (`m`) is one that depends on the
    producer instance the thread runs: its first producer-written byte `fwd(c)` is
    `base(p) + d` for an offset d of the producer's pattern (proven by isl to be exactly the
    first bytes of p's consumers, which are injective and read p's bytes only). Checked for
    every fused thread (exact, numpy) up to `ENUMERATE` evaluations; beyond, not decided."""
    threads = prod(fused_block)
    sets = member_expr_sets(m, fused_block, range_blocks)
    total = range_blocks * threads
    if total * len(sets) > ENUMERATE:
        return "too many fused threads to check the assignment"
    block, thread = np.divmod(np.arange(total, dtype=np.int64), threads)
    env = {"block": block, "thread": thread}

    def ev(e: Expr, env: dict) -> np.ndarray:
        return np.broadcast_to(np.asarray(e.evaluate(env), dtype=np.int64), block.shape)  # type: ignore[arg-type]

    p_ids = [ev(e, env) for e in member_exprs(producer, fused_block, range_blocks)]
    p_in = np.ones(block.shape, dtype=bool)
    for v, d in zip(p_ids, producer.grid + producer.block, strict=True):
        p_in &= (v >= 0) & (v < d)
    at = ev(base, {f"_p{k}": v for k, v in enumerate(p_ids)})
    allowed = np.array(sorted(offsets), dtype=np.int64)
    for k, ids in enumerate(sets):
        c = [ev(e, env) for e in ids]
        runs = np.ones(block.shape, dtype=bool)
        for v, d in zip(c, m.grid + m.block, strict=True):
            runs &= (v >= 0) & (v < d)
        first = ev(fwd, dict(zip(IDS, c, strict=True)))
        ok = p_in & np.isin(first - at, allowed)
        bad = np.flatnonzero(runs & ~ok)
        if len(bad):
            w = int(bad[0])
            return (f"fused thread (block {int(block[w])}, thread {int(thread[w])}) would run "
                    f"instance {k} of the consumer, which does not read what that thread's "
                    "producer instance wrote")
    return None


def _digit_inverse(fwd: Expr, consumer: Member) -> tuple[Expr, ...] | None:
    """The consumer ids as Exprs of the byte `x` it reads first, when `x = fwd(ids)` permutes
    the digits of the consumer's linear thread id `L` (mixed radix, x fastest) with strides:
    `x = x0 + sum_k digit_k(L) * s_k`. The digits and strides are found from the values of
    `fwd` for every instance (numpy), checked on every instance, and inverted as
    `digit_k = floor((x - x0) / s_k) mod r_k` (the strides sorted, each at least the span of
    the digits below it). None when `fwd` is not of that form. The caller proves the answer
    with isl (this only proposes it)."""
    dims = consumer.grid + consumer.block
    threads = prod(consumer.block)
    total = prod(dims)
    if total > ENUMERATE:
        return None
    lin = np.arange(total, dtype=np.int64)
    blk, thr = np.divmod(lin, threads)
    env = {}
    for names, v, d in ((IDS[:3], blk, consumer.grid), (IDS[3:], thr, consumer.block)):
        env[names[0]] = v % d[0]
        env[names[1]] = (v // d[0]) % d[1]
        env[names[2]] = v // (d[0] * d[1])
    vals = np.broadcast_to(np.asarray(fwd.evaluate(env), dtype=np.int64), lin.shape)  # type: ignore[arg-type]
    x0 = int(vals[0])
    g = vals - x0
    digits: list[tuple[int, int, int]] = []  # (place value in L, radix, stride)
    place = 1
    while place < total:
        stride = int(g[place])
        r = 1
        while place * (r + 1) <= total and r * place < total and \
                int(g[place * r]) == r * stride:
            r += 1
        if r < 2 or total % (place * r):
            return None
        digits.append((place, r, stride))
        place *= r
    pred = np.zeros(total, dtype=np.int64)
    for pv, r, st in digits:
        pred += ((lin // pv) % r) * st
    if not np.array_equal(pred, g):
        return None
    by_stride = sorted(digits, key=lambda t: t[2])
    if by_stride[0][2] <= 0:
        return None
    for (_p, r, st), (_q, _r2, st2) in zip(by_stride, by_stride[1:], strict=False):
        if st2 < st * r:
            return None
    x = Expr.var("x") - x0
    lin_e = Expr(0)
    for pv, r, st in digits:
        lin_e = lin_e + x.floordiv(st).mod(r).scale(pv)
    return delinearize(lin_e.floordiv(threads), consumer.grid) + \
        delinearize(lin_e.mod(threads), consumer.block)


def _shared_reader(same: isl.Map) -> isl.Set:
    """The instances that read an element another instance reads too, from `same` (instance ->
    instances reading the same element, symmetric, not the identity): one id greater in the
    partner, a half-space per id (`same` minus the identity can take isl minutes: a random
    program's mod-71 divisions)."""
    primed = [f"{n}_2" for n in IDS]
    for n, m in zip(IDS, primed, strict=True):
        gt = isl.Map("{ M[" + ", ".join(IDS) + "] -> M[" + ", ".join(primed) + "] : "
                     f"{m} > {n} }}").align_params(same.get_space())
        d = same.intersect(gt).domain()
        if not d.is_empty():
            return d
    return same.domain()  # not reached: `same` has a pair off the identity
