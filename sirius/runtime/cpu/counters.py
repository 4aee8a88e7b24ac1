"""How the CPU executor runs a `counters` megakernel (docs/fusion-megakernel.md): which block
runs which segment when. A work item is one block running one segment; a block runs its
segments in order, and item (k, b) may start only when every item its wait-table entries name
has finished. Whether an item can start depends only on which items finished, never on data,
so the whole schedule is computed before anything runs, and consecutive items of one segment
become one launch over a list of blocks.

The block order picks among the items that may start: the latest segment first, so every
block runs ahead as far as its waits let it (a consumer whose wait is missing then runs before
its producer), and among those the lowest block (`forward`) or the highest (`reverse`), so a
wait that leaves out producers at either end of a range is caught; `random` picks any. A
state where no item may start and some have not run is a deadlock, reported with the blocks
that wait and what they wait for."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

# a wait-table entry: first and last waiting block, producer segment, first and last producer
Entry = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class Schedule:
    launches: list[tuple[int, list[int]]]  # (segment, its blocks in order), in order
    flag_checks: int  # producer flags the waits look at, over every item


class Deadlock(Exception):
    """No item may start, and some have not run."""


def schedule(waits: list[tuple[Entry, ...]], nblocks: int, order: int, seed: int) -> Schedule:
    """`waits[k]`: the entries of the wait before segment k (waits[0] is empty); `order`: 0
    forward, 1 reverse, 2 random (native.ORDERS)."""
    nseg = len(waits)
    done = [bytearray(nblocks) for _ in range(nseg)]
    # what item (k, b) waits for: (segment, first block, last block), in table order
    need: list[list[list[tuple[int, int, int]]]] = [
        [[(j, plo, phi) for blo, bhi, j, plo, phi in waits[k] if blo <= b <= bhi]
         for b in range(nblocks)] for k in range(nseg)]
    checks = sum(max(0, phi - plo + 1) for k in range(nseg) for b in range(nblocks)
                 for _, plo, phi in need[k][b])
    # the scan of a blocked item: (entry index, producer block) of the first unfinished one
    cursor: dict[tuple[int, int], tuple[int, int]] = {}
    waiting: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (j, p) -> items blocked on it
    rng = random.Random(seed)
    ready: list = []  # a heap (forward, reverse) or a list (random)

    def push(k: int, b: int) -> None:
        if order == 2:
            ready.append((k, b))
        else:
            heapq.heappush(ready, (-k, b) if order == 0 else (-k, -b))

    def advance(k: int, b: int, at: tuple[int, int]) -> None:
        """Scan item (k, b)'s waits from `at`; ready, or blocked on its first unfinished."""
        e, p = at
        reqs = need[k][b]
        while e < len(reqs):
            j, plo, phi = reqs[e]
            p = max(p, plo)
            while p <= phi:
                if not (0 <= j < nseg and 0 <= p < nblocks):
                    p += 1  # outside the grid: nothing runs there (FusedKernelSpec refuses it)
                    continue
                if not done[j][p]:
                    cursor[(k, b)] = (e, p)
                    waiting.setdefault((j, p), []).append((k, b))
                    return
                p += 1
            e, p = e + 1, 0
        cursor.pop((k, b), None)
        push(k, b)

    for b in range(nblocks):
        advance(0, b, (0, 0))
    items: list[tuple[int, int]] = []
    while ready:
        if order == 2:
            i = rng.randrange(len(ready))
            ready[i], ready[-1] = ready[-1], ready[i]
            k, b = ready.pop()
        else:
            k, b = heapq.heappop(ready)
            k, b = -k, (b if order == 0 else -b)
        items.append((k, b))
        done[k][b] = 1
        if k + 1 < nseg:
            advance(k + 1, b, (0, 0))
        for w in waiting.pop((k, b), ()):
            advance(*w, cursor[w])
    if len(items) < nseg * nblocks:
        stuck = sorted(cursor.items())
        shown = "; ".join(
            f"block {b} before segment {k} waits for block {p} of segment "
            f"{need[k][b][e][0]}" for (k, b), (e, p) in stuck[:6])
        more = f" (and {len(stuck) - 6} more)" if len(stuck) > 6 else ""
        raise Deadlock(f"deadlock: {len(stuck)} block(s) wait for work that can never "
                       f"finish: {shown}{more}")
    launches: list[tuple[int, list[int]]] = []
    for k, b in items:
        if launches and launches[-1][0] == k:
            launches[-1][1].append(b)
        else:
            launches.append((k, [b]))
    return Schedule(launches, checks)
