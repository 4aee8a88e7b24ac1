"""The waits of a `counters` megakernel (`--megakernel counters`, docs/fusion-megakernel.md):
which blocks of a segment wait for which blocks of an earlier one.

A megakernel's member runs its virtual blocks 0..need-1 on the physical blocks
vb mod G, so the physical blocks 0..min(need, G)-1 do its work and the others do none. A
member depends on a member of an earlier segment when the UAR has a dependence (of any kind
and width) between launches they cover; then every physical block that does the consumer's
work waits for every physical block that did the producer's. That is exact in which
*members* wait for which, and conservative within them (a block waits for all of the
producer's blocks, not only those whose writes it reads). A block runs its segments in order,
so a wait already made by the same blocks in a segment between is left out.

Every wait is on an earlier segment, so the megakernel cannot deadlock with its grid
co-resident (`FusedKernelSpec` checks it, the note in `codegen/grid.py` says why)."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from sirius.fusion.spec import Wait


def counter_waits(segments: Sequence[Sequence[int]], covers: Sequence[frozenset[str]],
                  needs: Sequence[int], grid: int, graph: nx.MultiDiGraph) -> tuple[Wait, ...]:
    """`segments`: member indices per segment; `covers[i]`: the UAR statement ids member i
    runs; `needs[i]`: its virtual blocks; `graph`: the UAR's dependence graph."""
    seg_of = {i: k for k, seg in enumerate(segments) for i in seg}
    owner = {sid: i for i, sids in enumerate(covers) for sid in sids}
    depends: set[tuple[int, int]] = set()  # (producer member, consumer member)
    for u, v in graph.edges():
        a, c = owner.get(u), owner.get(v)
        if a is None or c is None or a == c:
            continue
        if seg_of[a] > seg_of[c]:
            a, c = c, a  # a dependence carried by a host loop: still orders the two
        if seg_of[a] < seg_of[c]:
            depends.add((a, c))
    span = [min(n, grid) for n in needs]
    # (consumer segment, last waiting block, producer segment) -> last producer block
    want: dict[tuple[int, int, int], int] = {}
    for a, c in depends:
        key = (seg_of[c], span[c] - 1, seg_of[a])
        want[key] = max(want.get(key, -1), span[a] - 1)
    out: list[Wait] = []
    for (k, last, j), plast in sorted(want.items()):
        # made already by these blocks (or more) before a segment between j and k
        if any(k2 < k and j2 == j and last2 >= last and p2 >= plast
               for (k2, last2, j2), p2 in want.items() if k2 > j):
            continue
        out.append(Wait(k, (0, last), j, (0, plast)))
    return tuple(out)
