"""Where to fuse: from the UAR to fused-kernel specs and the fused host program (docs/fusion.md).

The planner works on *regions*: maximal runs of consecutive launches in one host body (the top
level or a loop body; any other host op ends a region, so copies, memsets, syncs, allocations
and frees keep their place). Inside a region only the dependences between instances of the
same host iteration matter: a fused launch still runs once per iteration, at the place of its
group, so every dependence that crosses iterations keeps its order.

1. **Local fusion (P1, vertical).** Launches are visited in program order (a BFS over the
   region's dependence DAG); a launch joins the cluster of a predecessor when every dependence
   between the two is THREAD or BLOCK, the contracted graph stays acyclic, and a thread map
   exists under which `alignment.check_group` proves, with isl, that each dependence is met in
   the fused kernel (same fused thread; or same fused block with a barrier before the
   consumer). Maps tried: the block map, the global-linear map (thread-independent kernels) and
   map re-indexing (`alignment.reindex_map`: the consumer evaluated in its producer's threads).
2. **Levels (P2 on a region).** The clusters are levelled ASAP on the contracted DAG. Clusters of
   one level are independent; with the horizontal arrangement they become one kernel whose block
   ranges run them side by side (a cluster of several launches is first built as a vertical
   kernel, then placed as one member: the mixed arrangement).
3. Resource limits (threads, static shared memory) are checked before code generation, and
   registers and spills from ptxas after it (rounds.py); a group that fails is split up again.

Arrangements: `vertical` merges independent launches of a level into the same threads too (no
horizontal kernels); `horizontal` does no vertical merging; `auto` merges along dependences
vertically and independent clusters horizontally.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from math import prod

import islpy as isl
import networkx as nx

from sirius.analysis import islutil
from sirius.analysis.host.model import HostProgram, Launch, Loop, Op
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.dependences import Dependence
from sirius.analysis.uar.effects import READ, WRITE
from sirius.analysis.uar.widths import Width
from sirius.backend.limits import limits_for
from sirius.fusion.geometry import delinearize, member_ids
from sirius.fusion.spec import BLOCK, GLOBAL, Dim3, Member, ThreadMap

ARRANGEMENTS = ("vertical", "horizontal", "auto")


@dataclass(frozen=True, slots=True)
class Options:
    arch: str = "sm_80"
    arrangement: str = "auto"
    split_storage: bool = True
    wavefront: bool = True
    cross_syncs: bool = True  # idle host syncs between launches do not end a run (syncs.py)
    prune: bool = True  # dead and repeated launches are removed (prune.py)
    unroll: int = 64  # host loops of independent launches running at most this many are
    # unrolled so that their iterations can fuse (wavefront.py); 0: never
    megakernel: str | None = None  # "grid": each region's launches become one cooperative
    # kernel with grid-wide barriers (rounds._megakernel_round); "counters": the same kernel,
    # per-block dependence waits instead of the barriers (fusion/waits.py); None: off
    smem: str = "concat"  # vertical kernels: "concat" gives every member its own shared
    # memory; "overlay" lays them over each other, a block barrier before each member that
    # uses shared memory after another did (members.overlay_shared)
    # the model's parameter buffers (names or shell patterns): launches that compute only from
    # them form the one-time prepare part (prepare.py); None: the `sirius import-tvm` sidecar's
    # (resolved by the caller that knows the files, prepare.params_for), else none
    params: tuple[str, ...] | None = None
    params_source: str = "--params"


@dataclass(frozen=True, slots=True)
class Node:
    """One launch of a region."""

    index: int  # position in the region
    sid: str  # statement id in the UAR
    launch: Launch
    grid: Dim3
    block: Dim3
    smem: int
    info: KernelInfo | None
    thread_independent: bool
    static_smem: int

    @property
    def threads(self) -> int:
        return prod(self.block)

    def label(self) -> str:
        return f"{self.sid} {self.launch.kernel}"


@dataclass(slots=True)
class Cluster:
    """Launches run in the same fused threads, in order (vertical); one node: an unfused launch."""

    nodes: list[Node]
    members: list[Member]
    block: Dim3
    reasons: list[str] = field(default_factory=list)  # the dependences that allowed each merge
    name: str = ""

    @property
    def first(self) -> int:
        return self.nodes[0].index

    @property
    def threads(self) -> int:
        return prod(self.block)

    def blocks(self) -> int:
        t = self.threads
        return max(m.blocks_needed(t) or 1 for m in self.members)


@dataclass(slots=True)
class Group:
    """What becomes one launch of the fused program: one cluster, or several side by side."""

    clusters: list[Cluster]
    level: int
    name: str = ""

    @property
    def arrangement(self) -> str:
        if len(self.clusters) > 1:
            return "horizontal" if all(len(c.nodes) == 1 for c in self.clusters) else "mixed"
        return "vertical" if len(self.clusters[0].nodes) > 1 else "single"

    @property
    def nodes(self) -> list[Node]:
        return [n for c in self.clusters for n in c.nodes]


@dataclass(slots=True)
class Region:
    body_key: int  # id() of the first launch op of the run
    nodes: list[Node]
    groups: list[Group] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why neighbours were not fused


# regions ----------------------------------------------------------------------------------------
def regions(host: HostProgram, uar: UAR, kernels: Sequence[KernelInfo]) -> list[Region]:
    by_op = {id(st.op): st for st in uar.statements}
    infos = {k.mangled: k for k in kernels}
    out: list[Region] = []

    def node(i: int, op: Launch) -> Node:
        st = by_op[id(op)]
        le = uar.launch_effects[st.launch_index]
        const = all(e.is_const for e in (*op.grid, *op.block, op.smem))
        grid = tuple(e.const for e in op.grid) if const else (0, 0, 0)
        block = tuple(e.const for e in op.block) if const else (0, 0, 0)
        info = infos.get(op.mangled)
        static = info.static_smem_bytes if info else 0
        return Node(i, st.id, op, grid, block, op.smem.const if const else -1, info,  # type: ignore[arg-type]
                    le.summary.thread_independent, static)

    def body(ops: Sequence[Op]) -> None:
        run: list[Launch] = []

        def close() -> None:
            if run:
                out.append(Region(id(run[0]), [node(i, op) for i, op in enumerate(run)]))
            run.clear()

        for op in ops:
            if isinstance(op, Launch):
                if run and run[-1].prepare != op.prepare:  # the prepare part ends a region
                    close()
                run.append(op)
                continue
            close()
            if isinstance(op, Loop):
                body(op.body)
        close()

    body(host.ops)
    return out


def same_iteration(dep: Dependence, uar: UAR) -> isl.Map | None:
    """The part of `dep.relation` between instances of the same host iteration (None: empty)."""
    a, b = uar.statement(dep.src), uar.statement(dep.dst)
    common = 0
    while common < min(len(a.loops), len(b.loops)) and a.loops[common] is b.loops[common]:
        common += 1
    rel = dep.relation
    if common:
        flat = islutil.flat(rel)
        names = islutil.set_names(flat)
        params = islutil.param_names(flat)
        eqs = " and ".join(f"{v}' = {v}" for v in a.vars[:common])
        head = f"[{', '.join(params)}] -> " if params else ""
        keep = isl.Set(f"{head}{{ [{', '.join(names)}] : {eqs} }}")
        if flat.intersect(keep).is_empty():
            return None
        return rel
    return None if rel.is_empty() else rel


def region_graph(region: Region, uar: UAR) -> nx.DiGraph:
    """Nodes: region positions; edge a -> b (a before b) with the same-iteration dependences."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(region.nodes)))
    pos = {n.sid: n.index for n in region.nodes}
    for dep in uar.dependences:
        a, b = pos.get(dep.src), pos.get(dep.dst)
        if a is None or b is None or a >= b or dep.kind == "CTRL":
            continue
        if same_iteration(dep, uar) is None:
            continue
        if not g.has_edge(a, b):
            g.add_edge(a, b, deps=[])
        g.edges[a, b]["deps"].append(dep)
    return g


# local fusion -----------------------------------------------------------------------------------
def linear_map(producer: Member, fused_threads: int, n: Node) -> ThreadMap | None:
    """The consumer `n` run by the fused thread that runs the producer instance with the same
    global linear thread id (a `linear` THREAD dependence), whatever the producer's map."""
    bx, by, bz, tx, ty, tz = member_ids(producer, fused_threads)
    g, b = producer.grid, producer.block
    blk = (bz.scale(g[1]) + by).scale(g[0]) + bx
    thr = (tz.scale(b[1]) + ty).scale(b[0]) + tx
    lin = blk.scale(prod(b)) + thr
    t = n.threads
    ids = delinearize(lin.floordiv(t), n.grid) + delinearize(lin.mod(t), n.block)
    return ThreadMap.custom(*ids)


def fusable_shape(n: Node) -> bool:
    """A launch the code generator can take: a constant shape (dynamic shared memory included)."""
    return n.smem >= 0 and min(n.grid + n.block) >= 1


def describe(dep: Dependence) -> str:
    align = f" ({dep.alignment})" if dep.alignment else ""
    return f"{dep.src}->{dep.dst} {dep.kind} {dep.buffer} {dep.width}{align}"


class Planner:
    def __init__(self, host: HostProgram, uar: UAR, kernels: Sequence[KernelInfo],
                 options: Options):
        from sirius.fusion.plan import alignment, permutation

        self.kernels = kernels
        self.host = host
        self.uar = uar
        self.opt = options
        self.limits = limits_for(options.arch)
        self.alignment = alignment
        self.permutation = permutation
        self.counter = 0

    def plan(self) -> list[Region]:
        out = regions(self.host, self.uar, self.kernels)
        for r in out:
            self.plan_region(r)
        return out

    # -- one region --
    def plan_region(self, region: Region) -> None:
        g = region_graph(region, self.uar)
        arrangement = self.opt.arrangement
        clusters: list[Cluster] = []
        owner: dict[int, Cluster] = {}
        for n in region.nodes:
            target = None
            if arrangement != "horizontal" and fusable_shape(n):
                target = self._join(n, g, clusters, owner, region)
            if target is None:
                c = Cluster([n], [self._member(n, BLOCK)], (n.threads, 1, 1))
                clusters.append(c)
                owner[n.index] = c
            else:
                owner[n.index] = target
        for c in clusters:
            self._share_barriers(c, g)
        levels = self._levels(g, clusters, owner)
        region.groups = self._groups(clusters, levels, arrangement)

    def _share_barriers(self, c: Cluster, g: nx.DiGraph) -> None:
        """Code motion for fewer block barriers (SIRIUS 5.1, after Darte and Schreiber's barrier
        placement): members that no dependence orders move so that they share barriers. Each
        member goes to the earliest phase its dependences allow, phase(j) = the largest
        phase(i) over the members i it depends on, plus one where that dependence is BLOCK-wide
        (a barrier must separate them); the members then run phase after phase, in program
        order within a phase, with one block barrier before each phase but the first. That is
        the fewest barriers any order of the members needs (the longest chain of BLOCK
        dependences). The members are joined one at a time in program order, so a BLOCK chain
        interleaved with independent members got a barrier each time (A, B | C, D | with
        A -> B and C -> D becomes A, C | B, D). The new order is proven by check_group like
        every join; where it is not, or saves nothing, the cluster stays as it is."""
        before = sum(m.barrier_before for m in c.members[1:])
        if before < 2:
            return
        deps = self._cluster_deps(c, g)
        same_vars = self._vars(c.nodes[-1])
        ranges = [c.blocks()] * len(c.members)
        res = self.alignment.check_group(c.members, c.block, ranges, deps, same_vars)
        if not res.ok:
            return
        phase = [0] * len(c.members)
        for v in sorted(res.verdicts, key=lambda v: v.dst):
            if v.level in ("thread", "block") and v.src < v.dst:
                phase[v.dst] = max(phase[v.dst], phase[v.src] + (v.level == "block"))
        if max(phase) >= before:
            return
        order = sorted(range(len(c.members)), key=lambda k: (phase[k], k))
        at = {k: pos for pos, k in enumerate(order)}
        members = [replace(c.members[k], barrier_before=pos > 0
                           and phase[k] != phase[order[pos - 1]])
                   for pos, k in enumerate(order)]
        moved = [(at[i], at[j], d) for i, j, d in deps]
        check = self.alignment.check_group(members, c.block, ranges, moved, same_vars)
        if not check.ok:
            return
        c.nodes[:] = [c.nodes[k] for k in order]
        c.members[:] = members
        c.reasons.append(f"code motion: {before} -> {max(phase)} block barriers, members "
                         "reordered to share them (" + ", ".join(n.label() for n in c.nodes)
                         + ")")

    def _member(self, n: Node, mapping, barrier: bool = False, blocks: int | None = None) -> Member:
        return Member(n.launch.mangled, n.grid, n.block, max(n.smem, 0), None, barrier, mapping,
                      blocks)

    def _candidates(self, n: Node, c: Cluster, deps: list[tuple[int, int, Dependence]],
                    notes: list[str]):
        """Thread maps to try for `n` joining `c`, most natural first; permutation re-indexing
        last, and only then (its isl work is the largest). With a GLOBAL dependence only the
        permutation is tried (no other map can make it THREAD). Why a permutation was refused
        goes to `notes`."""
        if any(d.width == Width.GLOBAL for _i, _j, d in deps):
            yield from self._permutations(n, c, deps, notes)
            return
        yield from self._plain_candidates(n, c, deps)
        yield from self._permutations(n, c, deps, notes)

    def _permutations(self, n: Node, c: Cluster, deps: list[tuple[int, int, Dependence]],
                      notes: list[str]):
        if not n.thread_independent:
            notes.append("permutation re-indexing: the launch is not thread-independent")
            return
        rng = c.blocks()
        tried: set[tuple[int, str]] = set()
        for i, _j, dep in deps:
            if dep.kind != "RAW" or dep.buffer is None or (i, dep.buffer) in tried:
                continue
            tried.add((i, dep.buffer))
            src, dst = self.uar.statement(dep.src), self.uar.statement(dep.dst)
            w = [e for e in self.uar.effects[src.id] if e.buffer == dep.buffer
                 and e.mode == WRITE]
            r = [e for e in self.uar.effects[dst.id] if e.buffer == dep.buffer
                 and e.mode == READ]
            if len(w) != 1 or len(r) != 1 or src.vars != dst.vars:
                notes.append(f"permutation re-indexing on {dep.buffer}: no single write and "
                             "read effect in one host body")
                continue
            got = self.permutation.permutation_member(
                c.members[i], w[0].relation, r[0].relation, src.vars, c.block, rng,
                self._member(n, BLOCK))
            if got.member is None:
                notes.append(got.reason or "permutation re-indexing failed")
                continue
            yield (f"permutation re-indexed ({got.instances} instance"
                   f"{'s' if got.instances != 1 else ''} per thread)", got.member.mapping)

    def _plain_candidates(self, n: Node, c: Cluster, deps: list[tuple[int, int, Dependence]]):
        out = []
        if n.threads <= c.threads:
            out.append(("block", BLOCK))
        if n.thread_independent:
            out.append(("global", GLOBAL))
            for i, _j, dep in deps:
                if dep.width == Width.THREAD and dep.alignment == "linear" \
                        and not c.members[i].mapping.reps:
                    m = linear_map(c.members[i], c.threads, n)
                    if m is not None:
                        out.append(("linear re-indexed", m))
                if dep.width == Width.THREAD and dep.mapping is not None:
                    try:
                        m = self.alignment.reindex_map(
                            c.members[i], (n.grid, n.block), dep, c.block,
                            same_iteration_vars=self._vars(n))
                    except Exception:  # noqa: BLE001 - any failure: no re-indexed map
                        m = None
                    if m is not None:
                        out.append(("re-indexed", m))
        return out

    def _join(self, n: Node, g: nx.DiGraph, clusters: list[Cluster], owner: dict[int, Cluster],
              region: Region) -> Cluster | None:
        preds = sorted(g.predecessors(n.index), reverse=True)
        tried: list[Cluster] = []
        candidates = [owner[p] for p in preds]
        if self.opt.arrangement == "vertical" and clusters:
            candidates.append(clusters[-1])  # independent launches share threads too
        for c in candidates:
            if any(c is t for t in tried):
                continue
            tried.append(c)
            why = self._try_join(n, c, g, owner)
            if why is None:
                return c
            region.notes.append(f"{n.label()} not fused into the cluster of "
                                f"{c.nodes[0].label()}: {why}")
        return None

    def _try_join(self, n: Node, c: Cluster, g: nx.DiGraph, owner: dict[int, Cluster]
                  ) -> str | None:
        if any(not fusable_shape(m) for m in c.nodes):
            return "a member's launch shape or dynamic shared memory size is not constant"
        members_idx = {m.index: k for k, m in enumerate(c.nodes)}
        deps: list[tuple[int, int, Dependence]] = []
        for p in g.predecessors(n.index):
            if p in members_idx:
                for dep in g.edges[p, n.index]["deps"]:
                    deps.append((members_idx[p], len(c.nodes), dep))
            elif self._reaches(c, owner[p], g, owner):
                return (f"it also depends on {owner[p].nodes[0].label()}, which depends on the "
                        "cluster (merging would make a cycle)")
        # resources before code generation
        smem = sum(m.static_smem for m in c.nodes) + n.static_smem
        if smem > self.limits.max_static_smem_per_block:
            return f"static shared memory {smem} B > {self.limits.max_static_smem_per_block} B"
        if n.threads > self.limits.max_threads_per_block:
            return "block too large"
        all_deps = self._cluster_deps(c, g) + deps
        last = None
        notes: list[str] = []
        for kind, mapping in self._candidates(n, c, deps, notes):
            member = self._member(n, mapping, blocks=self._blocks_of(mapping, c))
            reason = self.alignment.covers_exactly_once(member, c.block,
                                                        self._range(c, member))
            if reason is not None:
                last = f"{kind} map: {reason}"
                continue
            members = c.members + [member]
            ranges = [self._range_all(c, member)] * len(members)
            res = self.alignment.check_group(members, c.block, ranges, all_deps,
                                             self._vars(n))
            if not res.ok and res.needs_barrier_before:
                bar = set(res.needs_barrier_before)
                if bar - {len(c.nodes)} or n.info is None:
                    last = f"{kind} map: {res.reason}"
                    continue
                member = replace(member, barrier_before=True)
                members = c.members + [member]
                res = self.alignment.check_group(members, c.block, ranges, all_deps,
                                                 self._vars(n))
            if res.ok:
                c.nodes.append(n)
                c.members.append(member)
                widths = sorted({f"{d.width}" + (f" ({d.alignment})" if d.alignment else "")
                                 for _i, _j, d in deps}) or ["independent"]
                c.reasons.append(f"{n.label()}: {kind} map, "
                                 f"{'barrier before, ' if member.barrier_before else ''}"
                                 f"dependences {', '.join(widths)}")
                return None
            last = f"{kind} map: {res.reason}"
        glob = [d for _i, _j, d in deps if d.width == Width.GLOBAL]
        if glob:
            return f"GLOBAL dependence {describe(glob[0])}" + \
                "".join(f"; {x}" for x in _distinct(([last] if last else []) + notes))
        if last is None and notes:
            return "no thread map fits (the launch is not thread-independent and its shape " \
                "differs); " + "; ".join(_distinct(notes))
        return last or "no thread map fits (the launch is not thread-independent and its shape "\
            "differs)"

    @staticmethod
    def _blocks_of(mapping: ThreadMap, c: Cluster) -> int | None:
        """A multi-instance map runs in the producer's block range (the cluster's)."""
        return c.blocks() if mapping.reps else None

    def _vars(self, n: Node) -> tuple[str, ...]:
        return self.uar.statement(n.sid).vars

    def _range(self, c: Cluster, member: Member) -> int:
        return member.blocks_needed(c.threads) or c.blocks()

    def _range_all(self, c: Cluster, member: Member) -> int:
        return max(c.blocks(), member.blocks_needed(c.threads) or 1)

    @staticmethod
    def _cluster_deps(c: Cluster, g: nx.DiGraph) -> list[tuple[int, int, Dependence]]:
        """The same-iteration dependences between members of `c` (from the region graph)."""
        out = []
        for i, a in enumerate(c.nodes):
            for j, b in enumerate(c.nodes[i + 1:], i + 1):
                if g.has_edge(a.index, b.index):
                    out += [(i, j, dep) for dep in g.edges[a.index, b.index]["deps"]]
        return out

    def _reaches(self, a: Cluster, b: Cluster, g: nx.DiGraph, owner: dict[int, Cluster]) -> bool:
        """Whether cluster b depends (transitively) on cluster a in the graph of clusters."""
        if a is b:
            return False
        seen = set()
        stack = [n.index for n in a.nodes]
        while stack:
            x = stack.pop()
            for y in g.successors(x):
                if y in seen or y not in owner:
                    continue
                if owner[y] is b:
                    return True
                for z in owner[y].nodes:  # the contracted graph: a cluster is one node
                    if z.index not in seen:
                        seen.add(z.index)
                        stack.append(z.index)
        return False

    # -- levels and horizontal groups --
    def _levels(self, g: nx.DiGraph, clusters: list[Cluster], owner: dict[int, Cluster]
                ) -> dict[int, int]:
        cg = nx.DiGraph()
        ids = {id(c): k for k, c in enumerate(clusters)}
        cg.add_nodes_from(range(len(clusters)))
        for a, b in g.edges:
            ca, cb = ids[id(owner[a])], ids[id(owner[b])]
            if ca != cb:
                cg.add_edge(ca, cb)
        if not nx.is_directed_acyclic_graph(cg):  # cannot happen by construction; stay safe
            raise AssertionError("cluster graph has a cycle")
        level: dict[int, int] = {}
        for k in nx.topological_sort(cg):
            level[k] = max((level[p] + 1 for p in cg.predecessors(k)), default=0)
        return level

    def _groups(self, clusters: list[Cluster], level: dict[int, int], arrangement: str
                ) -> list[Group]:
        by_level: dict[int, list[Cluster]] = {}
        for k, c in enumerate(clusters):
            by_level.setdefault(level[k], []).append(c)
        out = []
        for lv in sorted(by_level):
            cs = sorted(by_level[lv], key=lambda c: c.first)
            if arrangement == "vertical":
                out += [Group([c], lv) for c in cs]
                continue
            fusable = [c for c in cs if all(fusable_shape(n) for n in c.nodes)]
            rest = [c for c in cs if not any(c is f for f in fusable)]
            for part in self._horizontal_parts(fusable):
                out.append(Group(part, lv))
            out += [Group([c], lv) for c in rest]
        out.sort(key=lambda gr: (gr.level, min(c.first for c in gr.clusters)))
        return out

    def _horizontal_parts(self, cs: list[Cluster]) -> list[list[Cluster]]:
        """Clusters of one level split into horizontal kernels: shared memory (overlaid) within
        the static limit; a cluster with barriers runs on whole warps of the fused block."""
        parts: list[list[Cluster]] = []
        for c in cs:
            placed = False
            for p in parts:
                smem = max(sum(n.static_smem for n in x.nodes) for x in p + [c])
                threads = max(x.threads for x in p + [c])
                barriers = any(n.info is None or n.info.barriers for x in p + [c]
                               for n in x.nodes if x.threads < threads)
                if smem <= self.limits.max_static_smem_per_block and not barriers:
                    p.append(c)
                    placed = True
                    break
            if not placed:
                parts.append([c])
        return parts


def _distinct(notes: list[str]) -> list[str]:
    """`notes` without repeats: two notes that differ only in their example instance
    (`e.g. (bx=0, ...)`) say the same thing (one per dependence of the same kind)."""
    seen: dict[str, str] = {}
    for x in notes:
        seen.setdefault(re.sub(r"e\.g\. \([^)]*\)", "e.g.", x), x)
    return list(seen.values())
