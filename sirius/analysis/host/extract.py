"""Host-program extraction: abstract interpretation of the host LLVM IR from its entry function.

The interpreter walks the host code in program order with abstract values (hostvalues.py),
follows calls into the functions that do GPU work, and records every CUDA runtime operation as
an op of the `HostProgram`. Host loops around GPU work stay loops: their trip counts come from
the induction variable and exit test, launch arguments and grid sizes become expressions in the
loop variables, and pointers swapped every iteration become `Rotating` addresses. A loop whose
trip count cannot be known is kept as an opaque loop. Host code that does no GPU work (filling
arrays, CPU references, printing) is skipped, its results marked unknown. Anything the model
cannot represent faithfully raises HostAnalysisError at the source line responsible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sirius.analysis.cfg import FunctionCFG, NaturalLoop
from sirius.analysis.expr import Expr
from sirius.analysis.host import cudaapi
from sirius.analysis.host.loops import LoopShape, analyse_loop, carried_values
from sirius.analysis.host.model import Buffer, DevRef, HostProgram, Loop, Op
from sirius.analysis.host.ops import binary, cast, float_binary, icmp, shift_to_packed, truth
from sirius.analysis.host.values import (
    AV,
    DevPtr,
    Flt,
    FuncPtr,
    HostPtr,
    Int,
    Memory,
    Null,
    Region,
    Unknown,
    const,
    int_bits,
    mentions,
    offset_addr,
    substitute,
)
from sirius.analysis.irtypes import TypeTable
from sirius.analysis.irview import Block, Const, ConstExpr, Function, Instr, ModuleView, Value
from sirius.diagnostics import HostAnalysisError, Location

_IGNORED_INTRINSICS = ("llvm.lifetime.", "llvm.dbg.", "llvm.assume", "llvm.experimental.noalias",
                       "llvm.stacksave", "llvm.stackrestore", "llvm.invariant.", "llvm.prefetch")


@dataclass
class Frame:
    fn: Function
    cfg: FunctionCFG
    env: dict[Value, AV] = field(default_factory=dict)


@dataclass
class LoopCtx:
    loop: NaturalLoop
    inside: dict[Block, Block]  # exiting block -> its successor inside the loop


# Outcomes of walking a region.
_BACKEDGE, _END = "backedge", "end"


class HostInterpreter:
    def __init__(self, host: ModuleView, kernels: dict[str, cudaapi.KernelSig], entry: str):
        self.view = host
        self.types = TypeTable(host.struct_bodies)
        self.kernels = kernels
        self.entry = entry
        self.mem = Memory()
        self.regions: dict[str, Region] = {}
        self.escaped: set[Region] = set()
        self.buffers: list[Buffer] = []
        self.ops: list[list[Op]] = [[]]
        self.call_stack: list[Function] = []
        self.cfgs: dict[Function, FunctionCFG] = {}
        self.gpu_fn: dict[str, bool] = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.loop_vars: set[str] = set()
        self.n_opaque = 0
        self.probing = 0
        self.api = cudaapi.CudaRuntime(self)

    # entry ---------------------------------------------------------------------------------
    def run(self) -> HostProgram:
        fn = self.view.functions.get(self.entry)
        if fn is None:
            fn = self.entry_by_source_name()
        if fn is None or fn.is_declaration:
            raise HostAnalysisError(f"the host entry function '{self.entry}' is not defined "
                                    "in the program (use --entry NAME to pick another)")
        self.call_function(fn, [], None)
        return HostProgram(self.entry, tuple(self.api.finish_buffers()), tuple(self.ops[0]))

    def entry_by_source_name(self) -> Function | None:
        found = [f for f in self.view.functions.values()
                 if not f.is_declaration and self.view.source_name(f) == self.entry]
        if len(found) > 1:
            raise HostAnalysisError(f"several host functions are named '{self.entry}' "
                                    f"({', '.join(f.name for f in found)}); pass the symbol "
                                    "name to --entry")
        return found[0] if found else None

    def emit(self, op: Op) -> None:
        self.ops[-1].append(op)

    def loc(self, ins: Instr | None) -> Location | None:
        return self.view.loc(ins) if ins is not None else None

    def error(self, msg: str, ins: Instr | None, *notes: str) -> HostAnalysisError:
        return HostAnalysisError(msg, self.loc(ins), tuple(notes))

    # values --------------------------------------------------------------------------------
    def val(self, frame: Frame, v: Value) -> AV:
        if v in frame.env:
            return frame.env[v]
        if isinstance(v, Const):
            if v.kind == "null":
                return Null()
            if isinstance(v.value, float):
                return Flt(v.value)
            return const(int(v.value or 0), int_bits(v.type))
        if v.kind == "func":
            return FuncPtr(v.name)
        if v.kind == "global":
            return HostPtr(self.global_region(v.name))
        if isinstance(v, ConstExpr):
            return self.const_expr(v)
        if v.kind == "undef":
            return Unknown("an undefined value")
        return Unknown(f"value %{v.name} is not computed on the path sirius follows")

    def global_region(self, name: str) -> Region:
        r = self.regions.get("@" + name)
        if r is None:
            r = Region(name, "global", self.view.globals[name].type if name in self.view.globals
                       else "")
            self.regions["@" + name] = r
            cudaapi.init_global(self, r, self.view.global_texts.get(name, ""))
        return r

    def const_expr(self, v: ConstExpr) -> AV:
        m = re.search(r"getelementptr (?:inbounds |nuw |nusw )*\((.+?), ptr @([-\w.$]+), (.*)\)",
                      v.text)
        if m:
            base = HostPtr(self.global_region(m.group(2)))
            idx = [int(x) for x in re.findall(r"i\d+ (-?\d+)", m.group(3))]
            off = self.gep_const_offset(m.group(1), idx)
            if off is not None:
                return HostPtr(base.region, Expr(off))
        m = re.search(r"(?:ptrtoint|bitcast|addrspacecast) \(ptr @([-\w.$]+)", v.text)
        if m:
            if m.group(1) in self.view.functions:
                return FuncPtr(m.group(1))
            return HostPtr(self.global_region(m.group(1)))
        return Unknown(f"constant expression sirius does not evaluate: {v.text[:60]}")

    def gep_const_offset(self, ty: str, idx: list[int]) -> int | None:
        try:
            off = idx[0] * self.types.size(ty)
            cur = ty
            for i in idx[1:]:
                o, cur = self.types.field_offset(cur, i)
                off += o
            return off
        except (ValueError, KeyError):
            return None

    # functions ---------------------------------------------------------------------------
    def cfg(self, fn: Function) -> FunctionCFG:
        if fn not in self.cfgs:
            self.cfgs[fn] = FunctionCFG(fn)
        return self.cfgs[fn]

    def does_gpu_work(self, name: str) -> bool:
        """Whether calling `name` can emit an op of the host model (transitively)."""
        if name in self.gpu_fn:
            return self.gpu_fn[name]
        if cudaapi.is_gpu_api(name):
            return True
        fn = self.view.functions.get(name)
        if fn is None or fn.is_declaration:
            return False
        self.gpu_fn[name] = False  # recursion guard
        result = any(self.instr_does_gpu_work(i) for b in fn.blocks for i in b.instrs)
        self.gpu_fn[name] = result
        return result

    def instr_does_gpu_work(self, ins: Instr) -> bool:
        if ins.opcode not in ("call", "invoke"):
            return False
        callee = ins.callee
        if callee is not None and callee.kind == "func":
            return self.does_gpu_work(callee.name)
        return self.indirect_may_do_gpu_work()

    def indirect_may_do_gpu_work(self) -> bool:
        if "<indirect>" not in self.gpu_fn:
            self.gpu_fn["<indirect>"] = False
            taken = cudaapi.address_taken_functions(self.view)
            self.gpu_fn["<indirect>"] = any(self.does_gpu_work(n) for n in taken)
        return self.gpu_fn["<indirect>"]

    def blocks_do_gpu_work(self, blocks) -> Instr | None:
        for b in sorted(blocks, key=lambda b: b.function.blocks.index(b) if b.function else 0):
            for i in b.instrs:
                if self.instr_does_gpu_work(i):
                    return i
        return None

    def call_function(self, fn: Function, args: list[AV], site: Instr | None) -> AV:
        if fn in self.call_stack:
            if self.does_gpu_work(fn.name):
                raise self.error(f"recursive host function '{fn.name}' does GPU work; sirius "
                                 "cannot model recursion", site)
            return Unknown(f"result of recursive call to {fn.name}")
        if len(self.call_stack) > 64:
            raise self.error("host call chain deeper than 64 functions", site)
        frame = Frame(fn, self.cfg(fn))
        for a, v in zip(fn.args, args, strict=False):
            frame.env[a] = v
        self.call_stack.append(fn)
        try:
            out = self.walk(frame, fn.entry, frozenset(), None)
        finally:
            self.call_stack.pop()
        return out if isinstance(out, (Int, Flt, DevPtr, HostPtr, FuncPtr, Null, Unknown)) else \
            Unknown(f"result of {fn.name}")

    # the walk ------------------------------------------------------------------------------
    def walk(self, frame: Frame, block: Block, preds: frozenset[Block], ctx: LoopCtx | None,
             phis_done: bool = False):
        """Execute from `block` until a return, the back edge of `ctx`'s loop, or program end.
        Returns the return value, _BACKEDGE or _END; a loop exit returns ("exit", block, preds)."""
        while True:
            if not phis_done:
                if ctx is not None and block is ctx.loop.header:
                    return _BACKEDGE
                if ctx is not None and block not in ctx.loop.blocks:
                    return ("exit", block, preds)
                lp = frame.cfg.loops.get(block)
                if lp is not None:
                    nxt = self.run_loop(frame, lp, preds)
                    if nxt is None:
                        return _END
                    block, preds = nxt
                    continue
                self.eval_phis(frame, block, preds)
            phis_done = False
            for ins in block.instrs[:-1]:
                if ins.opcode == "phi":
                    continue
                frame.env[ins] = self.execute(frame, ins)
                if ins.opcode == "call" and cudaapi.is_noreturn(ins):
                    return _END
            term = block.terminator
            if term.opcode == "ret":
                return self.val(frame, term.operands[0]) if term.operands else None
            if term.opcode in ("unreachable", "resume"):
                return _END
            if term.opcode == "invoke":
                frame.env[term] = self.execute(frame, term)
                block, preds = term.successors()[0], frozenset([block])
                continue
            nxt = self.successor(frame, block, term, ctx)
            if nxt is None:
                return _END
            block, preds = nxt

    def successor(self, frame: Frame, block: Block, term: Instr, ctx: LoopCtx | None):
        succs = term.successors()
        if term.opcode == "br" and len(succs) == 1:
            return succs[0], frozenset([block])
        if ctx is not None and block in ctx.inside:
            return ctx.inside[block], frozenset([block])
        cond = self.val(frame, term.operands[0])
        if term.opcode == "br":
            t = truth(cond)
            if t is not None:
                return (succs[0] if t else succs[1]), frozenset([block])
        elif term.opcode == "switch" and isinstance(cond, Int) and cond.e.is_const:
            pairs = term.operands[2:]
            for i in range(0, len(pairs) - 1, 2):
                case = pairs[i]
                if isinstance(case, Const) and case.value == cond.e.const:
                    return pairs[i + 1], frozenset([block])  # type: ignore[return-value]
            return term.operands[1], frozenset([block])  # default
        return self.skip_condition(frame, block, succs, cond, ctx)

    def skip_condition(self, frame: Frame, block: Block, succs: list[Block], cond: AV,
                       ctx: LoopCtx | None):
        """A branch on a value sirius does not know: skip the region it controls when that region
        does no GPU work; otherwise the model would be a guess, which is an error."""
        cfg = frame.cfg
        join = cfg.post_dominator(block)
        region = cfg.reachable(succs, join)
        if ctx is not None:
            region &= ctx.loop.blocks
        gpu = self.blocks_do_gpu_work(region)
        if gpu is None and (join is None or ctx is None or join in ctx.loop.blocks):
            self.havoc_region(frame, region, block)
            if join is None:
                return None
            return join, frozenset(p for p in cfg.preds[join] if p in region or p is block)
        # A side that ends the program without doing GPU work (an error report and exit) is
        # assumed not taken, as CUDA calls are assumed to succeed.
        quiet = [self.blocks_do_gpu_work(cfg.reachable([s], None)) is None for s in succs]
        ends = [cfg.dead_end(s) or not self.reaches(cfg, s, join) for s in succs]
        if len(succs) == 2 and quiet[0] != quiet[1]:
            loud = 1 if quiet[0] else 0
            if ends[1 - loud]:
                return succs[loud], frozenset([block])
        why = cond.reason if isinstance(cond, Unknown) else "a value sirius does not track"
        raise self.error("GPU work under a host condition sirius cannot decide: "
                         f"the branch depends on {why}", block.terminator,
                         f"the GPU work is at {self.loc(gpu) or 'an unknown line'}")

    def reaches(self, cfg: FunctionCFG, s: Block, target: Block | None) -> bool:
        return target is not None and target in cfg.reachable([s], None) | {s}

    def eval_phis(self, frame: Frame, block: Block, preds: frozenset[Block]) -> None:
        new: dict[Value, AV] = {}
        for ins in block.instrs:
            if ins.opcode != "phi":
                break
            vals = [self.val(frame, v) for v, b in zip(ins.operands, ins.incoming, strict=True)
                    if b in preds]
            if not vals:
                new[ins] = Unknown(f"%{ins.name} has no value on the path sirius follows")
            elif all(v == vals[0] for v in vals[1:]):
                new[ins] = vals[0]
            else:
                new[ins] = Unknown(f"'{self.var_name(frame, ins)}' is chosen by a host condition "
                                   f"sirius cannot decide", self.loc(ins))
        frame.env.update(new)

    def var_name(self, frame: Frame, v: Value) -> str:
        return frame.fn.var_names.get(v.name) or cudaapi.clean_name(v.name) or "value"

    # effects of skipped code ----------------------------------------------------------------
    def havoc_region(self, frame: Frame, blocks, where: Block) -> None:
        loc = self.loc(where.terminator)
        why = Unknown(f"computed by host code sirius skips (line {loc.line if loc else '?'})")
        for b in blocks:
            for ins in b.instrs:
                frame.env[ins] = why
                targets: list[Value] = []
                if ins.opcode == "store":
                    targets = [ins.operands[1]]
                elif ins.opcode in ("call", "invoke"):
                    callee = ins.callee
                    name = callee.name if callee is not None else ""
                    if name.startswith(_IGNORED_INTRINSICS) or cudaapi.is_readonly(name):
                        continue
                    targets = [a for a in ins.args if a.type.startswith("ptr")]
                for t in targets:
                    self.havoc_through(frame, t, why)

    def havoc_through(self, frame: Frame, ptr: Value, why: Unknown) -> None:
        regions = self.pointer_regions(frame, ptr, set())
        if regions is None:
            regions = {r for r in self.regions.values() if r.kind != "alloca"} | self.escaped
        for r in regions:
            self.mem.havoc(r, why)

    def pointer_regions(self, frame: Frame, v: Value, seen: set) -> set[Region] | None:
        if v in seen:
            return set()
        seen.add(v)
        av = frame.env.get(v)
        if isinstance(av, HostPtr):
            return {av.region}
        if isinstance(av, DevPtr | Null | FuncPtr):
            return set()
        if v.kind == "global":
            return {self.global_region(v.name)}
        if isinstance(v, Instr) and v.opcode in ("getelementptr", "bitcast", "phi", "select"):
            ops = v.operands[:1] if v.opcode in ("getelementptr", "bitcast") else (
                v.operands if v.opcode == "phi" else v.operands[1:])
            out: set[Region] = set()
            for o in ops:
                sub = self.pointer_regions(frame, o, seen)
                if sub is None:
                    return None
                out |= sub
            return out
        if isinstance(v, Instr) and v.opcode == "call" and v.callee is not None and \
                cudaapi.is_allocator(v.callee.name):
            return set()  # fresh heap memory, allocated inside the skipped code
        return None

    # loops ---------------------------------------------------------------------------------
    def run_loop(self, frame: Frame, lp: NaturalLoop, preds: frozenset[Block]):
        gpu = self.blocks_do_gpu_work(lp.blocks)
        if gpu is None:
            return self.skip_loop(frame, lp)
        shape = analyse_loop(self, frame, lp, preds)
        header_loc = self.loc(shape.exiting_instr) or self.loc(gpu)
        if shape.trips == 0:
            # A top-tested loop whose body never runs: only its test executes.
            return shape.exit_target, frozenset([shape.exiting])
        var = shape.var
        self.loop_vars.add(var)
        self.ranges[var] = shape.range
        carried = self.carried_cells(frame, lp, shape)
        self.prehavoc_loop_stores(frame, lp)
        for (region, off, size), v in carried.items():
            self.mem.store(region, off, size, v)
        frame.env.update(shape.header_values)
        self.ops.append([])
        ctx = LoopCtx(lp, shape.inside)
        try:
            out = self.walk(frame, lp.header, frozenset(), ctx, phis_done=True)
        finally:
            body = self.ops.pop()
        if out is not _BACKEDGE:
            raise self.error("a host loop around GPU work leaves in the middle of an iteration "
                             "(break, return or exit); sirius can only model loops that exit "
                             "at their test", shape.exiting_instr)
        self.emit(Loop(var, shape.lo, shape.hi, shape.step, tuple(body), header_loc))
        # After the loop, values computed in it hold what the last iteration computed.
        last = {var: shape.last}
        names = {var}
        for k, v in list(frame.env.items()):
            if mentions(v, names):
                frame.env[k] = substitute(v, last)
        self.mem.map_values(lambda v: substitute(v, last) if mentions(v, names) else v)
        del self.ranges[var]
        self.loop_vars.discard(var)
        return shape.exit_target, frozenset([shape.exiting])

    def skip_loop(self, frame: Frame, lp: NaturalLoop):
        cfg = frame.cfg
        first = next((i for i in lp.header.instrs if i.dbg is not None), lp.header.terminator)
        self.havoc_region(frame, lp.blocks, lp.header)
        for ins in lp.header.instrs:
            if ins.opcode == "phi":
                frame.env[ins] = Unknown("computed by a host loop sirius skips", self.loc(first))
        targets = [t for _, t in lp.exits if not cfg.dead_end(t)]
        if not targets:
            return None
        uniq = list(dict.fromkeys(targets))
        cont = uniq[0] if len(uniq) == 1 else cfg.common_post_dominator(uniq)
        if cont is None:
            return None
        preds = frozenset(p for p in cfg.preds[cont] if p in lp.blocks or p in uniq)
        if len(uniq) > 1:
            region = cfg.reachable(uniq, cont)
            if (gpu := self.blocks_do_gpu_work(region)) is not None:
                raise self.error("GPU work after a host loop exit sirius cannot follow",
                                 gpu)
            self.havoc_region(frame, region, lp.header)
        return cont, preds

    def carried_cells(self, frame: Frame, lp: NaturalLoop, shape: LoopShape) -> dict:
        """Host variables that carry values from one iteration to the next through memory
        (pointers swapped in address-taken locals): run the body once on placeholders and see
        what each variable holds at the end of the iteration, as the phi analysis does."""
        cells = self.stored_cells(frame, lp)
        if not cells:
            return {}
        init = {c: self.mem.load(c[0], c[1], c[2], "") for c in cells}
        holders: dict[tuple, AV] = {}
        for i, c in enumerate(cells):
            ph = f"\0cell{i}"
            if isinstance(init[c], DevPtr) and isinstance(init[c].addr, DevRef):
                holders[c] = DevPtr(DevRef(ph))
            elif isinstance(init[c], Int):
                holders[c] = Int(Expr.var(ph), init[c].bits)
        if not holders:
            return {}
        saved = self.snapshot(frame)
        for (region, off, size), v in holders.items():
            self.mem.store(region, off, size, v)
        frame.env.update(shape.header_values)
        self.ops.append([])
        self.probing += 1
        end: dict[tuple, AV] | None = None
        try:
            if self.walk(frame, lp.header, frozenset(), LoopCtx(lp, shape.inside),
                         phis_done=True) is _BACKEDGE:
                end = {c: self.mem.load(c[0], c[1], c[2], "") for c in holders}
        except HostAnalysisError:
            end = None
        finally:
            self.probing -= 1
            self.ops.pop()
            self.restore(frame, saved)
        if end is None:
            return {}
        return carried_values(holders, init, end, shape)

    def snapshot(self, frame: Frame):
        cells = {r: dict(c) for r, c in self.mem.cells.items()}
        return (dict(frame.env), cells, dict(self.mem.havocked), set(self.escaped),
                self.api.snapshot(), self.n_opaque)

    def restore(self, frame: Frame, saved) -> None:
        env, cells, havocked, escaped, api, n_opaque = saved
        frame.env.clear()
        frame.env.update(env)
        self.mem.cells, self.mem.havocked, self.escaped = cells, havocked, escaped
        self.api.restore(api)
        self.n_opaque = n_opaque

    def stored_cells(self, frame: Frame, lp: NaturalLoop) -> list[tuple[Region, int, int]]:
        out: list[tuple[Region, int, int]] = []
        for b in lp.blocks:
            for ins in b.instrs:
                if ins.opcode != "store" or isinstance(ins.operands[1], Instr) and \
                        ins.operands[1].block in lp.blocks:
                    continue
                ptr = self.val(frame, ins.operands[1])
                if isinstance(ptr, HostPtr) and ptr.offset.is_const:
                    cell = (ptr.region, ptr.offset.const, self.types.size(ins.operands[0].type))
                    if cell not in out:
                        out.append(cell)
        return out

    def prehavoc_loop_stores(self, frame: Frame, lp: NaturalLoop) -> None:
        """Host memory a loop body writes holds different values in different iterations."""
        why = Unknown("host memory written inside the loop, read before it is written")
        for b in lp.blocks:
            for ins in b.instrs:
                if ins.opcode != "store":
                    continue
                target = ins.operands[1]
                # A pointer computed inside the body has no value yet: resolve its base instead.
                ptr = None if isinstance(target, Instr) and target not in frame.env \
                    else self.val(frame, target)
                if isinstance(ptr, HostPtr) and ptr.offset.is_const:
                    size = self.types.size(ins.operands[0].type)
                    self.mem.havoc_cell(ptr.region, ptr.offset.const, size, why)
                elif ptr is None:
                    regions = self.pointer_regions(frame, ins.operands[1], set())
                    for r in regions or ():
                        for off, (size, _) in list(self.mem.cells.get(r, {}).items()):
                            if r.kind != "alloca" or r in self.escaped:
                                self.mem.havoc_cell(r, off, size, why)

    # instructions ----------------------------------------------------------------------------
    def execute(self, frame: Frame, ins: Instr) -> AV:
        op = ins.opcode
        ops = ins.operands
        if op in ("add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv",
                  "sdiv", "urem", "srem"):
            a, b = self.val(frame, ops[0]), self.val(frame, ops[1])
            if op == "shl" and (p := shift_to_packed(a, b, int_bits(ins.type))) is not None:
                return p
            return binary(op, a, b, ins.type, self.ranges, ins.text)
        if op in ("fadd", "fsub", "fmul", "fdiv"):
            return float_binary(op, self.val(frame, ops[0]), self.val(frame, ops[1]))
        if op == "fneg":
            a = self.val(frame, ops[0])
            return Flt(-a.v) if isinstance(a, Flt) else a
        if op == "icmp":
            return icmp(ins.predicate, self.val(frame, ops[0]), self.val(frame, ops[1]),
                        ops[0].type, self.ranges)
        if op in ("zext", "sext", "trunc", "ptrtoint", "inttoptr", "bitcast", "addrspacecast",
                  "sitofp", "uitofp", "fptosi", "fptoui", "fptrunc", "fpext", "freeze"):
            return cast(op, self.val(frame, ops[0]), ops[0].type, ins.type)
        if op == "select":
            c = truth(self.val(frame, ops[0]))
            if c is not None:
                return self.val(frame, ops[1] if c else ops[2])
            a, b = self.val(frame, ops[1]), self.val(frame, ops[2])
            return a if a == b else Unknown(f"'{self.var_name(frame, ins)}' is selected by a "
                                            "host condition sirius cannot decide", self.loc(ins))
        if op == "getelementptr":
            return self.gep(frame, ins)
        if op == "alloca":
            name = cudaapi.clean_name(ins.name) or f"local{len(self.regions)}"
            r = Region(name, "alloca", ins.source_type)
            self.regions[f"%{frame.fn.name}.{ins.name}.{r.id}"] = r
            return HostPtr(r)
        if op == "load":
            return self.load(frame, ins)
        if op == "store":
            self.store(frame, ins)
            return Unknown("store")
        if op in ("call", "invoke"):
            return self.call(frame, ins)
        if op == "fcmp":
            return Unknown("a floating-point comparison of host data", self.loc(ins))
        if op in ("extractvalue", "insertvalue", "extractelement", "insertelement",
                  "shufflevector", "landingpad", "va_arg", "atomicrmw", "cmpxchg", "fence"):
            return Unknown(f"'{op}' in host code")
        return Unknown(f"unsupported host instruction '{op}'")

    def gep(self, frame: Frame, ins: Instr) -> AV:
        base = self.val(frame, ins.operands[0])
        if not isinstance(base, DevPtr | HostPtr):
            return base if isinstance(base, Unknown) else Unknown("address arithmetic on a "
                                                                  "value that is not a pointer")
        ty = ins.source_type
        try:
            total = Expr(0)
            cur = ty
            for n, idx_v in enumerate(ins.operands[1:]):
                idx = self.val(frame, idx_v)
                if n == 0:
                    if not isinstance(idx, Int):
                        return Unknown("pointer offset sirius cannot follow")
                    total = total + idx.e.scale(self.types.size(cur))
                    continue
                if cur.startswith(("%", "{", "<{")):
                    if not (isinstance(idx, Int) and idx.e.is_const):
                        return Unknown("non-constant struct field index")
                    off, cur = self.types.field_offset(cur, idx.e.const)
                    total = total + off
                else:
                    elem_off, elem_ty = self.types.field_offset(cur, 0)
                    if not isinstance(idx, Int):
                        return Unknown("pointer offset sirius cannot follow")
                    total = total + idx.e.scale(self.types.size(elem_ty))
                    cur = elem_ty
        except (ValueError, KeyError) as e:
            return Unknown(f"cannot lay out type {ty}: {e}")
        if isinstance(base, DevPtr):
            return DevPtr(offset_addr(base.addr, total))
        return HostPtr(base.region, base.offset + total)

    def load(self, frame: Frame, ins: Instr) -> AV:
        p = self.val(frame, ins.operands[0])
        if isinstance(p, HostPtr):
            if not p.offset.is_const:
                return Unknown("host memory read at an index that depends on loop variables",
                               self.loc(ins))
            try:
                size = self.types.size(ins.type)
            except ValueError:
                return Unknown(f"load of type {ins.type}")
            return self.mem.load(p.region, p.offset.const, size,
                                 f"host memory '{p.region.name}' whose contents sirius does "
                                 "not know")
        if isinstance(p, Unknown):
            return p
        return Unknown("a load through a pointer that is not host memory", self.loc(ins))

    def store(self, frame: Frame, ins: Instr) -> None:
        v = self.val(frame, ins.operands[0])
        p = self.val(frame, ins.operands[1])
        if isinstance(v, HostPtr):
            self.escaped.add(v.region)
        if isinstance(p, HostPtr):
            if p.offset.is_const:
                self.mem.store(p.region, p.offset.const, self.types.size(ins.operands[0].type), v)
            else:
                self.mem.havoc(p.region, Unknown(f"host memory '{p.region.name}' written at "
                                                 "an index that depends on loop variables",
                                                 self.loc(ins)))
        elif not isinstance(p, DevPtr):
            self.havoc_through(frame, ins.operands[1],
                               Unknown("host memory written through a pointer sirius does not "
                                       "follow", self.loc(ins)))

    def call(self, frame: Frame, ins: Instr) -> AV:
        callee = ins.callee
        args_v = ins.args
        if callee is None or callee.kind != "func":
            target = self.val(frame, callee) if callee is not None else Unknown("no callee")
            if isinstance(target, FuncPtr) and target.name in self.view.functions:
                return self.call_named(frame, ins, target.name, args_v)
            if self.api.pending is not None:
                raise self.error("launch through a function pointer: sirius cannot tell which "
                                 "kernel this launch runs", ins,
                                 "launch the kernel by name, or choose between launches with "
                                 "an if statement")
            if self.indirect_may_do_gpu_work():
                raise self.error("indirect call in host code that may do GPU work; sirius "
                                 "cannot tell which function it calls", ins)
            for a in args_v:
                if a.type.startswith("ptr"):
                    self.havoc_through(frame, a, Unknown("passed to an indirect call"))
            return Unknown("result of an indirect call")
        return self.call_named(frame, ins, callee.name, args_v)

    def call_named(self, frame: Frame, ins: Instr, name: str, args_v: list[Value]) -> AV:
        if name.startswith(_IGNORED_INTRINSICS):
            return Unknown("intrinsic")
        args = [self.val(frame, a) for a in args_v]
        if self.probing:
            try:
                handled = self.api.call(frame, ins, name, args_v, args)
            except HostAnalysisError as e:
                return Unknown(e.message)
        else:
            handled = self.api.call(frame, ins, name, args_v, args)
        if handled is not cudaapi.NOT_HANDLED:
            return handled
        fn = self.view.functions.get(name)
        if fn is not None and not fn.is_declaration:
            return self.call_function(fn, args, ins)
        # An external function: assume it may write through every pointer it receives.
        if not cudaapi.is_readonly(name):
            for av in args:
                if isinstance(av, HostPtr):
                    self.escaped.add(av.region)
                    self.mem.havoc(av.region, Unknown(f"written by {name}()", self.loc(ins)))
        if cudaapi.is_allocator(name):
            r = Region(self.var_name(frame, ins), "heap")
            self.regions[f"heap{r.id}"] = r
            return HostPtr(r)
        return Unknown(f"result of {name}()", self.loc(ins))


def extract_host_program(host: ModuleView, device: ModuleView, entry: str = "main") -> HostProgram:
    kernels = cudaapi.kernel_signatures(device)
    return HostInterpreter(host, kernels, entry).run()


__all__ = ["HostInterpreter", "LoopShape", "extract_host_program"]
