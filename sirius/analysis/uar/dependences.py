"""Data dependences between statements, and their widths, computed without quadratic isl work.

For each buffer, the statements touching it are paired (both orders, and a statement with
itself when it sits in a host loop). A pair is skipped without isl when

- the byte ranges of the two effects do not overlap, or
- a statement outside any host loop that lies strictly between the two in program order writes
  every byte of the overlap, exactly (a dense write): then the pair's dependence is implied by
  the two dependences through that statement (S1 -> S' -> S2 covers every conflicting byte), and
  it carries no value (the paper's memory effects, made value-based where that is free).

For the others, the host-level relation (block and thread ids projected out of both effects
first, which is cheap) tells whether a dependence exists. Between two launches, the width needs
the thread-level relation and the tests of `widths.py`; identical launches (the layers of a
model) ask identical questions, answered once (memoised on the text of the two effects). Every
isl question runs under an operation budget (`islutil.bounded`); one that exceeds it gets the
conservative answer (GLOBAL width, no pruning).
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, replace

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.kernel.access import KernelSummary
from sirius.analysis.kernel.affine import THREAD_DIMS
from sirius.analysis.uar.effects import READ, WRITE, Effect, Statement
from sirius.analysis.uar.widths import Width, WidthResult, width_of

KINDS = (("RAW", WRITE, READ), ("WAR", READ, WRITE), ("WAW", WRITE, WRITE))
_UNASKED = object()
BUDGET = 30_000  # isl operations for one question (about 0.1 s); beyond: the safe answer


@dataclass(frozen=True, slots=True)
class Dependence:
    src: str
    dst: str
    kind: str  # RAW | WAR | WAW | CTRL
    buffer: str | None
    relation: isl.Map  # between host iterations: { S1[h] -> S2[h'] }
    width: str  # THREAD | BLOCK | GLOBAL
    exact: bool
    alignment: str | None = None  # identity | linear | bijection
    mapping: isl.Map | None = None  # THREAD: thread -> thread; BLOCK: block -> block
    instances: isl.Map | None = None  # thread-level relation, computed for THREAD/BLOCK only


def order_constraint(a: Statement, b: Statement) -> str | None:
    """isl constraint on a's host variables and b's (primed) for `an instance of a runs before
    one of b`; None when none does."""
    common = 0
    while (common < len(a.loops) and common < len(b.loops)
           and a.position[common] == b.position[common] and a.loops[common] is b.loops[common]):
        common += 1
    options = []
    for k in range(common):
        eq = [f"{v}' = {v}" for v in a.vars[:k]]
        v = a.vars[k]
        eq.append(f"{v}' > {v}" if a.loops[k].step > 0 else f"{v}' < {v}")
        options.append(" and ".join(eq))
    if a is not b and a.position[common] < b.position[common]:
        options.append(" and ".join(f"{v}' = {v}" for v in a.vars[:common]) or "true")
    return " or ".join(f"({o})" for o in options) if options else None


def order_map(a: Statement, b: Statement, threads: bool = False) -> isl.Map | None:
    return _order_map(a, b, order_constraint(a, b), threads)


def _order_map(a: Statement, b: Statement, c: str | None, threads: bool = False
               ) -> isl.Map | None:
    """order_map with `c`, order_constraint(a, b), computed by the caller."""
    if c is None:
        return None
    params = sorted(set(islutil.param_names(a.domain)) | set(islutil.param_names(b.domain)))
    head = f"[{', '.join(params)}] -> " if params else ""
    da = a.dims if threads else a.vars
    db = b.dims if threads else b.vars
    src = ", ".join(da)
    dst = ", ".join(f"{d}'" for d in db)
    return isl.Map(f"{head}{{ {a.id}[{src}] -> {b.id}[{dst}] : {c} }}")


def prime_out(m: isl.Map) -> isl.Map:
    return islutil.primed(m, "out")


class DependenceFinder:
    def __init__(self, stmts: list[Statement], effects: dict[str, tuple[Effect, ...]],
                 summaries: dict[str, KernelSummary],
                 widths: dict[tuple, tuple[WidthResult, isl.Map | None]] | None = None,
                 memo: dict[tuple, tuple] | None = None):
        """`widths`: answers by the question's text (both effects' relations with the statement
        renamed, the order constraint, both kernels' summary keys), shared by the UARs built
        over one device module's summaries (the UAR after storage splitting or sync crossing
        then asks isl only about what changed). A summary key names a kernel, not its body:
        the dict must not be shared across modules. `memo`: each pair's answer by the identity
        of its two effects (launch effects are reused by the next UAR of the module where the
        launch did not change: `EffectBuilder.launch`), their statements and their order."""
        self.stmts = stmts
        self.effects = effects
        self.summaries = summaries
        self._host: dict[int, isl.Map] = {}
        self._range: dict[int, isl.Set] = {}
        self._dense: dict[int, bool] = {}
        self._text: dict[int, str] = {}
        self._widths = {} if widths is None else widths
        self._memo = {} if memo is None else memo

    # cached views of an effect -----------------------------------------------------------------
    def host(self, st: Statement, e: Effect) -> isl.Map:
        got = self._host.get(id(e))
        if got is None:
            drop = THREAD_DIMS if st.kind == "launch" else ()
            got = islutil.set_tuple(islutil.project_out(e.relation, drop), st.id, None)
            self._host[id(e)] = got = got.coalesce()
        return got

    def bytes(self, e: Effect) -> isl.Set:
        got = self._range.get(id(e))
        if got is None:
            self._range[id(e)] = got = islutil.project_out(e.relation.range(),
                                                           []).coalesce()
        return got

    def dense(self, e: Effect) -> bool:
        """Whether the effect writes every byte of its range [lo, hi], exactly."""
        got = self._dense.get(id(e))
        if got is None:
            got = False
            if e.exact and e.box is not None and e.mode == WRITE:
                rng = islutil.project_out(self.bytes(e), islutil.param_names(self.bytes(e)))
                got = _covers_box(str(rng.reset_tuple_id()), e.box)
            self._dense[id(e)] = got
        return got

    # the pairs ---------------------------------------------------------------------------------
    def run(self) -> list[Dependence]:
        by_buffer: dict[str, list[tuple[Statement, Effect]]] = {}
        for st in self.stmts:  # program order
            for e in self.effects[st.id]:
                by_buffer.setdefault(e.buffer, []).append((st, e))
        out: list[Dependence] = []
        for buffer, touching in by_buffer.items():
            killers = [(st.position[0], e.box) for st, e in touching
                       if not st.loops and e.mode == WRITE and self.dense(e)]
            seen: set[tuple[int, int]] = set()
            for i, (w, ew) in enumerate(touching):
                if ew.mode != WRITE:
                    continue
                for j in self._window(touching, i, killers):
                    x, ex = touching[j]
                    for s, es, d, ed in ((w, ew, x, ex), (x, ex, w, ew)):
                        if (id(es), id(ed)) in seen:
                            continue
                        seen.add((id(es), id(ed)))
                        for kind, ms, md in KINDS:
                            if es.mode != ms or ed.mode != md or not _overlap(es, ed):
                                continue
                            if _killed(s, es, d, ed, killers):
                                continue
                            dep = self.dependence(kind, buffer, s, es, d, ed)
                            if dep is not None:
                                out.append(dep)
        out.sort(key=lambda d: (int(d.src[1:]), int(d.dst[1:]), d.kind, d.buffer or ""))
        return out

    @staticmethod
    def _window(touching: list[tuple[Statement, Effect]], i: int,
                killers: list[tuple[int, tuple[int, int]]]) -> list[int]:
        """Indices of the effects a write (touching[i]) may conflict with: going forwards and
        backwards in program order up to the first loop-free dense write that covers its
        bytes (beyond it every pair is killed), and itself (a statement in a loop)."""
        st, e = touching[i]
        covering = set() if e.box is None else \
            {pos for pos, box in killers if box[0] <= e.box[0] and e.box[1] <= box[1]}
        out = [i]
        for rng in (range(i + 1, len(touching)), range(i - 1, -1, -1)):
            for j in rng:
                out.append(j)
                other = touching[j][0]
                if not other.loops and other.position[0] in covering \
                        and other.position[0] != st.position[0]:
                    break
        return out

    def dependence(self, kind: str, buffer: str, s: Statement, es: Effect, d: Statement,
                   ed: Effect) -> Dependence | None:
        # the effects are kept in the entry: their ids are not reused while it lives
        order = order_constraint(s, d)
        key = (kind, buffer, id(es), id(ed), s.id, d.id, order)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is es and hit[1] is ed:
            return hit[2]
        # The same question about a renamed buffer (storage splitting gives a version a buffer
        # of its own, and the UAR is built again): the answer is a function of everything in
        # this key, the buffer's name apart, which the relations below do not mention.
        same = ("renamed", kind, self.canonical(es), self.canonical(ed), es.exact, ed.exact,
                s.id, d.id, s.kind, d.kind, order, self._summary_id(s), self._summary_id(d))
        got = self._memo.get(same, _UNASKED)
        if got is not _UNASKED:
            dep = got if got is None or got.buffer == buffer else \
                replace(got, buffer=buffer)
        else:
            dep = self._dependence(kind, buffer, s, es, d, ed, order)
            self._memo[same] = dep
        self._memo[key] = (es, ed, dep)
        return dep

    def _summary_id(self, st: Statement) -> int | None:
        """The identity of the statement's kernel summary: the analyzer that owns the memo
        keeps every summary it made (hashing the summary's key, a launch binding, cost more
        than the question it saved on paper lstm_large)."""
        summary = self.summaries.get(st.id)
        return None if summary is None else id(summary)

    def _dependence(self, kind: str, buffer: str, s: Statement, es: Effect, d: Statement,
                    ed: Effect, constraint: str | None) -> Dependence | None:
        order = _order_map(s, d, constraint)
        if order is None:
            return None
        rel = self.host(s, es).apply_range(self.host(d, ed).reverse())
        rel = prime_out(rel).intersect(order).coalesce()
        if rel.is_empty():
            return None
        exact = es.exact and ed.exact
        if s.kind != "launch" or d.kind != "launch":
            return Dependence(s.id, d.id, kind, buffer, rel, Width.GLOBAL, exact)
        # Identical launches (the layers of a model) ask identical questions: one answer each.
        key = (self.canonical(es), self.canonical(ed), constraint, self.summaries[s.id].key,
               self.summaries[d.id].key)
        got = self._widths.get(key)
        if got is None:
            got = self._widths[key] = self.width(s, es, d, ed)
        w, full = got
        if full is not None:
            full = islutil.set_tuple(full, s.id, d.id)
        return Dependence(s.id, d.id, kind, buffer, rel, w.width, exact, w.alignment, w.mapping,
                          full)

    def canonical(self, e: Effect) -> str:
        got = self._text.get(id(e))
        if got is None:
            # the buffer renamed too: both effects of a pair are on one buffer, and the
            # question does not depend on which (storage splitting renames buffers)
            self._text[id(e)] = got = str(islutil.set_tuple(e.relation, "S", "B"))
        return got

    def width(self, s: Statement, es: Effect, d: Statement, ed: Effect
              ) -> tuple[WidthResult, isl.Map | None]:
        def exact_width():
            full = es.relation.apply_range(ed.relation.reverse())
            full = prime_out(full).intersect(order_map(s, d, threads=True)).coalesce()
            return width_of(full, s, d, self.summaries[s.id], self.summaries[d.id]), full

        # too hard for isl within the budget: the conservative width
        return islutil.bounded(10 * BUDGET, exact_width, (WidthResult(Width.GLOBAL), None))


def _overlap(x: Effect, y: Effect) -> bool:
    if x.box is None or y.box is None:  # unbounded (effects are never empty): ask isl
        return True
    return x.box[0] <= y.box[1] and y.box[0] <= x.box[1]


def _killed(s: Statement, es: Effect, d: Statement, ed: Effect,
            killers: list[tuple[int, tuple[int, int]]]) -> bool:
    """A dense exact write by a loop-free statement strictly between s and d covers the
    bytes both touch (`killers` is in program order: those between are a slice)."""
    if es.box is None or ed.box is None:
        return False
    lo, hi = max(es.box[0], ed.box[0]), min(es.box[1], ed.box[1])
    a = bisect.bisect_right(killers, s.position[0], key=_position)
    b = bisect.bisect_left(killers, d.position[0], key=_position)
    return any(box[0] <= lo and hi <= box[1] for _, box in killers[a:b])


def _position(killer: tuple[int, tuple[int, int]]) -> int:
    return killer[0]


@functools.lru_cache(maxsize=4096)
def _covers_box(rng: str, box: tuple[int, int]) -> bool:
    """Whether the byte set `rng` (its text) holds every byte of `box`, [lo, hi] inclusive
    (the box is its bounds, so it is then that interval exactly). By the text: a model's layers
    and the UAR rebuilt after storage splitting ask the same question again (paper bert_base:
    746 questions in a fusion; 214 distinct among the first build's 373)."""
    interval = isl.Set(f"{{ [x] : {box[0]} <= x <= {box[1]} }}")
    return islutil.bounded(BUDGET, lambda: interval.is_subset(isl.Set(rng)), False)
