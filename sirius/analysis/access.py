"""Access relations and memory effects of a kernel under one launch configuration.

For every load, store and atomic of a kernel (and every call that may touch memory), an isl map
from the instance space `[bx, by, bz, tx, ty, tz, <enclosing loop dims>]` to the byte offset of
the first byte touched, relative to the pointer parameter or shared array it goes through. Host
loop variables that the launch configuration depends on are isl parameters.

Control flow: each block gets a domain, the instances that may execute it. Blocks are visited in
reverse post-order; a block that post-dominates its immediate dominator (in the same loop) has
its dominator's domain, any other the union of its predecessors' domains restricted by the branch
conditions. A loop header adds its dimension: `v >= start`, `v = start (mod step)`, and either
`v = start` or the back-edge condition held one step earlier. A block whose domain used a
condition sirius cannot express is marked inexact (its accesses are may-accesses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.affine import (
    ANY,
    THREAD_DIMS,
    Base,
    Binding,
    Cond,
    Piece,
    Space,
    Val,
    ValueEval,
    same,
    signed,
    space_of_global,
    unknown,
)
from sirius.analysis.expr import Expr
from sirius.analysis.hostcfg import FunctionCFG, NaturalLoop
from sirius.analysis.irtypes import TypeParseError, type_size
from sirius.analysis.irview import Block, Const, Function, Instr, ModuleView
from sirius.analysis.kernels import KernelInfo
from sirius.diagnostics import Location

_ASM_RE = re.compile(
    r'\basm (?:sideeffect |alignstack |inteldialect |unwind )*"([^"]*)", "([^"]*)"')
_ASM_MEMORY_RE = re.compile(r"(?<![\w.])(?:ld|st|atom|red|cp\.async|ldmatrix|stmatrix|prefetch|"
                            r"cp\.reduce|multimem|tex|suld|sust)\b")
_PURE_INTRINSIC_RE = re.compile(
    r"llvm\.(?:nvvm\.(?:read\.ptx|barrier|bar\.|shfl|vote|activemask|match|redux|fence|membar|"
    r"fmax|fmin|fabs|sqrt|rsqrt|rcp|ex2|lg2|sin|cos|mul|add|fma|div|saturate|f2|d2|i2|ui2|ll2|"
    r"ull2|h2|bf2|ff2|float|round|trunc|ceil|floor|abs|clz|popc|brev|prmt|sad|mulhi|isspacep)|"
    r"assume|dbg|lifetime|invariant|experimental\.noalias|expect|"
    r"smin|smax|umin|umax|abs|fma|fmuladd|sqrt|exp|exp2|log|log2|sin|cos|pow|fabs|minnum|maxnum|"
    r"minimum|maximum|copysign|floor|ceil|trunc|rint|nearbyint|round|ctpop|ctlz|cttz|bswap|"
    r"bitreverse|fshl|fshr|[su]add\.sat|[su]sub\.sat|[su]add\.with|[su]mul\.with|"
    r"[su]sub\.with|is\.fpclass|canonicalize|trap|ubsantrap|debugtrap|donothing|ptrmask)")


@dataclass(frozen=True, slots=True)
class LoopDim:
    name: str
    header: str
    start: Expr | None  # None: the dimension counts iterations from 0
    step: int
    exact: bool
    line: int | None


@dataclass(frozen=True, slots=True)
class Access:
    kind: str  # load | store | atomic
    base: Base
    relation: isl.Map  # { [bx, by, bz, tx, ty, tz, loop dims] -> [o] }, o = first byte
    extent: Expr  # bytes touched from o
    whole: bool  # the offset is unknown: any byte of the base
    exact: bool
    reason: str
    loc: Location | None
    opcode: str

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "atomic")

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "atomic")


@dataclass(frozen=True, slots=True)
class KernelSummary:
    name: str
    mangled: str
    binding: Binding
    params: tuple[str, ...]
    loops: tuple[LoopDim, ...]
    accesses: tuple[Access, ...]
    shared_globals: tuple[str, ...]  # IR names, in the order of KernelInfo.shared_arrays
    shared_bytes: tuple[int, ...]
    barriers: int
    thread_independent: bool  # no barrier, shared memory or warp-level op: threads can move
    warnings: tuple[str, ...]

    @property
    def key(self) -> tuple[str, Binding]:
        return self.mangled, self.binding

    def shared_index(self, ir_name: str) -> int:
        return self.shared_globals.index(ir_name)


def thread_level(m: isl.Map) -> isl.Map:
    """Project the loop dimensions out: what each thread touches."""
    return islutil.project_out(m, [n for n in islutil.names(m, islutil.T.in_)
                                   if n not in THREAD_DIMS])


def block_level(m: isl.Map) -> isl.Map:
    return islutil.project_out(m, [n for n in islutil.names(m, islutil.T.in_)
                                   if n not in THREAD_DIMS[:3]])


def byte_map(extent: Expr) -> isl.Map:
    """{ [o] -> [x] : o <= x < o + extent }"""
    params = sorted(extent.variables())
    head = f"[{', '.join(params)}] -> " if params else ""
    return isl.Map(f"{head}{{ [o] -> [x] : o <= x < o + {extent} }}")


@dataclass
class _Loop:
    nl: NaturalLoop
    dim: str
    phi: Instr | None
    depth: int


class KernelAnalyzer:
    """Summaries of the kernels of one device module, one per (kernel, binding), cached."""

    def __init__(self, view: ModuleView, infos: list[KernelInfo]):
        self.view = view
        self.infos = {k.mangled: k for k in infos}
        self._cfg: dict[str, FunctionCFG] = {}
        self._cache: dict[tuple[str, Binding], KernelSummary] = {}

    def summary(self, mangled: str, binding: Binding) -> KernelSummary:
        key = (mangled, binding)
        got = self._cache.get(key)
        if got is None:
            fn = self.view.functions[mangled]
            cfg = self._cfg.get(mangled)
            if cfg is None:
                cfg = self._cfg[mangled] = FunctionCFG(fn)
            got = _Flow(self.view, self.infos[mangled], fn, cfg, binding).run()
            self._cache[key] = got
        return got


def _shared_globals(view: ModuleView, info: KernelInfo) -> list[str]:
    """The kernel's shared arrays (IR names) in KernelInfo.shared_arrays order."""
    texts = [view.functions[n].text for n in (info.mangled, *info.calls) if n in view.functions]
    refs = {g.strip('"') for t in texts for g in re.findall(r'@([-\w.$]+|"[^"]+")', t)}
    return [g for g in view.globals if g in refs
            and space_of_global(view.global_texts.get(g, "")) == "shared"]


class _Flow:
    def __init__(self, view: ModuleView, info: KernelInfo, fn: Function, cfg: FunctionCFG,
                 binding: Binding):
        self.view, self.info, self.fn, self.cfg, self.binding = view, info, fn, cfg, binding
        self.warnings: list[str] = []
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
        if start is None or not step:
            start, step, exact = Expr(0), 1, lp.phi is None
            reason = "" if exact else "loop induction variable not affine"
        else:
            exact, reason = True, ""
        for ins in nl.header.instrs:
            if ins.opcode != "phi":
                break
            self.ev.loop_value[ins] = self._header_phi(ins, nl, v, start, step)
        if exact and lp.phi is not None:
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
        self.loop_dims.append(LoopDim(dim, nl.header.name, start if lp.phi is not None else None,
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
            return unknown(f"loop-carried value {phi.name} is not an induction variable")
        done = v - start0 if step0 > 0 else start0 - v
        k = abs(step0)
        delta = done.scale(step // k) if step % k == 0 else done.floordiv(k).scale(step)
        return Val(tuple(Piece(p.cond, None if p.expr is None else p.expr + delta, p.base)
                         for p in start.pieces), start.exact, start.reason)

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
            cases = [(term.operands[i], term.operands[i + 1])
                     for i in range(2, len(term.operands) - 1, 2)]
            if x is None or not all(isinstance(c, Const) for c, _ in cases):
                return Cond(sp.universe, False, "switch on an unknown value")
            hit = [sp.set(f"{x} = {signed(c.value, c.type)}") for c, _ in cases]
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
        if len(pieces) > 16:
            return unknown("too many cases in phi")
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

    # accesses ---------------------------------------------------------------------------------
    def run(self) -> KernelSummary:
        order = self._rpo()
        self._domains(order)
        accesses: list[Access] = []
        for b in order:
            if self.dom[b].is_empty():
                continue
            for ins in b.instrs:
                accesses += self._accesses(ins, b)
        shared = _shared_globals(self.view, self.info)
        return KernelSummary(
            name=self.info.name, mangled=self.info.mangled, binding=self.binding,
            params=tuple(p.name for p in self.info.params), loops=tuple(self.loop_dims),
            accesses=tuple(accesses), shared_globals=tuple(shared),
            shared_bytes=tuple(n for _, n in self.info.shared_arrays),
            barriers=self.info.barriers,
            thread_independent=not (self.info.barriers or shared or self.info.warp_ops),
            warnings=tuple(self.warnings))

    def _size(self, ty: str) -> int:
        try:
            return type_size(ty, self.view.struct_bodies)
        except TypeParseError:
            return 16

    def _accesses(self, ins: Instr, b: Block) -> list[Access]:
        op = ins.opcode
        if op == "load":
            return self._make("load", ins, b, self.ev.value(ins.operands[0]), self._size(ins.type))
        if op == "store":
            return self._make("store", ins, b, self.ev.value(ins.operands[1]),
                              self._size(ins.operands[0].type))
        if op in ("atomicrmw", "cmpxchg"):
            return self._make("atomic", ins, b, self.ev.value(ins.operands[0]),
                              self._size(ins.operands[1].type))
        if op == "call":
            return self._call(ins, b)
        return []

    def _call(self, ins: Instr, b: Block) -> list[Access]:
        callee = ins.callee
        name = callee.name if isinstance(callee, Function) else ""
        args = ins.args
        if m := _ASM_RE.search(ins.text):
            if not (_ASM_MEMORY_RE.search(m.group(1)) or "~{memory}" in m.group(2)):
                return []
            return self._everything(ins, b, f"inline asm touching memory: {m.group(1)[:40]}")
        if name.startswith(("llvm.memcpy", "llvm.memmove", "llvm.memset")):
            n = self.ev.value(args[2]).single()
            ext = n if n is not None else None
            out = self._make("store", ins, b, self.ev.value(args[0]), ext)
            if not name.startswith("llvm.memset"):
                out += self._make("load", ins, b, self.ev.value(args[1]), ext)
            return out
        if name.startswith("llvm.nvvm.atomic.") or name.startswith("llvm.nvvm.ld"):
            kind = "atomic" if "atomic" in name else "load"
            size = self._size(ins.type) if ins.type != "void" else 4
            return self._make(kind, ins, b, self.ev.value(args[0]), size)
        if _PURE_INTRINSIC_RE.match(name):
            return []
        ptrs = [a for a in args if a.type.startswith("ptr")]
        if name.startswith(("llvm.", "__nv_")) and isinstance(callee, Function):
            out: list[Access] = []
            for a in ptrs:  # e.g. __nv_sincosf(x, &s, &c): thread-private unless proven not
                v = self.ev.value(a)
                bases = {p.base for p in v.pieces} if v.known else {ANY}
                for base in bases - {Base("local", p.base.ref) for p in v.pieces or ()
                                     if p.base and p.base.space == "local"}:
                    out += self._whole(ins, b, base, f"pointer passed to {name}")
            return out
        if isinstance(callee, Function) and not callee.is_declaration and _pure(callee):
            return []
        what = f"call to {name}" if name else "indirect call"
        return self._everything(ins, b, what)

    def _everything(self, ins: Instr, b: Block, why: str) -> list[Access]:
        loc = self.view.loc(ins)
        self.warnings.append(f"{loc or self.info.name}: {why}: the kernel is assumed to read "
                             "and write every buffer it receives")
        return self._whole(ins, b, ANY, why)

    def _whole(self, ins: Instr, b: Block, base: Base, why: str) -> list[Access]:
        rel = self._relation(b, None, None)
        loc = self.view.loc(ins)
        return [Access(kind, base, rel, Expr(1), True, False, why, loc, ins.opcode)
                for kind in ("load", "store")]

    def _relation(self, b: Block, cond: isl.Set | None, expr: Expr | None) -> isl.Map:
        dom = self.dom[b] if cond is None else self.dom[b].intersect(cond)
        if expr is None:
            rel = isl.Map.from_domain_and_range(dom, isl.Set("{ [o] }"))
        else:
            rel = self.space.map_to_offset(expr).intersect_domain(dom)
        outside = [lp.dim for lp in self.loops.values() if b not in lp.nl.blocks]
        return islutil.project_out(rel, outside).detect_equalities().coalesce()

    def _make(self, kind: str, ins: Instr, b: Block, ptr: Val, size: int | Expr | None
              ) -> list[Access]:
        loc = self.view.loc(ins)
        block_reason = self.exact.get(b, "")
        if not ptr.known:
            return [Access(k, ANY, self._relation(b, None, None), Expr(1), True, False,
                           f"address unknown: {ptr.reason}", loc, ins.opcode)
                    for k in ((kind,) if kind != "atomic" else ("atomic",))]
        allowed = self._allowed(b) | set(self.space.params)
        out = []
        for p in ptr.pieces:
            base = p.base or ANY
            if base.space in ("local", "const", "null"):
                continue
            expr = p.expr
            reason = ptr.reason if not ptr.exact else ""
            if expr is not None and not expr.variables() <= allowed:
                expr, reason = None, "address computed in a loop used after it"
            if expr is None:
                reason = reason or "address not affine"
            ext = Expr.of(size) if size is not None else Expr(1)
            whole = expr is None or size is None
            if size is None:
                reason = reason or "length not affine"
            exact = not whole and ptr.exact and not block_reason
            reason = reason or block_reason
            rel = self._relation(b, p.cond, None if whole else expr)
            if rel.is_empty():
                continue
            out.append(Access(kind, base, rel, ext, whole, exact, reason, loc, ins.opcode))
        return out


def _chain_from(phi: Instr, v, depth: int = 0) -> bool:
    if v is phi:
        return True
    if not isinstance(v, Instr) or depth > 8:
        return False
    if v.opcode in ("add", "sub", "or", "getelementptr", "sext", "zext", "trunc", "freeze"):
        return _chain_from(phi, v.operands[0], depth + 1) or (
            v.opcode == "add" and _chain_from(phi, v.operands[1], depth + 1))
    return False


def _pure(fn: Function) -> bool:
    """A device function that neither touches memory nor calls anything that might."""
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
                return False
            if ins.opcode == "call":
                callee = ins.callee
                name = callee.name if isinstance(callee, Function) else ""
                if _ASM_RE.search(ins.text) or not name:
                    return False
                if not (_PURE_INTRINSIC_RE.match(name) or (name.startswith("__nv_") and not any(
                        a.type.startswith("ptr") for a in ins.args))):
                    return False
    return True
