"""Launch-level dead-code and common-subexpression elimination (issue 14, item 8): launches whose
results nothing observes are removed, and a launch that repeats an earlier identical launch on
identical inputs runs once. A host-program rewrite before storage splitting and planning, so
that fusion sees only the launches that matter (the UAR is rebuilt after it).

**Dead launches.** A launch L is removed when no dependence of kind RAW leaves it: no later
operation (launch, copy in any direction, memset reading nothing, so: launch or copy) may read a
byte L may write, in this iteration or a later one of any host loop around it, L itself included
(the UAR's memory-based dependences over-approximate the reads, so a RAW that exists in fact is
never missed). The program's end observes what it copies back, and those copies are operations
with their RAW dependences; a program that copies nothing back leaves every buffer as its result,
and then no launch is dead. A kernel that may act otherwise than through memory (a call to a
device function that is not inlined, `printf` and `assert` among them, inline asm) is kept.

**Repeated launches.** A launch L2 is removed when an earlier launch L1 of the same host body
(same enclosing loops, so the same iteration) is the same launch (kernel, grid, block, dynamic
shared memory and every argument equal, as expressions) and re-running it cannot change
anything:

- no operation between them (in that body; a nested loop in between refuses) may write a byte
  that L1 may read (L2 would read other inputs) or that L1 may write (L2 would overwrite the
  newer value): checked on the UAR's WAR and WAW dependences from L1, restricted to the same
  iteration;
- L1 may not read a byte it may write (over all its instances: then L2 would read L1's results,
  as `x += 1` does), checked on the byte ranges of its effects per buffer; atomics read and
  write, so they refuse too;
- the kernel has no effect other than through memory (as above).

Then L2 computes from the same inputs the same values into the same bytes as L1 did, and those
bytes still hold them: removing it changes nothing. Each removal is a `Pruned` record with the
reason, shown in report.md ("Launches removed") and plan.json (`"pruned"`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from sirius.analysis.host.model import Copy, HostProgram, Loop, Op
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.effects import READ, WRITE, Statement, walk
from sirius.diagnostics import Location


@dataclass(frozen=True, slots=True)
class Pruned:
    """One launch removed: `kind` dead | repeated; `same_as`: the earlier launch it repeats."""

    statement: str
    kernel: str
    loc: Location | None
    kind: str
    reason: str
    same_as: str | None = None

    def to_json(self) -> dict:
        return {"statement": self.statement, "kernel": self.kernel,
                "loc": str(self.loc) if self.loc else None, "kind": self.kind,
                "same_as": self.same_as, "reason": self.reason}

    def __str__(self) -> str:
        where = f" ({self.loc})" if self.loc else ""
        return f"{self.statement} {self.kernel}{where}: removed, {self.reason}"


@dataclass(frozen=True, slots=True)
class PruneResult:
    host: HostProgram  # the input itself when nothing was removed
    pruned: tuple[Pruned, ...]


def prune_launches(host: HostProgram, uar: UAR, kernels: Sequence[KernelInfo]
                   ) -> PruneResult:
    """`host` without its dead and repeated launches (see the module doc); `uar` must be built
    on `host`."""
    infos = {k.mangled: k for k in kernels}
    launches = [st for st in uar.statements if st.kind == "launch"]
    gone: dict[int, Pruned] = {}  # id(op) -> record
    copies_back = any(isinstance(op, Copy) and op.kind == "D2H" for op, _, _ in walk(host))
    raw_from = {d.src for d in uar.dependences if d.kind == "RAW"}
    for st in launches:
        if not pure_launch(st, infos):
            continue
        if copies_back and st.id not in raw_from:
            gone[id(st.op)] = Pruned(st.id, st.label, st.loc, "dead",
                                     "dead: nothing reads what it writes (no later launch or "
                                     "copy, in any iteration, may read a byte of it)")
    index = _Index(uar)
    earlier: dict[tuple, list[Statement]] = {}  # (body, launch without loc) -> launches so far
    for st in launches:
        key = (_body(st), dataclasses.replace(st.op, loc=None))
        seen = earlier.setdefault(key, [])
        if id(st.op) in gone or not pure_launch(st, infos):
            seen.append(st)
            continue
        first = next((f for f in seen if id(f.op) not in gone
                      and index.untouched_between(f, st) and not _reads_own_writes(f, uar)),
                     None)
        seen.append(st)
        if first is not None:
            gone[id(st.op)] = Pruned(st.id, st.label, st.loc, "repeated",
                                     f"repeats {first.id} on the same inputs (nothing in "
                                     "between changes what it reads or writes, and it does not "
                                     "read what it writes)", first.id)
    if not gone:
        return PruneResult(host, ())
    ops = _without(host.ops, set(gone))
    order = {st.id: i for i, st in enumerate(uar.statements)}
    return PruneResult(dataclasses.replace(host, ops=ops),
                       tuple(sorted(gone.values(), key=lambda p: order[p.statement])))


def pure_launch(st: Statement, infos: dict[str, KernelInfo]) -> bool:
    """Whether the launch acts only through memory: no call that stayed a call (printf, assert,
    any device function not inlined), no inline asm."""
    info = infos.get(st.op.mangled)  # type: ignore[union-attr]
    return info is not None and not info.calls and not info.inline_asm \
        and not info.indirect_calls


def _body(st: Statement) -> tuple:
    """Which host body (and so which iteration of the loops around it) `st` sits in."""
    return st.position[:-1], tuple(id(lp) for lp in st.loops)


class _Index:
    """The UAR's statements by host body and its dependences by source, for the repeat
    check."""

    def __init__(self, uar: UAR):
        self.uar = uar
        self.deps_from: dict[str, list] = {}
        for d in uar.dependences:
            if d.kind in ("WAR", "WAW"):
                self.deps_from.setdefault(d.src, []).append(d)
        self.by_id = {st.id: st for st in uar.statements}
        self.loops_before: dict[int, list[int]] = {}  # id(body) -> loops among its first k ops

    def _loops_between(self, body: Sequence, lo: int, hi: int) -> bool:
        prefix = self.loops_before.get(id(body))
        if prefix is None:
            prefix = [0]
            for op in body:
                prefix.append(prefix[-1] + isinstance(op, Loop))
            self.loops_before[id(body)] = prefix
        return prefix[max(hi, lo + 1)] > prefix[lo + 1]

    def untouched_between(self, a: Statement, b: Statement) -> bool:
        """No operation between a and b in their body writes a byte a may read or write (WAR
        and WAW from a, same iteration); no loop between them."""
        body = a.loops[-1].body if a.loops else self.uar.program.ops
        lo, hi = a.position[-1], b.position[-1]
        if self._loops_between(body, lo, hi):
            return False
        where = _body(a)
        depth = len(a.loops)
        for d in self.deps_from.get(a.id, ()):
            dst = self.by_id.get(d.dst)
            if dst is None or _body(dst) != where or not lo < dst.position[-1] < hi:
                continue
            if not d.relation.intersect(_same_iteration(d.relation, depth)).is_empty():
                return False
        return True


def _same_iteration(like: isl.Map, depth: int) -> isl.Map:
    space = like.get_space()
    same = isl.Map.universe(space)
    for k in range(depth):
        same = same.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    return same


def _reads_own_writes(st: Statement, uar: UAR) -> bool:
    """Whether some byte `st` may read is one it may write (any instances, any buffer; an
    atomic access counts as both)."""
    reads: dict[str, isl.Set] = {}
    writes: dict[str, isl.Set] = {}
    for e in uar.effects.get(st.id, ()):
        if e.atomic:
            return True
        into = reads if e.mode == READ else writes if e.mode == WRITE else None
        if into is None:
            return True
        rng = e.relation.range()
        into[e.buffer] = into[e.buffer].union(rng) if e.buffer in into else rng
    for buf, w in writes.items():
        r = reads.get(buf)
        if r is None:
            continue
        try:
            if not r.intersect(w).is_empty():
                return True
        except isl.Error:  # relations isl cannot intersect: assume the worst
            return True
    return False


def _without(ops: tuple[Op, ...], gone: set[int]) -> tuple[Op, ...]:
    out: list[Op] = []
    for op in ops:
        if id(op) in gone:
            continue
        if isinstance(op, Loop):
            op = dataclasses.replace(op, body=_without(op.body, gone))
            if not op.body:
                continue
        out.append(op)
    return tuple(out)


__all__ = ["PruneResult", "Pruned", "prune_launches"]
