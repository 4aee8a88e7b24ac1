"""The control-flow half of host-program extraction: walking a function's blocks in program
order, branches whose condition is known or whose arms do no GPU work, and host loops (run as a
`Loop` of the model when their shape is known, skipped or havocked otherwise).

`HostFlow` is the base of `HostInterpreter` (extract.py), which supplies the instruction
semantics (`execute`, `val`, `call_function`, ...) and the state (`mem`, `program`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sirius.analysis.cfg import FunctionCFG, NaturalLoop
from sirius.analysis.expr import Expr
from sirius.analysis.host import cudaapi
from sirius.analysis.host.addresses import MAX_CONCRETE_TRIPS, AddressFlow, NotConcrete
from sirius.analysis.host.libcalls import IGNORED_INTRINSICS
from sirius.analysis.host.loops import LoopShape, analyse_loop, carried_values
from sirius.analysis.host.model import DevRef, Loop
from sirius.analysis.host.ops import truth
from sirius.analysis.host.values import (
    AV,
    DevPtr,
    FuncPtr,
    HostPtr,
    Int,
    Null,
    Region,
    Unknown,
    mentions,
    substitute,
)
from sirius.analysis.irview import Block, Function, Instr, Value
from sirius.diagnostics import HostAnalysisError


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


class HostFlow(AddressFlow):
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
            mask = (1 << cond.bits) - 1
            for value, dest in term.switch_cases():
                if (value - cond.e.const) & mask == 0:
                    return dest, frozenset([block])
            return term.operands[1], frozenset([block])  # default
        return self.skip_condition(frame, block, succs, cond, ctx)

    def skip_condition(self, frame: Frame, block: Block, succs: list[Block], cond: AV,
                       ctx: LoopCtx | None):
        """A branch on a value sirius does not know: skip the region it controls when that region
        does no GPU work; otherwise the model would be a guess, which is an error."""
        if self.concrete:
            raise NotConcrete
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
        term = where.terminator
        fn = self.view.debug.function_name(term.dbg) if term.dbg is not None else None
        helper = f", in {fn}()" if fn and fn != self.entry else ""
        why = Unknown(f"computed by host code sirius skips (line {loc.line if loc else '?'}"
                      f"{helper})")
        blocks = set(blocks)
        writes = self.skipped_writes(frame, blocks)  # judged before its values are forgotten
        self.skipped_accesses(frame, blocks)
        targets = [(t, self.pointer_regions(frame, t, set(), blocks)) for t, _, _ in writes]
        for b in blocks:
            for ins in b.instrs:
                frame.env[ins] = why
        for (t, (device, via), ins), (_, regions) in zip(writes, targets, strict=True):
            self.havoc_through(frame, t, why, device, via, ins, regions)

    def skipped_accesses(self, frame: Frame, blocks: set[Block]) -> None:
        """The host memory skipped code may read or write, for the syncs the host observes
        (observe.py); its values are judged before they are forgotten."""
        watch = self.watch
        if self.probing or not (watch.open and watch.pending):
            return
        for b in sorted(blocks, key=lambda b: b.function.blocks.index(b) if b.function else 0):
            for ins in b.instrs:
                if ins.opcode == "load":
                    ptrs = [(ins.operands[0], False)]
                elif ins.opcode == "store":
                    ptrs = [(ins.operands[1], True)]
                elif ins.opcode in ("call", "invoke"):
                    callee = ins.callee
                    name = callee.name if callee is not None and callee.kind == "func" else ""
                    if name.startswith(IGNORED_INTRINSICS):
                        continue
                    ro = cudaapi.is_readonly(name)
                    ptrs = [(a, w) for a in ins.args if a.type.startswith("ptr")
                            for w in ((False,) if ro else (False, True))]
                else:
                    continue
                for ptr, write in ptrs:
                    regions = self.pointer_regions(frame, ptr, set(), blocks)
                    if regions is None:
                        watch.unknown(write, self.loc(ins))
                    for r in regions or ():
                        (watch.write if write else watch.read)(r, self.loc(ins))
                    if not (watch.open and watch.pending):
                        return

    def havoc_through(self, frame: Frame, ptr: Value, why: Unknown, device: bool = False,
                      via: frozenset[str] = frozenset(), ins: Instr | None = None,
                      regions: set[Region] | None | bool = False) -> None:
        """Forget what the memory `ptr` may point into holds; `device`: a device address may
        have been written there (where is not known), `via`: bytes of those device buffers.
        `regions`: where `ptr` points, when the caller worked it out (False: not given)."""
        if regions is False:
            regions = self.pointer_regions(frame, ptr, set())
        if not self.probing and self.watch.open and self.watch.pending:
            for r in regions or ():
                self.watch.write(r, self.loc(ins))
            if regions is None:
                self.watch.unknown(True, self.loc(ins))
        if regions is None:
            regions = {r for r in self.regions.values() if r.kind != "alloca"} | self.escaped
        for r in regions:
            self.mem.havoc(r, why)
            if device:
                self.mem.taint(r, Unknown(f"a device address written to '{r.name}' by code "
                                          "sirius does not follow", self.loc(ins)))
            self.mem.add_from_device(r, via)

    def pointer_regions(self, frame: Frame, v: Value, seen: set,
                        skipped: set[Block] | frozenset = frozenset()) -> set[Region] | None:
        """The host regions the pointer `v` may point into (None: any). `skipped`: code about to
        be skipped, whose loads of pointer globals are followed (loaded_regions)."""
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
        if isinstance(v, Instr) and v.opcode == "load" and v.block in skipped:
            if v in self.assumed_loads:
                return set(self.assumed_loads[v])
            return self.loaded_regions(frame, v, skipped)
        if isinstance(v, Instr) and v.opcode in ("getelementptr", "bitcast", "phi", "select"):
            ops = v.operands[:1] if v.opcode in ("getelementptr", "bitcast") else (
                v.operands if v.opcode == "phi" else v.operands[1:])
            out: set[Region] = set()
            for o in ops:
                sub = self.pointer_regions(frame, o, seen, skipped)
                if sub is None:
                    return None
                out |= sub
            return out
        if isinstance(v, Instr) and v.opcode == "call" and v.callee is not None and \
                cudaapi.is_allocator(v.callee.name):
            return set()  # fresh heap memory, allocated inside the skipped code
        return None

    def loaded_regions(self, frame: Frame, load: Instr, skipped: set[Block]) -> set[Region] | None:
        """Where a pointer that skipped code loads from a global variable (`data[i] = ...` in a
        helper's fill loop, `data` a global the loop reloads after each library call) points:
        where the global points now, when the skipped code cannot change it: it writes only
        through pointers that cannot point into the global, and calls no function of the program
        (library functions are assumed not to write the program's globals, as elsewhere)."""
        g = load.operands[0]
        if g.kind != "global" or load.type != "ptr":
            return None
        region = self.global_region(g.name)
        held = self.mem.load(region, 0, 8, "")
        if isinstance(held, HostPtr):
            now = {held.region}
        elif isinstance(held, DevPtr | Null):
            now = set()
        else:
            return None
        # Assume the global keeps that value in the skipped code (its own stores through the
        # loaded pointer then land there) and check that nothing it writes can change it.
        self.assumed_loads[load] = now
        try:
            for b in skipped:
                for ins in b.instrs:
                    if ins.opcode == "store":
                        target = self.pointer_regions(frame, ins.operands[1], set(), skipped)
                        if target is None or region in target:
                            return None
                    elif ins.opcode in ("call", "invoke"):
                        callee = ins.callee
                        if callee is None or callee.kind != "func":
                            return None
                        fn = self.view.functions.get(callee.name)
                        if fn is not None and not fn.is_declaration or \
                                any(a.kind == "global" and a.name == g.name for a in ins.args):
                            return None
        finally:
            del self.assumed_loads[load]
        return now

    # loops ---------------------------------------------------------------------------------
    def run_loop(self, frame: Frame, lp: NaturalLoop, preds: frozenset[Block]):
        gpu = self.blocks_do_gpu_work(lp.blocks)
        if gpu is None:
            return self.skip_loop(frame, lp, preds)
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

    def skip_loop(self, frame: Frame, lp: NaturalLoop, preds: frozenset[Block] = frozenset()):
        if any(device for _, (device, _), _ in self.skipped_writes(frame, set(lp.blocks))):
            done = self.run_concretely(frame, lp, preds)  # it fills a table of device pointers
            if done is not None:
                return done
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

    def run_concretely(self, frame: Frame, lp: NaturalLoop, preds: frozenset[Block]):
        """Run a loop that does no GPU work iteration by iteration (it writes device addresses
        into host memory: see addresses.py); the block after it, or None (state unchanged)
        when some branch cannot be decided or it runs too long."""
        if len(lp.latches) != 1 or not preds:
            return None
        saved = self.snapshot(frame)
        self.concrete += 1
        try:
            ctx, into = LoopCtx(lp, {}), preds
            for _ in range(MAX_CONCRETE_TRIPS):
                self.eval_phis(frame, lp.header, into)
                out = self.walk(frame, lp.header, into, ctx, phis_done=True)
                if isinstance(out, tuple) and out[0] == "exit":
                    return out[1], out[2]
                if out is not _BACKEDGE:
                    break
                into = frozenset(lp.latches)
        except (NotConcrete, HostAnalysisError):
            pass
        finally:
            self.concrete -= 1
        self.restore(frame, saved)
        return None

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
                self.api.snapshot(), self.n_opaque, dict(self.mem.tainted),
                dict(self.mem.from_device))

    def restore(self, frame: Frame, saved) -> None:
        env, cells, havocked, escaped, api, n_opaque, tainted, from_device = saved
        frame.env.clear()
        frame.env.update(env)
        self.mem.cells, self.mem.havocked, self.escaped = cells, havocked, escaped
        self.mem.tainted, self.mem.from_device = tainted, from_device
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

