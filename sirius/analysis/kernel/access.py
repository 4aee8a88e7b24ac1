"""Access relations and memory effects of a kernel under one launch configuration.

For every load, store and atomic of a kernel (and every call that may touch memory), an isl map
from the instance space `[bx, by, bz, tx, ty, tz, <enclosing loop dims>]` to the byte offset of
the first byte touched, relative to the pointer parameter or shared array it goes through. Host
loop variables that the launch configuration depends on are isl parameters.

Each access is restricted to the domain of its block (`domains.py`). An address sirius cannot
express makes the access cover its whole buffer, inexact, with the reason; a pointer loaded from
memory has the base `*(...)`, resolved against the program's points-to sets (uar/pointsto.py).
A call to a non-inlined device function is analysed at its call site (`calls.py`); a call it
cannot follow (an unknown or indirect callee, recursion, inline asm that touches memory) makes
the kernel read and write every allocation and every module global, with a warning. The
pointers a kernel may store into memory are its `flows` (`flows.py`).
"""

from __future__ import annotations

import re

import islpy as isl

from sirius.analysis import islutil
from sirius.analysis.cfg import FunctionCFG
from sirius.analysis.expr import Expr
from sirius.analysis.irtypes import TypeParseError, type_size
from sirius.analysis.irview import Block, Function, Instr, ModuleView
from sirius.analysis.kernel.affine import (
    ANY,
    Base,
    Binding,
    Val,
    space_of_global,
)
from sirius.analysis.kernel.calls import CallSites, callee_binding, callee_info
from sirius.analysis.kernel.domains import ControlFlow
from sirius.analysis.kernel.facts import KernelInfo
from sirius.analysis.kernel.flows import (
    ASM_RE,
    READ_ONLY_CALLS,
    FlowAnalyzer,
    asm_touches_memory,
)
from sirius.analysis.kernel.summary import (  # noqa: F401 (re-exported)
    Access,
    KernelSummary,
    block_level,
    byte_map,
    thread_level,
)

_PURE_INTRINSIC_RE = re.compile(
    r"llvm\.(?:nvvm\.(?:read\.ptx|barrier|bar\.|shfl|vote|activemask|match|redux|fence|membar|"
    r"fmax|fmin|fabs|sqrt|rsqrt|rcp|ex2|lg2|sin|cos|mul|add|fma|div|saturate|f2|d2|i2|ui2|ll2|"
    r"ull2|h2|bf2|ff2|float|round|trunc|ceil|floor|abs|clz|popc|brev|prmt|sad|mulhi|isspacep)|"
    r"assume|dbg|lifetime|invariant|experimental\.noalias|expect|"
    r"smin|smax|umin|umax|abs|fma|fmuladd|sqrt|exp|exp2|log|log2|sin|cos|pow|fabs|minnum|maxnum|"
    r"minimum|maximum|copysign|floor|ceil|trunc|rint|nearbyint|round|ctpop|ctlz|cttz|bswap|"
    r"bitreverse|fshl|fshr|[su]add\.sat|[su]sub\.sat|[su]add\.with|[su]mul\.with|"
    r"[su]sub\.with|is\.fpclass|canonicalize|trap|ubsantrap|debugtrap|donothing|ptrmask)")


class KernelAnalyzer:
    """Summaries of the kernels of one device module, one per (kernel, binding), cached."""

    def __init__(self, view: ModuleView, infos: list[KernelInfo]):
        self.view = view
        self.infos = {k.mangled: k for k in infos}
        self.flows = FlowAnalyzer(view, _pure)
        self._cfg: dict[str, FunctionCFG] = {}
        self._cache: dict[tuple[str, Binding], KernelSummary] = {}
        self._callees: dict[tuple, KernelSummary] = {}
        # dependence widths by their question (uar/dependences.py): every UAR built over
        # these summaries (the one after storage splitting too) shares them; a key names
        # kernels, so answers never leave this module
        self.widths: dict[tuple, object] = {}
        # a launch statement's effects by what they depend on (uar/effects.py, launch_key):
        # the UARs rebuilt after pruning, sync crossing, storage splitting and unrolling
        # recompute only the launches those steps changed
        self.launch_effects: dict[tuple, object] = {}
        # and the dependences between two such reused effects (uar/dependences.py)
        self.dependences: dict[tuple, tuple] = {}

    def _cfg_of(self, fn: Function) -> FunctionCFG:
        cfg = self._cfg.get(fn.name)
        if cfg is None:
            cfg = self._cfg[fn.name] = FunctionCFG(fn)
        return cfg

    def summary(self, mangled: str, binding: Binding) -> KernelSummary:
        key = (mangled, binding)
        got = self._cache.get(key)
        if got is None:
            fn = self.view.functions[mangled]
            got = _Flow(self.view, self.infos[mangled], fn, self._cfg_of(fn), binding,
                        self).run()
            self._cache[key] = got
        return got

    def callee_summary(self, fn: Function, binding: Binding, depth: int,
                       stack: tuple[str, ...]) -> KernelSummary:
        """A non-inlined device function's accesses under a launch configuration, relative to
        its own parameters (kernel/calls.py moves them to each call site)."""
        b = callee_binding(binding)
        key = (fn.name, b, depth)
        got = self._callees.get(key)
        if got is None:
            got = _Flow(self.view, callee_info(self.view, fn, depth), fn, self._cfg_of(fn), b,
                        self, depth, stack).run()
            self._callees[key] = got
        return got


def _shared_globals(view: ModuleView, info: KernelInfo) -> list[str]:
    """The kernel's shared arrays (IR names) in KernelInfo.shared_arrays order."""
    texts = [view.functions[n].text for n in (info.mangled, *info.calls) if n in view.functions]
    refs = {g.strip('"') for t in texts for g in re.findall(r'@([-\w.$]+|"[^"]+")', t)}
    return [g for g in view.globals if g in refs
            and space_of_global(view.global_texts.get(g, "")) == "shared"]


class _Flow(ControlFlow, CallSites):
    def __init__(self, view: ModuleView, info: KernelInfo, fn: Function, cfg: FunctionCFG,
                 binding: Binding, analyzer: KernelAnalyzer | None = None, depth: int = 0,
                 stack: tuple[str, ...] = ()):
        super().__init__(view, info, fn, cfg, binding)
        self.analyzer, self.depth, self.stack = analyzer, depth, stack

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
            warnings=tuple(dict.fromkeys(self.warnings)),
            flows=self.analyzer.flows.flows(self.fn) if self.analyzer else frozenset())

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
        if m := ASM_RE.search(ins.text):
            if not asm_touches_memory(ins):
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
        if isinstance(callee, Function) and not callee.is_declaration:
            return [] if _pure(callee) else self._call_site(ins, b, callee)
        if name in READ_ONLY_CALLS:  # vprintf(format, arguments): reads what it is given
            out = []
            for a in ptrs:
                v = self.ev.value(a)
                for base in {p.base or ANY for p in v.pieces} if v.known else {ANY}:
                    if base.space not in ("local", "null"):
                        out += self._whole(ins, b, base, f"pointer passed to {name}", ("load",))
            return out
        what = f"call to {name}" if name else "indirect call"
        return self._everything(ins, b, what)

    def _everything(self, ins: Instr, b: Block, why: str) -> list[Access]:
        loc = self.view.loc(ins)
        self.warnings.append(f"{loc or self.info.name}: {why}: the kernel is assumed to read "
                             "and write every allocation and every module global")
        return self._whole(ins, b, ANY, why)

    def _whole(self, ins: Instr, b: Block, base: Base, why: str,
               kinds: tuple[str, ...] = ("load", "store")) -> list[Access]:
        rel = self._relation(b, None, None)
        loc = self.view.loc(ins)
        return [Access(kind, base, rel, Expr(1), True, False, why, loc, ins.opcode)
                for kind in kinds]

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
            if base.space in ("local", "null"):
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


def _pure(fn: Function) -> bool:
    """A device function that neither touches memory nor calls anything that might."""
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
                return False
            if ins.opcode == "call":
                callee = ins.callee
                name = callee.name if isinstance(callee, Function) else ""
                if ASM_RE.search(ins.text) or not name:
                    return False
                if not (_PURE_INTRINSIC_RE.match(name) or (name.startswith("__nv_") and not any(
                        a.type.startswith("ptr") for a in ins.args))):
                    return False
    return True
