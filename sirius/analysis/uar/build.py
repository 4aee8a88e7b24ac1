"""The unified abstract representation (UAR): one dependence graph over the whole program.

Nodes are the statements of the host program (launches, copies, memsets, syncs; a statement in
host loops stands for all its iterations, `S3[l, t]`). Edges are dependences between statement
instances: RAW, WAR and WAW on a buffer (`dependences.py`, with their widths from `widths.py`),
and CTRL edges: a sync is ordered after the statements since the previous sync of its body and
before those up to the next one, and the device-to-host copies inside an opaque loop (whose
trip count depends on the data they bring back) before every later statement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import islpy as isl
import networkx as nx

from sirius.analysis import islutil
from sirius.analysis.host.model import Copy, HostProgram, Launch, Loop, Memset, Sync
from sirius.analysis.irview import ModuleView
from sirius.analysis.kernel.access import KernelAnalyzer
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.uar.dependences import Dependence, DependenceFinder, order_map
from sirius.analysis.uar.effects import (
    Effect,
    EffectBuilder,
    LaunchEffects,
    Statement,
    host_domain,
    walk,
)


@dataclass(frozen=True, slots=True)
class UAR:
    program: HostProgram
    statements: tuple[Statement, ...]
    dependences: tuple[Dependence, ...]
    effects: dict[str, tuple[Effect, ...]]  # statement id -> effects
    launch_effects: tuple[LaunchEffects, ...]  # in host_program.launches() order
    graph: nx.MultiDiGraph  # frozen; nodes are statement ids, edge data {"dep": Dependence}
    warnings: tuple[str, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    # buffers and module globals whose address may be stored in memory (uar/pointsto.py): a
    # pointer loaded from memory may reach them, so they must keep their identity
    escaped: frozenset[str] = frozenset()

    def statement(self, sid: str) -> Statement:
        return self.statements[int(sid[1:])]

    def exactness(self) -> tuple[int, int]:
        """(exact, total) static accesses over every launch statement."""
        return (sum(e.exact for e in self.launch_effects),
                sum(e.accesses for e in self.launch_effects))


def statements_of(program: HostProgram) -> list[Statement]:
    out = []
    launch_index = 0
    for op, loops, pos in walk(program):
        kind = {Launch: "launch", Copy: "copy", Memset: "memset", Sync: "sync"}[type(op)]
        sid = f"S{len(out)}"
        names = [lp.var for lp in loops]
        params = sorted(set().union(*(lp.lo.variables() | (lp.hi.variables() if lp.hi else set())
                                      for lp in loops)) - set(names)) if loops else []
        head = f"[{', '.join(params)}] -> " if params else ""
        domain = isl.Set(f"{head}{{ {sid}[{', '.join(names)}] : {host_domain(loops)} }}")
        li = None
        if kind == "launch":
            li, launch_index = launch_index, launch_index + 1
        out.append(Statement(sid, kind, op, loops, pos, domain, li, op.loc))
    return out


def build_uar(view: ModuleView, infos: list[KernelInfo], program: HostProgram,
              kernels: KernelAnalyzer | None = None) -> UAR:
    t0 = time.perf_counter()
    kernels = kernels or KernelAnalyzer(view, infos)
    builder = EffectBuilder(program, kernels)
    stmts = statements_of(program)
    effects: dict[str, tuple[Effect, ...]] = {}
    launch_effects: list[LaunchEffects] = []
    for st in stmts:
        if st.kind == "launch":
            effects[st.id], le = builder.launch(st)
            launch_effects.append(le)
        else:
            effects[st.id] = builder.finish(st, builder.host_op(st))
    t1 = time.perf_counter()
    summaries = {st.id: launch_effects[st.launch_index].summary for st in stmts
                 if st.launch_index is not None}
    deps = DependenceFinder(stmts, effects, summaries, kernels.widths,
                            kernels.dependences).run()
    t2 = time.perf_counter()
    deps += _control_dependences(program, stmts)
    g = nx.MultiDiGraph()
    for st in stmts:
        g.add_node(st.id, statement=st)
    for d in deps:
        g.add_edge(d.src, d.dst, dep=d)
    seconds = {"effects": t1 - t0, "dependences": t2 - t1}
    return UAR(program, tuple(stmts), tuple(deps), effects, tuple(launch_effects), nx.freeze(g),
               tuple(dict.fromkeys(builder.warnings)), seconds, builder.points.escaped())


# control dependences ----------------------------------------------------------------------------
def _control_dependences(program: HostProgram, stmts: list[Statement]) -> list[Dependence]:
    by_op = {id(st.op): st for st in stmts}
    out: list[Dependence] = []

    def members(op) -> list[Statement]:
        if isinstance(op, Loop):
            return [st for o in op.body for st in members(o)]
        st = by_op.get(id(op))
        return [st] if st is not None else []

    def edge(a: Statement, b: Statement) -> None:
        order = order_map(a, b)
        if order is None:
            return
        rel = order.intersect_domain(a.domain).intersect_range(_primed(b.domain))
        if not rel.is_empty():
            out.append(Dependence(a.id, b.id, "CTRL", None, rel.coalesce(), "GLOBAL", True))

    def body(ops, loop: Loop | None) -> None:
        syncs = [i for i, op in enumerate(ops) if isinstance(op, Sync)]
        for n, i in enumerate(syncs):
            y = by_op[id(ops[i])]
            lo = syncs[n - 1] + 1 if n else 0
            hi = syncs[n + 1] if n + 1 < len(syncs) else len(ops)
            for op in ops[lo:i]:
                for x in members(op):
                    edge(x, y)
            for op in ops[i + 1:hi]:
                for x in members(op):
                    edge(y, x)
        if loop is not None and syncs:  # the last sync orders the next iteration's start
            y = by_op[id(ops[syncs[-1]])]
            for op in ops[:syncs[0]]:
                for x in members(op):
                    edge(y, x)
        for i, op in enumerate(ops):
            if isinstance(op, Loop):
                body(op.body, op)
                if op.opaque:
                    _opaque(op, ops[i + 1:])

    def _opaque(lp: Loop, after) -> None:
        deciders = [st for st in members(lp) if isinstance(st.op, Copy) and st.op.kind == "D2H"]
        later = [st for st in members(lp)] + [st for op in after for st in members(op)]
        for c in deciders:
            for x in later:
                edge(c, x)

    body(program.ops, None)
    seen: set[tuple[str, str]] = set()
    unique = []
    for d in out:
        if (d.src, d.dst) not in seen:
            seen.add((d.src, d.dst))
            unique.append(d)
    return unique


def _primed(dom: isl.Set) -> isl.Set:
    return islutil.primed(dom, "set")
