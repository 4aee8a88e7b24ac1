"""Control flow of a kernel under one launch configuration: loop dimensions and block domains.

Each block gets a domain, the instances `[bx, by, bz, tx, ty, tz, <loop dims>]` that may execute
it (host loop variables are parameters). Blocks are visited in reverse post-order; a block that
post-dominates its immediate dominator (in the same loop) has its dominator's domain, any other
the union of its predecessors' domains restricted by the branch conditions. A loop header adds
its dimension `v`: the value of an affine induction variable named after its source variable
(`k`, `k_2`; a synthetic `_iN` counter when there is none), with `v >= start`,
`v = start (mod step)`, and no earlier iteration that failed the back-edge test. Dimensions of
loops a block is not in are 0. A block whose domain used a condition sirius cannot express is
marked inexact (its accesses are may-accesses), with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.cfg import FunctionCFG, NaturalLoop
from sirius.analysis.expr import Expr
from sirius.analysis.irview import Block, Function, Instr, ModuleView
from sirius.analysis.kernel.affine import (
    MAX_PIECES,
    THREAD_DIMS,
    Binding,
    Cond,
    Piece,
    Space,
    Val,
    ValueEval,
    collapse,
    same,
    unknown,
)
from sirius.analysis.kernel.facts import KernelInfo


@dataclass(frozen=True, slots=True)
class LoopDim:
    name: str
    header: str
    start: Expr | None  # None: the dimension counts iterations from 0
    step: int
    exact: bool
    line: int | None


@dataclass
class _Loop:
    nl: NaturalLoop
    dim: str
    phi: Instr | None
    depth: int


class ControlFlow:
    """Loop dimensions and block domains; subclassed by the access collector."""

    def __init__(self, view: ModuleView, info: KernelInfo, fn: Function, cfg: FunctionCFG,
                 binding: Binding):
        self.view, self.info, self.fn, self.cfg, self.binding = view, info, fn, cfg, binding
        self.warnings: list[str] = []
        self._busy_phis: set[Instr] = set()  # header phis whose value is being worked out
        self.loops = self._name_loops()
        params = [f"_p_{p.name}" for p in info.params]
        host = binding.host_vars()
        symbolic = [n for i, (n, p) in enumerate(zip(params, info.params, strict=False))
                    if p.ir_type.startswith("i") and p.ir_type != "i1"
                    and (i >= len(binding.scalars) or binding.scalars[i] is None)]
        self.space = Space(list(THREAD_DIMS) + [lp.dim for lp in self.loops.values()],
                           host + [p for p in symbolic if p not in host])
        self.ev = ValueEval(fn, binding, self.space, view.struct_bodies, view.global_texts,
                            view.loc, params)
        self.ev.phi_pieces = self._phi_pieces
        self.dom: dict[Block, isl.Set] = {}
        self.exact: dict[Block, str] = {}  # block -> "" when its domain is exact, else a reason
        self.loop_dims: list[LoopDim] = []

    # loops ------------------------------------------------------------------------------------
    def _innermost(self, b: Block) -> NaturalLoop | None:
        best = None
        for lp in self.cfg.loops.values():
            if b in lp.blocks and (best is None or len(lp.blocks) < len(best.blocks)):
                best = lp
        return best

    def _name_loops(self) -> dict[Block, _Loop]:
        used = set(THREAD_DIMS) | set(self.binding.host_vars())
        out: dict[Block, _Loop] = {}
        order = sorted(self.cfg.loops.values(), key=lambda lp: self.fn.blocks.index(lp.header))
        for n, nl in enumerate(order):
            phi = self._iv_candidate(nl)
            name = self.fn.var_names.get(phi.name, "") if phi is not None else ""
            name = name if re.fullmatch(r"[A-Za-z]\w*", name) else f"_i{n}"
            base, k = name, 2
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            depth, p = 0, nl.parent
            while p is not None:
                depth, p = depth + 1, p.parent
            out[nl.header] = _Loop(nl, name, phi, depth)
        return out

    def _iv_candidate(self, nl: NaturalLoop) -> Instr | None:
        best = None
        for ins in nl.header.instrs:
            if ins.opcode != "phi" or not ins.type.startswith("i") or ins.type == "i1":
                continue
            latch = [v for v, b in zip(ins.operands, ins.incoming, strict=False) if b in nl.blocks]
            if len(latch) != 1 or not _chain_from(ins, latch[0]):
                continue
            if self.fn.var_names.get(ins.name):
                return ins
            best = best or ins
        return best

    def _step(self, phi: Instr, v, depth: int = 0) -> int | None:
        """The constant a loop-carried value adds to `phi` per iteration."""
        if v is phi:
            return 0
        if not isinstance(v, Instr) or depth > 8:
            return None
        ops = v.operands
        if v.opcode in ("add", "sub", "or") and (v.opcode != "or" or " disjoint " in v.text):
            for i, (x, y) in enumerate(((ops[0], ops[1]), (ops[1], ops[0]))):
                if v.opcode == "sub" and i == 1:
                    break
                inner = self._step(phi, x, depth + 1)
                c = self.ev.value(y).single()
                if inner is not None and c is not None and c.is_const:
                    return inner + (c.const if v.opcode != "sub" else -c.const)
            return None
        if v.opcode == "getelementptr":
            inner = self._step(phi, ops[0], depth + 1)
            off = self.ev._gep_offset(v.source_type, [self.ev.value(o) for o in ops[1:]])
            c = off.single()
            return inner + c.const if inner is not None and c is not None and c.is_const else None
        if v.opcode in ("sext", "zext", "trunc", "freeze"):
            return self._step(phi, ops[0], depth + 1)
        return None

    def _enter_loop(self, lp: _Loop, entry: isl.Set) -> isl.Set:
        """Bind the loop's header phis and return the header's domain."""
        nl, dim, sp = lp.nl, lp.dim, self.space
        v = Expr.var(dim)
        start = step = None
        if lp.phi is not None:
            s = self._incoming(lp.phi, outside=nl)
            start = s.single() if s is not None else None
            step = self._step(lp.phi, self._incoming_value(lp.phi, inside=nl))
        if start is None or not step:  # the dimension counts iterations
            start, step, counter = Expr(0), 1, True
        else:
            counter = False
        exact, reason = True, ""
        for ins in nl.header.instrs:
            if ins.opcode != "phi":
                break
            self.ev.loop_value[ins] = self._header_phi(ins, nl, v, start, step)
        if not counter:
            self.ev.loop_value[lp.phi] = Val((Piece(None, v),))
        lo = f"{dim} >= {start}" if step > 0 else f"{dim} <= {start}"
        iters = sp.set(f"{lo} and ({dim} - ({start})) mod {abs(step)} = 0")
        back = sp.empty
        for latch in nl.latches:
            c = self._edge_cond(latch, nl.header)
            back = back.union(c.may)
            if not c.exact:
                exact, reason = False, reason or f"loop exit test not affine ({c.reason})"
        # an iteration exists when no earlier iteration left the loop at its back edge
        last = iters.subtract(back)
        dom = islutil.free(entry, [dim]).intersect(iters).subtract(last.apply(sp.later(dim, step)))
        dom = dom.coalesce()
        line = self.view.loc(nl.header.terminator)
        self.loop_dims.append(LoopDim(dim, nl.header.name, None if counter else start,
                                      step, exact, line.line if line else None))
        if not exact:
            self.exact[nl.header] = reason
        return dom

    def _incoming(self, phi: Instr, outside: NaturalLoop) -> Val | None:
        vals = [self.ev.value(v) for v, b in zip(phi.operands, phi.incoming, strict=False)
                if b not in outside.blocks]
        first = vals[0] if vals else None
        if first is None or any(not same(v, first) for v in vals[1:]):
            return None
        return first

    def _incoming_value(self, phi: Instr, inside: NaturalLoop):
        pairs = zip(phi.operands, phi.incoming, strict=True)
        return next(v for v, b in pairs if b in inside.blocks)

    def _header_phi(self, phi: Instr, nl: NaturalLoop, v: Expr, start0: Expr, step0: int) -> Val:
        """A header phi as start + step * (iterations so far), the iterations being
        (v - start0) / step0 for the loop dimension v."""
        start = self._incoming(phi, outside=nl)
        latch = [x for x, b in zip(phi.operands, phi.incoming, strict=False) if b in nl.blocks]
        if start is None or not start.known or len(latch) != 1:
            return unknown(f"loop-carried value {phi.name}")
        step = self._step(phi, latch[0])
        if step is None:
            # the back-edge value may be computed from this phi (`h >>= 1`); `_phi_pieces`
            # ends that recursion
            return self._two_valued(phi, nl, start, latch[0], v, start0, step0)
        done = v - start0 if step0 > 0 else start0 - v
        k = abs(step0)
        delta = done.scale(step // k) if step % k == 0 else done.floordiv(k).scale(step)
        return Val(tuple(Piece(p.cond, None if p.expr is None else p.expr + delta, p.base)
                         for p in start.pieces), start.exact, start.reason)

    def _two_valued(self, phi: Instr, nl: NaturalLoop, start: Val, latch, v: Expr,
                     start0: Expr, step0: int) -> Val:
        """A header phi whose back-edge value does not change in the loop: `start` in the
        first iteration, that value in the others (LLVM writes two-iteration loops so)."""
        later = self.ev.value(latch)
        inner = {lp.dim for lp in self.loops.values() if lp.nl.header in nl.blocks}
        if not later.known or any(p.expr is None or p.expr.variables() & inner
                                  for p in later.pieces) or isinstance(latch, Instr) \
                and latch.opcode == "phi" and latch.block is nl.header:
            return unknown(f"loop-carried value {phi.name} is not an induction variable")
        first = self.space.set(f"{v} = {start0}")
        rest = self.space.universe.subtract(first)
        pieces = [Piece(_meet(first, p.cond), p.expr, p.base) for p in start.pieces]
        pieces += [Piece(_meet(rest, p.cond), p.expr, p.base) for p in later.pieces]
        return Val(tuple(pieces), start.exact and later.exact, start.reason or later.reason)

    # domains ----------------------------------------------------------------------------------
    def _edge_cond(self, p: Block, s: Block) -> Cond:
        term = p.terminator
        sp = self.space
        if term.opcode == "br" and len(term.operands) == 3:
            t, f = term.successors()
            if t is f:
                return Cond(sp.universe)
            c = self._checked(self.ev.cond(term.operands[0]), p)
            return c if s is t else self.ev.negate(c)
        if term.opcode == "switch":
            x = self.ev.value(term.operands[0]).single()
            try:
                # (value, destination): the values are not operands (LLVM 22, irvalues.py)
                cases = term.switch_cases()
            except ValueError:
                cases = None
            if x is None or cases is None:
                return Cond(sp.universe, False, "switch on an unknown value")
            hit = [sp.set(f"{x} = {c}") for c, _ in cases]
            mine = [h for h, (_, dst) in zip(hit, cases, strict=False) if dst is s]
            may = sp.empty
            for h in mine:
                may = may.union(h)
            if term.operands[1] is s:
                rest = sp.universe
                for h in hit:
                    rest = rest.subtract(h)
                may = may.union(rest)
            return Cond(may.coalesce())
        return Cond(sp.universe)

    def _allowed(self, b: Block) -> set[str]:
        dims = {lp.dim for lp in self.loops.values() if b in lp.nl.blocks}
        return set(THREAD_DIMS) | dims

    def _checked(self, c: Cond, b: Block) -> Cond:
        bad = [lp.dim for lp in self.loops.values() if b not in lp.nl.blocks]
        if islutil.involves(c.may, bad):
            return Cond(self.space.universe, False, "a value computed in a loop used after it")
        return c

    def _edge_domain(self, p: Block, s: Block) -> tuple[isl.Set, str]:
        c = self._edge_cond(p, s)
        d = self.dom[p].intersect(c.may)
        left = [lp.dim for lp in self.loops.values() if p in lp.nl.blocks
                and s not in lp.nl.blocks]
        if left:
            d = islutil.forget(d, left)
        reason = self.exact.get(p, "") or ("" if c.exact else c.reason or "branch not affine")
        return d, reason

    def _phi_pieces(self, phi: Instr) -> Val:
        if phi in self._busy_phis:  # its value feeds back into itself (a loop's header phi)
            return unknown(f"loop-carried value {phi.name} depends on itself")
        self._busy_phis.add(phi)
        try:
            return self._phi_pieces_of(phi)
        finally:
            self._busy_phis.discard(phi)

    def _phi_pieces_of(self, phi: Instr) -> Val:
        b = phi.block
        allowed = self._allowed(b) | set(self.space.params)
        pieces: list[Piece] = []
        exact, reasons = True, []
        vals = [self.ev.value(v) for v in phi.operands]
        if all(same(v, vals[0]) for v in vals[1:]):
            return vals[0]
        for v, p in zip(vals, phi.incoming, strict=False):
            if p not in self.dom:
                return unknown("phi evaluated before its predecessors")
            if not v.known:
                return v
            d, reason = self._edge_domain(p, b)
            if d.is_empty():
                continue
            for pc in v.pieces:
                if pc.expr is not None and not pc.expr.variables() <= allowed:
                    return unknown(f"value of {phi.name} computed in a loop used after it")
                cond = d if pc.cond is None else d.intersect(pc.cond)
                if not cond.is_empty():
                    pieces.append(Piece(cond, pc.expr, pc.base))
            exact = exact and v.exact and not reason
            reasons += [r for r in (v.reason, reason) if r]
        if len(pieces) > MAX_PIECES:
            return collapse(vals, f"too many cases in phi {phi.name}")
        return Val(tuple(pieces), exact, "; ".join(reasons))

    def _rpo(self) -> list[Block]:
        seen: set[Block] = set()
        order: list[Block] = []

        def visit(b: Block) -> None:
            seen.add(b)
            for s in b.succs:
                if s not in seen and not self.cfg.dominates(s, b):
                    visit(s)
            order.append(b)

        visit(self.fn.entry)
        return order[::-1]

    def _postdominates(self, a: Block, b: Block) -> bool:
        x = b
        for _ in range(len(self.fn.blocks) + 1):
            if x is a:
                return True
            nxt = self.cfg.ipdom.get(x)
            if nxt is None or nxt is x:
                return False
            x = nxt
        return False

    def _domains(self, order: list[Block]) -> None:
        g, blk = self.binding.grid, self.binding.block
        sizes = (*g, *blk)
        base = " and ".join(f"0 <= {d} < {e}" for d, e in zip(THREAD_DIMS, sizes, strict=True))
        loop_dims = [lp.dim for lp in self.loops.values()]
        base += "".join(f" and {d} = 0" for d in loop_dims)
        for b in order:
            if b is self.fn.entry:
                self.dom[b] = self.space.set(base)
                continue
            idom = self.cfg.idom.get(b)
            lp = self.loops.get(b)
            if lp is None and idom is not None and idom in self.dom and \
                    self._innermost(idom) is self._innermost(b) and self._postdominates(b, idom):
                self.dom[b] = self.dom[idom]
                if self.exact.get(idom):
                    self.exact[b] = self.exact[idom]
                continue
            d, reasons = self.space.empty, []
            for p in self.cfg.preds[b]:
                if p not in self.dom or (lp is not None and p in lp.nl.blocks):
                    continue
                pd, reason = self._edge_domain(p, b)
                if not pd.is_empty():
                    d = d.union(pd)
                    reasons += [reason] if reason else []
            d = d.coalesce()
            if reasons:
                self.exact[b] = reasons[0]
            if lp is not None:
                d = self._enter_loop(lp, d)
            self.dom[b] = d


def _meet(a: isl.Set, b: isl.Set | None) -> isl.Set:
    return a if b is None else a.intersect(b)


def _chain_from(phi: Instr, v, depth: int = 0) -> bool:
    if v is phi:
        return True
    if not isinstance(v, Instr) or depth > 8:
        return False
    if v.opcode in ("add", "sub", "or", "getelementptr", "sext", "zext", "trunc", "freeze"):
        return _chain_from(phi, v.operands[0], depth + 1) or (
            v.opcode == "add" and _chain_from(phi, v.operands[1], depth + 1))
    return False
