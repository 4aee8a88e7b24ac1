"""The waits of a `counters` megakernel (`--megakernel counters`, docs/fusion-megakernel.md):
which blocks of a segment wait for which blocks of an earlier one.

A megakernel's member runs its virtual blocks 0..need-1 on the physical blocks
vb mod G, so the physical blocks 0..min(need, G)-1 do its work and the others do none. A
member depends on a member of an earlier segment when the UAR has a dependence (of any kind
and width) between launches they cover. Then:

- when the launches they cover sit in their virtual blocks at known places (a launch of the
  original program: its own linear block ids with the `block` map, its global thread id over
  the megakernel's block size with the `global` map; a vertical fused kernel whose members all
  have its grid, or a horizontal one of original launches: each member's block ids, spread
  the same way when the fused kernel runs with the global map), the blocks wait as the isl
  relation between the effects of each dependent pair of launches says:
  for each physical block b of the consumer, the producer's physical blocks holding an
  instance that writes what an instance on b reads or writes, or reads what it writes, in
  the same host iteration (the interval from the least to the greatest, mod G);
- otherwise (a fused kernel, a regrouped map, parameters, isl over its budget) every physical
  block that does the consumer's work waits for every one that did the producer's.

A block runs its segments in order, so a wait that the same block already made (for the same
or more producer blocks of the same segment) before a segment in between is left out. Every
wait is on an earlier segment, so the megakernel cannot deadlock with its grid co-resident
(`FusedKernelSpec` checks it, the note in `codegen/grid.py` says why)."""

from __future__ import annotations

from collections.abc import Sequence

from sirius.analysis import islutil
from sirius.analysis.kernel.pieces import THREAD_DIMS
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.dependences import BUDGET, prime_out
from sirius.analysis.uar.effects import WRITE
from sirius.fusion.spec import Dim3, Wait

Interval = tuple[int, int]


# a statement a member runs, with the member's virtual block of its block (bx, by, bz):
# offset + bx + gx * (by + gy * bz) for its grid (gx, gy, gz); when the member runs with the
# global map, `spread` = (its block dims d, the threads t of the member's blocks, the
# megakernel's threads T): its thread (tx, ty, tz) is the thread tx + dx * (ty + dy * tz) of
# member block offset + bx + ..., so the virtual block is floor((that block * t + that
# thread) / T)
Spread = tuple[Dim3, int, int]
Placed = tuple[str, int, Dim3, Spread | None]


def loop_waits(segments: Sequence[Sequence[int]], covers: Sequence[frozenset[str]],
               needs: Sequence[int], grid: int, uar: UAR,
               placed: Sequence[tuple[Placed, ...] | None], nest: tuple[str, ...]
               ) -> tuple[Wait, ...]:
    """The waits across the iterations of a device loop over host variables `nest` (a loop
    nest's, outermost first; iterations in their lexicographic order) (lag 1):
    before its segment in iteration i, a block that does work of member c waits until the
    blocks that did work of member a in an earlier iteration, on what its own work touches,
    have finished iteration i - 1 of a's segment; for every pair of members (a = c
    included). Waiting for iteration i - 1 covers every earlier one (a block finishes a
    segment's iterations in order, and the flags count them). Which blocks: the isl relation
    between the two members' effects with the consumer's iteration of `nest` after the
    producer's (the other host variables equal), as `counter_waits` does within an
    iteration; every block of a when a placement is unknown or isl cannot say."""
    seg_of = {i: k for k, seg in enumerate(segments) for i in seg}
    span = [min(n, grid) for n in needs]
    want: dict[tuple[int, int, int], Interval] = {}
    for a in range(len(covers)):
        for c in range(len(covers)):
            pairs = {(u, v) for u in covers[a] for v in covers[c]}
            per_block = _member_waits(uar, pairs, placed[a] if len(placed) > a else None,
                                      placed[c] if len(placed) > c else None, grid, span[c],
                                      nest)
            if per_block is None and not any(_conflicting(es, ed) for u, v in pairs
                                             for es in uar.effects[u]
                                             for ed in uar.effects[v]):
                continue
            _want(want, seg_of[c], seg_of[a], span[a], span[c], per_block)
    out = _compressed(want, lag=1)
    missing = [(k, b, j) for (k, b, j), (lo, hi) in sorted(want.items())
               if not _itself(b, (lo, hi))
               and not any(w.segment == k and w.after == j and w.blocks[0] <= b <= w.blocks[1]
                           and w.producers[0] <= lo and hi <= w.producers[1] for w in out)]
    if missing:
        raise WaitsNotProven(_not_covered(missing, "of the iteration before"))
    return out


class WaitsNotProven(ValueError):
    """The waits made do not cover every dependence between blocks: no megakernel."""


def _not_covered(missing: list[tuple[int, int, int]], when: str = "") -> str:
    shown = "; ".join(f"block {b} before segment {k} on segment {j}{' ' + when if when else ''}"
                      for k, b, j in missing[:3])
    more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
    return (f"the dependence-counter waits do not cover every dependence between blocks: "
            f"{shown}{more}")


def _conflicting(es, ed) -> bool:
    """Two effects that touch one buffer, at least one of them writing."""
    return es.buffer == ed.buffer and WRITE in (es.mode, ed.mode)


def _want(want: dict[tuple[int, int, int], Interval], k: int, j: int, producers: int,
          consumers: int, per_block: list[Interval | None] | None) -> None:
    """Add to `want` ((segment, block, producer segment) -> producer blocks) what each of the
    `consumers` blocks of segment k needs of segment j: `per_block`, or every one of the
    `producers` blocks when that is None."""
    for b in range(consumers):
        got = (0, producers - 1) if per_block is None else per_block[b]
        if got is None:
            continue
        old = want.get((k, b, j))
        want[(k, b, j)] = got if old is None else (min(old[0], got[0]), max(old[1], got[1]))


def _compressed(want: dict[tuple[int, int, int], Interval], lag: int = 0) -> tuple[Wait, ...]:
    """`want` as waits, consecutive blocks with the same producers in one. A block that would
    wait only for itself is left out: it ran the earlier segment (of this iteration, or all
    of the iteration before) before it reaches this one."""
    out: list[Wait] = []
    for (k, b, j), iv in sorted(want.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        if _itself(b, iv):
            continue
        last = out[-1] if out else None
        if last is not None and (last.segment, last.after, last.producers) == (k, j, iv) \
                and last.blocks[1] == b - 1:
            out[-1] = Wait(k, (last.blocks[0], b), j, iv, lag)
        else:
            out.append(Wait(k, (b, b), j, iv, lag))
    return tuple(out)


def counter_waits(segments: Sequence[Sequence[int]], covers: Sequence[frozenset[str]],
                  needs: Sequence[int], grid: int, uar: UAR,
                  placed: Sequence[tuple[Placed, ...] | None] = ()) -> tuple[Wait, ...]:
    """`segments`: member indices per segment; `covers[i]`: the UAR statement ids member i
    runs; `needs[i]`: its virtual blocks; `placed[i]`: for every statement member i runs,
    where its blocks are among the member's virtual blocks (None: not known, every block
    waits for every block)."""
    seg_of = {i: k for k, seg in enumerate(segments) for i in seg}
    owner = {sid: i for i, sids in enumerate(covers) for sid in sids}
    depends: dict[tuple[int, int], set[tuple[str, str]]] = {}  # members -> statement pairs
    for u, v in uar.graph.edges():
        a, c = owner.get(u), owner.get(v)
        if a is None or c is None or a == c:
            continue
        if seg_of[a] > seg_of[c]:
            a, c, u, v = c, a, v, u  # carried by a host loop: still orders the two
        if seg_of[a] < seg_of[c]:
            depends.setdefault((a, c), set()).add((u, v))
    span = [min(n, grid) for n in needs]
    # (consumer segment, consumer block, producer segment) -> producer blocks
    want: dict[tuple[int, int, int], Interval] = {}
    for (a, c), pairs in sorted(depends.items()):
        per_block = _member_waits(uar, pairs, placed[a] if len(placed) > a else None,
                                  placed[c] if len(placed) > c else None, grid, span[c])
        _want(want, seg_of[c], seg_of[a], span[a], span[c], per_block)
    # made already by the same block before a segment between (for the same or more blocks)
    made: dict[tuple[int, int], list[tuple[int, Interval]]] = {}
    for (k, b, j), iv in want.items():
        made.setdefault((b, j), []).append((k, iv))
    keep = {(k, b, j): iv for (k, b, j), iv in want.items()
            if not any(j < k2 < k and lo <= iv[0] and iv[1] <= hi
                       for k2, (lo, hi) in made[(b, j)])}
    out = _compressed(keep)
    uncovered = _uncovered(want, out)
    if uncovered:  # the reduction or the compression above lost a wait: never emit that
        raise WaitsNotProven(_not_covered(uncovered))
    return out


def _itself(block: int, producers: Interval) -> bool:
    """Whether a block needs only itself: it ran that work already, no wait."""
    return producers == (block, block)


def _uncovered(want: dict[tuple[int, int, int], Interval], waits: Sequence[Wait]
               ) -> list[tuple[int, int, int]]:
    """The (segment, block, producer segment) whose producer blocks no wait of `waits` covers,
    neither before that segment nor before an earlier segment of the same block that is after
    the producer's (a block that needs only itself needs no wait)."""
    have: dict[tuple[int, int], list[tuple[int, Interval]]] = {}
    for w in waits:
        for b in range(w.blocks[0], w.blocks[1] + 1):
            have.setdefault((b, w.after), []).append((w.segment, w.producers))
    return [(k, b, j) for (k, b, j), (lo, hi) in sorted(want.items())
            if not _itself(b, (lo, hi))
            and not any(j < k2 <= k and plo <= lo and hi <= phi
                        for k2, (plo, phi) in have.get((b, j), ()))]


def _member_waits(uar: UAR, pairs: set[tuple[str, str]], prod: tuple[Placed, ...] | None,
                  cons: tuple[Placed, ...] | None, grid: int,
                  span: int, later: tuple[str, ...] = ()) -> list[Interval | None] | None:
    """Per consumer physical block, the producer blocks the dependent statement pairs need
    (their intervals joined), or None when a placement is unknown or isl cannot say; with
    `later` (a loop nest's host variables, outermost first), the consumer's instances in a
    later iteration of that nest than the producer's (else the same host iteration)."""
    if prod is None or cons is None:
        return None
    where_p = {sid: (off, g, sp) for sid, off, g, sp in prod}
    where_c = {sid: (off, g, sp) for sid, off, g, sp in cons}
    out: list[Interval | None] = [None] * span
    for u, v in sorted(pairs):
        if u not in where_p or v not in where_c:
            return None
        got = _block_waits(uar, u, v, where_p[u], where_c[v], grid, span, later)
        if got is None:
            return None
        out = [x if y is None else y if x is None else (min(x[0], y[0]), max(x[1], y[1]))
               for x, y in zip(out, got, strict=True)]
    return out


def _virtual_block(off: int, g: Dim3, spread: Spread | None, primed: str) -> str:
    """The isl expression of a statement instance's virtual block (Placed), over its ids
    (primed with `primed`)."""
    bx, by, bz, tx, ty, tz = (f"{d}{primed}" for d in THREAD_DIMS)
    block = f"{off} + {bx} + {g[0]} * {by} + {g[0] * g[1]} * {bz}"
    if spread is None:
        return block
    d, t, big = spread
    return f"floor((({block}) * {t} + {tx} + {d[0]} * {ty} + {d[0] * d[1]} * {tz}) / {big})"


def _block_waits(uar: UAR, prod: str, cons: str, pplace: tuple[int, Dim3, Spread | None],
                 cplace: tuple[int, Dim3, Spread | None], grid: int,
                 span: int, later: tuple[str, ...] = ()) -> list[Interval | None] | None:
    """For each physical block 0..span-1 of the consumer statement: the interval of the
    producer's physical blocks it must wait for (None: none), or None when isl cannot say.
    `later`: the consumer's instance in a later iteration of that host loop nest (its
    variables outermost first: lexicographically later)."""
    sp, sc = uar.statement(prod), uar.statement(cons)
    if sp.vars != sc.vars or not set(later) <= set(sp.vars):
        return None
    # the other host variables equal; the nest's lexicographically later: equal in the loops
    # outside level k, later in level k, for some k
    when = [f"{v}' = {v}" for v in sp.vars if v not in later]
    if later:
        when.append("(" + " or ".join(
            "(" + " and ".join([*(f"{v}' = {v}" for v in later[:k]),
                                f"{later[k]}' > {later[k]}"]) + ")"
            for k in range(len(later))) + ")")
    threads = pplace[2] is not None or cplace[2] is not None  # the thread ids matter too
    dims = THREAD_DIMS if threads else THREAD_DIMS[:3]

    def pairs():
        out = None
        for es in uar.effects[prod]:
            for ed in uar.effects[cons]:
                if not _conflicting(es, ed):
                    continue
                rel = prime_out(es.relation.apply_range(ed.relation.reverse()))
                s = islutil.flat(rel)
                if sp.vars:
                    names = islutil.set_names(s)
                    s = s.intersect(type(s)(f"{{ [{', '.join(names)}] : {' and '.join(when)} }}"))
                s = islutil.project_onto(s, [*dims, *(f"{d}'" for d in dims)])
                out = s if out is None else out.union(s)
        if out is None:
            return [None] * span
        out = out.coalesce()
        return islutil.intervals_mod(out, _virtual_block(*cplace, "'"),
                                     _virtual_block(*pplace, ""), grid, span)

    return islutil.bounded(10 * BUDGET, pairs, None)
