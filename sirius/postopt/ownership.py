"""Which block or thread owns the bytes of a temporary (contract-shared's part 4, from the
isl access relations of the fused kernel): the slice each block touches, and whether every
byte a block or thread reads it writes, with no byte touched by two owners. The costly isl
questions are asked in cheap forms first (counting, injectivity, point enumeration) and
otherwise within a budget, refusing when it runs out."""

from __future__ import annotations

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.kernel.affine import THREAD_DIMS as IDS

__all__ = ["block_set", "own_bytes", "slice_of", "thread_set"]

_X = "sirius_x"
_B = ("bx", "by", "bz")


def block_set(rel: isl.Map, host_vars: tuple[str, ...]) -> isl.Set:
    s = islutil.flat(rel)
    s = islutil.rename(s, islutil.set_names(s)[-1], _X)
    return islutil.project_onto(s, [*host_vars, *_B, _X])


def thread_set(rel: isl.Map, host_vars: tuple[str, ...]) -> tuple[isl.Set, bool]:
    """The bytes each thread touches over (host loop variables, ids, byte), and whether that
    needed no projection (no loop dimension of the kernel's own: the set can be counted)."""
    s = islutil.flat(rel)
    s = islutil.rename(s, islutil.set_names(s)[-1], _X)
    keep = [*host_vars, *IDS, _X]
    return islutil.project_onto(s, keep), len(islutil.set_names(s)) == len(keep)


def own_bytes(reads: list[tuple[isl.Set, bool]], writes: list[tuple[isl.Set, bool]],
               host_vars: tuple[str, ...]) -> str | None:
    """THREAD width (no barrier between the writes and the reads): every byte a thread reads,
    that thread writes, and no byte a thread writes is written by another thread of the
    launch (so, with the first, read by none either); None when both hold, else why not."""
    if not writes:
        return "no kernel stores to it"
    countable = all(c for _, c in (*reads, *writes))
    w = writes[0][0]
    for x, _ in writes[1:]:
        w = w.union(x)
    if any(not _subset(x, w, countable) for x, _ in reads):
        return "a thread reads bytes it does not write (and no barrier orders another's)"
    # every byte read is one the reader writes, so no byte written by one thread only is
    # touched by another
    if not _one_owner(w, host_vars, IDS, countable):
        return "two threads write one byte"
    return None


def slice_of(reads: list[isl.Set], writes: list[isl.Set], host_vars: tuple[str, ...],
           grid: tuple[int, int, int], limit: int, owned: bool = False
           ) -> tuple[tuple[int, int, int, int], int] | str:
    """((c0, cx, cy, cz), S): block b's bytes lie in [c0 + cx bx + cy by + cz bz, + S), S at
    most `limit`, the blocks' bytes are disjoint and each block reads only bytes it writes; or
    why not. The size comes first: the disjointness test, isl's costliest question here, is
    asked only of a slice that would fit (paper resnext50: 46 s for a 1.5 MB slice).
    `owned`: each thread's bytes are proven its own (`own_bytes`), which implies both block
    questions, and only the slice is computed."""
    if not writes:
        return "no kernel stores to it"
    w = writes[0]
    for x in writes[1:]:
        w = w.union(x)
    a = w
    for x in reads:
        a = a.union(x)
    names = islutil.set_names(a)

    def low(bx: int, by: int, bz: int) -> int | None:
        fixed = a.intersect(type(a)(f"{{ [{', '.join(names)}] : bx = {bx} and by = {by} and "
                                    f"bz = {bz} }}"))
        got = islutil.bounds(fixed, _X)
        return None if got is None else got[0]

    # the first block that touches it, by dimension (a horizontal kernel's member starts
    # where its blocks do); the blocks that touch none need no slice
    first = [0, 0, 0]
    for d in range(3):
        got = islutil.bounds(a, _B[d]) if grid[d] >= 2 else None
        first[d] = got[0] if got is not None else 0
    c0 = low(*first)
    if c0 is None:
        return f"block {tuple(first)} touches none of it"
    coef = [c0]
    for d in range(3):
        at = low(*(first[e] + (e == d) for e in range(3))) if grid[d] >= 2 else None
        coef.append(0 if at is None else at - c0)  # the checks below prove the guess
    coef[0] = c0 - sum(c * f for c, f in zip(coef[1:], first, strict=True))
    off = " + ".join([str(coef[0]), *(f"{c} * {b}" for c, b in zip(coef[1:], _B, strict=True))])
    d = a.reset_tuple_id().apply(isl.Map(f"{{ [{', '.join(names)}] -> [d] : "
                                         f"d = {_X} - ({off}) }}"))
    got = islutil.bounds(d, "d")
    if got is None or got[0] < 0:
        return "the bytes a block touches do not start at an affine function of the block index"
    if got[1] + 1 > limit:
        return f"each block touches {got[1] + 1} bytes of it, over the {limit} a buffer may take"
    if owned:
        return (coef[0], coef[1], coef[2], coef[3]), got[1] + 1
    if any(not _subset(x, w, False) for x in reads):
        return "a block reads bytes it does not write (the bytes another block or an " \
               "earlier launch left)"
    if not _one_owner(a, host_vars, _B, False):
        return "two blocks touch the same bytes"
    return (coef[0], coef[1], coef[2], coef[3]), got[1] + 1


POINTS = 1 << 18  # points of a set the pass enumerates rather than ask isl about pairs
BUDGET = 2_000_000  # isl operations for one question (seconds); beyond it: refused
INJECTIVE_BUDGET = 200_000  # for the first, cheap form of `_one_owner`'s question


def _subset(a: isl.Set, b: isl.Set, countable: bool) -> bool:
    """a within b: by counting where both are `countable` (sets of whole thread instances,
    nothing projected: their counts take milliseconds where isl's test takes minutes, on the
    unions with divisions a tiled kernel's accesses make), else isl's own test within BUDGET
    (False when it runs out: refused)."""
    got = islutil.subset_by_count(a, b) if countable else None
    return islutil.bounded(BUDGET, lambda: a.is_subset(b), False) if got is None else got


def _one_owner(s: isl.Set, host_vars: tuple[str, ...], owner: tuple[str, ...],
               countable: bool) -> bool:
    """Whether no byte of `s` (points over the host loop variables, the ids, the byte) is
    touched by two owners (blocks or threads, the `owner` dimensions) in one host iteration:
    isl's injectivity test of owners -> bytes first (milliseconds where it answers within
    INJECTIVE_BUDGET: enumerating paper nasnet's 786432 points took 20 s), then the points
    enumerated where `s` is `countable` (as for `_subset`) and they are few, else isl's question
    on pairs within BUDGET (False when it runs out)."""
    m = islutil.regroup(s, [*host_vars, *owner], [*host_vars, _X])
    # one owner per (host iteration, byte): the owners -> bytes relation is injective
    got = islutil.bounded(INJECTIVE_BUDGET, m.is_injective, None)
    if got is not None:
        return bool(got)
    names = islutil.set_names(s)
    n = islutil.finite_count(s) if countable else None
    if n is not None and n <= POINTS:
        at = [names.index(v) for v in (*host_vars, _X)]
        who = [names.index(v) for v in owner]
        seen: dict[tuple[int, ...], tuple[int, ...]] = {}
        for pt in islutil.points(s):
            key, mine = tuple(pt[i] for i in at), tuple(pt[i] for i in who)
            if seen.setdefault(key, mine) != mine:
                return False
        return True
    m = islutil.regroup(s, [*host_vars, *owner], [_X])
    flat = islutil.flat(islutil.primed(m.apply_range(m.reverse()), "out"))
    same = [f"{v}' = {v}" for v in host_vars]
    other = " or ".join(f"{d}' != {d}" for d in owner)
    clash = flat.intersect(type(flat)(f"{{ [{', '.join(islutil.set_names(flat))}] : "
                                      f"{' and '.join([*same, f'({other})'])} }}"))
    return islutil.bounded(BUDGET, clash.is_empty, False)
