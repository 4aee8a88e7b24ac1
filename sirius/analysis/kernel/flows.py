"""Which pointers a kernel may store into memory: the kernel half of the points-to analysis.

The paper's section 3.5 is an inclusion-based points-to analysis; this is its device side. For
every value of a device function, `carriers` are the bases (kernel.pieces.Base) of the pointers
whose bits the value may carry: a pointer carries what it is based on, an integer made from a
pointer (`ptrtoint`, arithmetic on one) carries it too, and a value read from memory carries
whatever was stored there (`loaded`). Floating-point arithmetic and comparisons carry nothing.
The carriers are a fixpoint over the SSA graph, flow-insensitive and independent of the launch
configuration, so they are computed once per function.

Every store, atomic, cmpxchg and memcpy gives `PointerFlow`s: a pointer based on `value` may now
sit in the memory based on `container`. A call to a device function maps the callee's flows
through the arguments of the call (bottom-up summaries, as the paper does); a call sirius cannot
follow (an unknown or indirect callee, recursion, inline asm that touches memory) is the flow
(any, any): anything may have been stored anywhere. sirius.analysis.uar.pointsto solves the
flows of a whole program into points-to sets of allocations.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sirius.analysis.irview import Argument, ConstExpr, Function, Instr, ModuleView, Value
from sirius.analysis.kernel.pieces import ANY, Base, loaded, space_of_global

ASM_RE = re.compile(
    r'\basm (?:sideeffect |alignstack |inteldialect |unwind )*"([^"]*)", "([^"]*)"')
ASM_MEMORY_RE = re.compile(r"(?<![\w.])(?:ld|st|atom|red|cp\.async|ldmatrix|stmatrix|prefetch|"
                           r"cp\.reduce|multimem|tex|suld|sust)\b")
# declared functions that read the memory they are given and write none of it
READ_ONLY_CALLS = ("vprintf", "__assertfail", "__assert_fail", "free", "malloc")

_NO_BITS = {"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fcmp", "icmp", "fptosi", "fptoui",
            "sitofp", "uitofp", "fpext", "fptrunc"}
_FLOATS = ("float", "double", "half", "bfloat")
_GLOBAL_REF_RE = re.compile(r'@([-\w.$]+|"[^"]+")')
_EMPTY: frozenset[Base] = frozenset()
_ANYTHING = frozenset({ANY})
MAX_ROUNDS = 64


@dataclass(frozen=True, slots=True)
class PointerFlow:
    """A pointer based on `value` may be stored in the memory based on `container` (ANY as the
    container: somewhere unknown; ANY as the value: any allocation or global at all)."""

    container: Base
    value: Base


EVERYTHING = PointerFlow(ANY, ANY)


def asm_touches_memory(ins: Instr) -> bool:
    m = ASM_RE.search(ins.text)
    return m is not None and bool(ASM_MEMORY_RE.search(m.group(1)) or "~{memory}" in m.group(2))


def callee_name(ins: Instr) -> str:
    c = ins.callee
    return c.name if isinstance(c, Function) else ""


class FlowAnalyzer:
    """Carriers and pointer flows of the device functions of one module, memoised."""

    def __init__(self, view: ModuleView, pure: Callable[[Function], bool]):
        self.view = view
        self.pure = pure  # touches no memory and calls nothing that may
        self._carriers: dict[str, dict[Value, frozenset[Base]]] = {}
        self._flows: dict[str, frozenset[PointerFlow]] = {}
        self._busy: set[str] = set()

    # carriers --------------------------------------------------------------------------------
    def carriers(self, fn: Function) -> dict[Value, frozenset[Base]]:
        got = self._carriers.get(fn.name)
        if got is None:
            got = self._carriers[fn.name] = self._solve(fn)
        return got

    def of(self, table: dict[Value, frozenset[Base]], v: Value) -> frozenset[Base]:
        if isinstance(v, Instr):
            return table.get(v, _EMPTY)
        if isinstance(v, Argument):
            return frozenset({Base("param", v.index)})
        if v.kind == "global":
            return frozenset({self._global(v.name)})
        if isinstance(v, ConstExpr):
            return frozenset(self._global(g.strip('"')) for g in _GLOBAL_REF_RE.findall(v.text)
                             if g.strip('"') not in self.view.functions)
        return _EMPTY

    def _global(self, name: str) -> Base:
        return Base(space_of_global(self.view.global_texts.get(name, "")), name)

    def _solve(self, fn: Function) -> dict[Value, frozenset[Base]]:
        table: dict[Value, frozenset[Base]] = {}
        instrs = [i for b in fn.blocks for i in b.instrs]
        for _ in range(MAX_ROUNDS):
            changed = False
            for ins in instrs:
                new = self._step(table, ins)
                if new != table.get(ins, _EMPTY):
                    table[ins] = new
                    changed = True
            if not changed:
                return table
        return {i: _ANYTHING for i in instrs}  # did not settle: every value may carry anything

    def _step(self, table, ins: Instr) -> frozenset[Base]:
        op = ins.opcode
        if op in _NO_BITS or ins.type == "void":
            return _EMPTY
        if op == "alloca":
            return frozenset({Base("local", ins.name)})
        if op in ("load", "atomicrmw", "cmpxchg"):
            return frozenset({loaded(self.of(table, ins.operands[0]) or _ANYTHING)})
        if op in ("call", "invoke"):
            return self._call_result(table, ins)
        ops = ins.operands
        if op == "select":
            ops = ops[1:]
        out: set[Base] = set()
        for o in ops:
            if o.kind != "block":
                out |= self.of(table, o)
        return frozenset(out)

    def _call_result(self, table, ins: Instr) -> frozenset[Base]:
        name = callee_name(ins)
        args: set[Base] = set()
        for a in ins.args:
            args |= self.of(table, a)
        if name.startswith(("llvm.nvvm.ld", "llvm.nvvm.atomic.")) and ins.args:
            return frozenset({loaded(self.of(table, ins.args[0]) or _ANYTHING)})
        if ASM_RE.search(ins.text) or name.startswith(("llvm.", "__nv_")):
            return _EMPTY if ins.type in _FLOATS else frozenset(args)  # math carries nothing
        fn = self.view.functions.get(name)
        if fn is not None and not fn.is_declaration and self.pure(fn):
            return frozenset(args)
        return _ANYTHING

    # flows -----------------------------------------------------------------------------------
    def flows(self, fn: Function) -> frozenset[PointerFlow]:
        """The pointer flows of `fn` and of every device function it calls, in terms of `fn`'s
        own bases (its parameters, globals, shared arrays, locals)."""
        got = self._flows.get(fn.name)
        if got is not None:
            return got
        if fn.name in self._busy:  # recursion: nothing can be bounded
            return frozenset({EVERYTHING})
        self._busy.add(fn.name)
        try:
            got = self._flows_of(fn)
        finally:
            self._busy.discard(fn.name)
        self._flows[fn.name] = got
        return got

    def _flows_of(self, fn: Function) -> frozenset[PointerFlow]:
        table = self.carriers(fn)
        out: set[PointerFlow] = set()

        def add(containers: frozenset[Base], values: frozenset[Base]) -> None:
            for c in containers or _ANYTHING:
                for v in values:
                    out.add(PointerFlow(c, v))

        for b in fn.blocks:
            for ins in b.instrs:
                op, ops = ins.opcode, ins.operands
                if op == "store":
                    add(self.of(table, ops[1]), self.of(table, ops[0]))
                elif op == "atomicrmw":
                    add(self.of(table, ops[0]), self.of(table, ops[1]))
                elif op == "cmpxchg":
                    add(self.of(table, ops[0]), self.of(table, ops[2]))
                elif op in ("call", "invoke"):
                    out |= self._call_flows(table, ins)
        return frozenset(out)

    def _call_flows(self, table, ins: Instr) -> set[PointerFlow]:
        name = callee_name(ins)
        args = [self.of(table, a) for a in ins.args]
        if ASM_RE.search(ins.text):
            return {EVERYTHING} if asm_touches_memory(ins) else set()
        if name.startswith(("llvm.memcpy", "llvm.memmove")):
            src = loaded(args[1] or _ANYTHING)
            return {PointerFlow(c, src) for c in args[0] or _ANYTHING}
        if name.startswith("llvm.nvvm.atomic.") and len(args) > 1:
            return {PointerFlow(c, v) for c in args[0] or _ANYTHING for v in args[1]}
        if name.startswith(("llvm.", "__nv_")) or name in READ_ONLY_CALLS:
            return set()
        fn = self.view.functions.get(name)
        if fn is None or fn.is_declaration:
            return {EVERYTHING}  # an unknown or indirect callee
        out: set[PointerFlow] = set()
        for f in self.flows(fn):
            for c in map_base(f.container, args):
                for v in map_base(f.value, args):
                    out.add(PointerFlow(c, v))
        return out


def map_base(base: Base, args: list[frozenset[Base]]) -> frozenset[Base]:
    """A callee's base in the caller's terms: parameter j becomes what argument j carries."""
    if base.space == "param":
        j = int(base.ref)  # type: ignore[arg-type]
        return args[j] if j < len(args) else _ANYTHING
    if base.space == "loaded":
        inner: set[Base] = set()
        for s in base.ref:  # type: ignore[union-attr]
            inner |= map_base(s, args) or _ANYTHING
        return frozenset({loaded(inner)})
    return frozenset({base})
