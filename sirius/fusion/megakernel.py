"""The spec of one megakernel (`--megakernel grid|counters`, docs/fusion-megakernel.md): the
launches a region became after the vertical and horizontal rounds, as members cut into
segments of independent launches, with the grid, and for `counters` the waits
(fusion/waits.py); the parts a long region is cut into (`megakernel_chunks`) and what the
report says of each (`megakernel_reasons`). `rounds._megakernel_round` builds the specs and
records what they became."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, DevRef, Launch, Loop, Op, ScalarArg
from sirius.analysis.uar.build import UAR
from sirius.fusion.members import param_maps
from sirius.fusion.plan.planner import Node, Region
from sirius.fusion.spec import (
    BLOCK,
    GLOBAL,
    DeviceLoop,
    FusedKernel,
    FusedKernelSpec,
    Member,
    Wait,
)
from sirius.fusion.waits import counter_waits, loop_waits

# The most launches of the original program one megakernel runs: its segments inline every
# member's code into one kernel, and LLVM's optimization of a kernel of thousands of inlined
# launches (paper lstm_large: 4090 launches, 219 members after fusion) ran out of 24 GB of
# memory. A region that covers more becomes several megakernels, one after another (the
# kernel boundary between them orders what a grid barrier or a wait would have).
MEGAKERNEL_LAUNCHES = 512


def megakernel_chunks(region: Region, seq: list, fused: dict[str, FusedKernel],
                      alone: Callable[[Launch], bool] = lambda _: False) -> list[list]:
    """`seq` cut into consecutive runs that cover at most MEGAKERNEL_LAUNCHES launches; a
    launch for which `alone` holds is a run of its own (it stays a launch)."""
    def covers(gi: int, tag, launch: Launch) -> int:
        if launch.mangled not in fused:
            return 1
        g = region.groups[gi]
        return len(g.clusters[tag].nodes) if isinstance(tag, int) else len(g.nodes)

    out: list[list] = [[]]
    n = 0
    for item in seq:
        c = covers(*item)
        if out[-1] and (n + c > MEGAKERNEL_LAUNCHES or alone(item[2])
                        or alone(out[-1][-1][2])):
            out.append([])
            n = 0
        out[-1].append(item)
        n += c
    return out


def megakernel_reasons(k: FusedKernel, phase_launches: Sequence[Launch], arch: str, sms: int,
                       chunks: int) -> list[str]:
    """What report.md says of megakernel `k` (its launches `phase_launches`), one of `chunks`
    parts of its region."""
    segs = k.spec.segments()
    reasons = [f"segment {j}: {', '.join(phase_launches[i].kernel for i in seg)}"
               for j, seg in enumerate(segs)]
    per = k.grid[0] // sms
    grid_why = "as many as its largest member needs" if k.grid[0] >= most_blocks(k) else \
        f"one per SM of the smallest {arch} GPU, co-resident" if k.grid[0] == sms else \
        (f"{per} per SM on the {sms} SMs of the smallest {arch} GPU, co-resident as ptxas's "
         "registers and shared memory allow")
    sync = f"{len(segs) - 1} grid barrier(s)" if k.spec.waits is None else \
        f"{len(k.spec.waits)} dependence wait(s) instead of grid barriers"
    reasons.append(f"{sync}; grid {k.grid[0]} blocks ({grid_why}"
                   "), each member over its own blocks in a block-stride loop")
    if chunks > 1:
        reasons.append(f"its region is cut into {chunks} parts, one after another: a "
                       f"megakernel runs at most {MEGAKERNEL_LAUNCHES} launches of the "
                       "original program")
    return reasons


def most_blocks(k: FusedKernel) -> int:
    """The most blocks (of the megakernel's block size) one member of megakernel `k` needs."""
    threads = prod(k.block)
    return max((m.blocks_needed(threads) or 1) for m in k.spec.members)


def megakernel_spec(name: str, region: Region, seq: Sequence[tuple[int, int | str, Launch]],
                    fused: dict[str, FusedKernel], by_launch: dict[int, Node],
                    member_launches: dict[str, list[Launch]], sms: int, variant: str,
                    uar: UAR, types: Callable[[Launch], object]
                    ) -> tuple[FusedKernelSpec, list[Launch],
                               Callable[[tuple[str, ...]], tuple[Wait, ...]]]:
    """The megakernel of `seq`, a region's launches in order as (group, part, launch) (the
    parts of one group are independent): a new segment starts at another group or at a
    part already in the segment. Returns the spec, the launch of each member, and for
    `counters` the waits across iterations should a device loop (nest) take the kernel (a
    function of the nest's host variables, `loop_waits`: they join the spec's waits then;
    computed only then, as isl work per member pair)."""
    ms, cuts, seen_tags, group, covers, placed = [], [], set(), None, [], []

    def nodes_of(gi: int, tag: int | str, k: FusedKernel) -> list:
        g = region.groups[gi]
        return g.clusters[tag].nodes if isinstance(tag, int) else \
            [by_launch.get(id(x)) for x in member_launches.get(k.name, [])]

    vertical = {c.name: c.nodes for g in region.groups for c in g.clusters
                if len(c.nodes) > 1}  # a vertical kernel's launches

    def independent(launch: Launch) -> bool:
        """Its threads are independent: it may fill blocks of any size (the global map). A
        fused kernel's are when every launch it runs is so (fused ones in turn) and it has no
        shared memory and no block barrier of its own. (The code generator refuses the global
        map for a function with barriers, shared memory or warp operations whatever this
        says.)"""
        n = by_launch.get(id(launch))
        if n is not None:
            return n.thread_independent
        k = fused.get(launch.mangled)
        if k is None or k.smem or k.static_smem or any(x.barrier_before
                                                       for x in k.spec.members):
            return False
        if k.name in vertical:
            return all(n.thread_independent for n in vertical[k.name])
        inner = member_launches.get(k.name, [])
        return len(inner) == len(k.spec.members) and all(independent(x) for x in inner)


    def size(launch: Launch) -> int:
        k = fused.get(launch.mangled)
        return prod(k.block) if k is not None else by_launch[id(launch)].threads

    # the block: the largest of the launches that need their blocks intact (barriers, shared
    # memory, warp operations); launches whose threads are independent fill it in order
    fixed = [size(x) for _, _, x in seq if not independent(x)]
    threads = max(fixed) if fixed else max(size(x) for _, _, x in seq)
    for i, (gi, tag, launch) in enumerate(seq):
        k = fused.get(launch.mangled)
        g = region.groups[gi]
        if k is not None:
            nodes = nodes_of(gi, tag, k)
            m = Member(k.name, k.grid, k.block, k.smem,
                       mapping=GLOBAL if prod(k.block) != threads and independent(launch)
                       else BLOCK)
            covers.append(frozenset(n.sid for n in (g.clusters[tag].nodes
                                                    if isinstance(tag, int) else g.nodes)))
            placed.append(_placed_fused(k, nodes, None if m.mapping.kind == "block"
                                        else (prod(k.block), threads)))
        else:
            n = by_launch[id(launch)]
            # a launch whose threads are independent fills the fused blocks (its threads in
            # order, several of its blocks per fused block), not one of its blocks per fused
            # block with the other threads idle
            m = Member(n.launch.mangled, n.grid, n.block, n.smem,
                       mapping=GLOBAL if n.thread_independent and n.threads != threads
                       else BLOCK)
            covers.append(frozenset([n.sid]))
            placed.append(((n.sid, 0, m.grid, None if m.mapping.kind == "block"
                            else (n.block, n.threads, threads)),))
        if i and (gi != group or tag in seen_tags):
            cuts.append(i)
            seen_tags = set()
        group = gi
        seen_tags.add(tag)
        ms.append((m, launch, types(launch)))
    needs = [m.blocks_needed(threads) or 1 for m, _, _ in ms]
    grid = min(max(needs), sms)
    waits = None
    bounds = [0, *cuts, len(ms)]
    segs = [range(x, y) for x, y in zip(bounds, bounds[1:], strict=False)]
    if variant == "counters":
        waits = counter_waits(segs, covers, needs, grid, uar, placed)

    def across(nest: tuple[str, ...]) -> tuple[Wait, ...]:
        return loop_waits(segs, covers, needs, grid, uar, placed, nest) \
            if variant == "counters" else ()
    spec = FusedKernelSpec(name, "grid", tuple(param_maps(ms)), block=(threads, 1, 1),
                           grid=(grid, 1, 1),
                           grid_sync_before=tuple(cuts), waits=waits)
    return spec, [launch for _, launch, _ in ms], across


def _placed_fused(k: FusedKernel, nodes, spread: tuple[int, int] | None) -> tuple | None:
    """Where the statements a fused member runs sit among its virtual blocks (fusion/waits.py,
    `Placed`), when known: a vertical kernel whose members all run the fused grid's blocks as
    their own, or a horizontal kernel of original launches, each in its block range
    (`nodes`: the cluster's nodes, or the horizontal kernel's member launches' nodes, None
    where a member is not an original launch). `spread`: (the fused kernel's threads, the
    megakernel's) when the fused kernel runs with the global map."""
    if not nodes or len(nodes) != len(k.spec.members) or None in nodes or any(
            x.mapping.kind != "block" or x.repeat != 1 for x in k.spec.members):
        return None

    def how(n):
        return None if spread is None else (n.block, *spread)

    if k.arrangement == "vertical" and all(
            tuple(x.grid) == tuple(k.grid) and p.first_block == 0
            for x, p in zip(k.spec.members, k.placements, strict=True)):
        return tuple((n.sid, 0, k.grid, how(n)) for n in nodes)
    if k.arrangement == "horizontal":
        return tuple((n.sid, p.first_block, x.grid, how(n))
                     for n, x, p in zip(nodes, k.spec.members, k.placements, strict=True))
    return None


def loop_bodies(ops: Sequence[Op], regions: Sequence[Region]) -> dict[int, tuple[Loop, ...]]:
    """The regions (by index) that are the whole body of a host loop (the loop's body is
    launches only, exactly the region's), each with that loop and the loops around it whose
    body is only the loop inside (a perfect nest), outermost first."""
    by_first = {r.body_key: ri for ri, r in enumerate(regions)}
    out: dict[int, tuple[Loop, ...]] = {}

    def walk(ops: Sequence[Op], around: tuple[Loop, ...]) -> None:
        for op in ops:
            if not isinstance(op, Loop):
                continue
            # `around`: the loops whose body is `ops`, one loop inside the other
            nest = (*around, op) if len(ops) == 1 else (op,)
            walk(op.body, nest)
            ri = by_first.get(id(op.body[0])) if op.body else None
            if ri is not None and [id(x) for x in op.body] == \
                    [id(n.launch) for n in regions[ri].nodes]:
                out[ri] = nest

    walk(ops, ())
    return out


def _step(e: Expr, var: str) -> int | None:
    """The coefficient of `var` in `e` when `e` is `var` times a constant plus terms without
    it; None when `var` sits inside a floor, mod, min or max."""
    rest = Expr._make(e.const, {a: c for a, c in e.terms if a != var})
    return None if var in rest.variables() else dict(e.terms).get(var, 0)


def device_loop(nest: Sequence[Loop], k: FusedKernel, launches: Sequence[Launch]
                ) -> tuple[DeviceLoop, Launch] | str:
    """The device loop that runs host loop nest `nest` (outermost first; the innermost's body
    is exactly the launches `launches`, megakernel `k`'s members) inside `k`, and `k`'s one
    launch that replaces the nest (the arguments of the first iteration); or why not (a
    sentence). Every argument must step by a constant per iteration of each loop (pointers in
    one buffer, integers), grid, block and shared memory must not change, and the loops'
    bounds must be constants."""
    levels = []
    for loop in nest:
        if loop.opaque or not loop.lo.is_const or not loop.hi.is_const:
            return f"the bounds of its loop over `{loop.var}` are not constants"
        levels.append(len(range(loop.lo.const, loop.hi.const, loop.step)))
    trips = prod(levels)
    if trips < 2:
        return f"it runs {trips} time(s)"
    strides = []
    for mi, launch in enumerate(launches):
        for lv, loop in enumerate(nest):
            var = loop.var
            if any(var in e.variables() for e in (*launch.grid, *launch.block, launch.smem)):
                return f"the grid, block or shared memory of {launch.kernel} changes with {var}"
            for j, a in enumerate(launch.args):
                if isinstance(a, BufferArg) and not isinstance(a.address, DevRef):
                    return f"{launch.kernel} takes a rotating (ping-pong) address"
                e = a.address.offset if isinstance(a, BufferArg) else \
                    a.value if isinstance(a, ScalarArg) and isinstance(a.value, Expr) else None
                if e is None:
                    continue
                c = _step(e, var)
                if c is None:
                    return (f"argument {j} of {launch.kernel} ({e}) is not {var} times a "
                            "constant plus the rest")
                if c and isinstance(a, ScalarArg) and not a.type.startswith("i"):
                    return (f"argument {j} of {launch.kernel} is a {a.type} that changes "
                            f"with {var}")
                if c:
                    strides.append((mi, j, c * loop.step, lv))
    first = k.launch(launches)
    env = {loop.var: loop.lo for loop in nest}

    def at_first(a):
        if isinstance(a, BufferArg):
            return BufferArg(DevRef(a.address.buffer, a.address.offset.substitute(env)))
        if isinstance(a, ScalarArg) and isinstance(a.value, Expr):
            return ScalarArg(a.type, a.value.substitute(env))
        return a

    return (DeviceLoop(trips, tuple(strides), tuple(levels) if len(levels) > 1 else ()),
            Launch(first.kernel, first.mangled, first.grid, first.block, first.smem,
                   tuple(at_first(a) for a in first.args), nest[0].loc or first.loc,
                   first.prepare))
