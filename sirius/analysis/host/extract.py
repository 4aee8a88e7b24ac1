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
from collections.abc import Sequence

from sirius.analysis.cfg import FunctionCFG
from sirius.analysis.expr import Expr
from sirius.analysis.host import cudaapi
from sirius.analysis.host.argv import program_arguments, string_call
from sirius.analysis.host.floats import float_binary, float_call
from sirius.analysis.host.flow import Frame, HostFlow
from sirius.analysis.host.libcalls import IGNORED_INTRINSICS
from sirius.analysis.host.loops import LoopShape
from sirius.analysis.host.model import Buffer, HostProgram, Op, Symbol
from sirius.analysis.host.observe import SyncWatch
from sirius.analysis.host.ops import (
    binary,
    cast,
    funnel_call,
    icmp,
    minmax_call,
    shift_to_packed,
    signed_minmax,
    truth,
)
from sirius.analysis.host.symbols import device_variables
from sirius.analysis.host.values import (
    AV,
    DevPtr,
    Flt,
    FltInt,
    FuncPtr,
    HostPtr,
    Int,
    Memory,
    Null,
    Region,
    Unknown,
    const,
    int_bits,
    offset_addr,
)
from sirius.analysis.irtypes import TypeTable
from sirius.analysis.irview import (
    Argument,
    Const,
    ConstExpr,
    Function,
    Instr,
    ModuleView,
    Value,
)
from sirius.diagnostics import HostAnalysisError, Location


class HostInterpreter(HostFlow):
    def __init__(self, host: ModuleView, kernels: dict[str, cudaapi.KernelSig], entry: str,
                 argv: Sequence[str] | None = None,
                 device_vars: dict[str, Symbol] | None = None):
        self.view = host
        self.types = TypeTable(host.struct_bodies)
        self.kernels = kernels
        # the device module's __device__/__constant__ variables by IR name (symbols.py)
        self.device_vars = device_vars or {}
        self.entry = entry
        self.argv = tuple(argv) if argv is not None else None
        self.mem = Memory()
        self.regions: dict[str, Region] = {}
        self.escaped: set[Region] = set()
        self.buffers: list[Buffer] = []
        self.ops: list[list[Op]] = [[]]
        self.call_stack: list[Function] = []
        # loads of pointer globals in code being skipped, assumed to give what the global holds
        # while that is checked (flow.py, loaded_regions)
        self.assumed_loads: dict[Value, set[Region]] = {}
        self.cfgs: dict[Function, FunctionCFG] = {}
        self.gpu_fn: dict[str, bool] = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.loop_vars: set[str] = set()
        self.n_opaque = 0
        self.probing = 0
        self.api = cudaapi.CudaRuntime(self)
        self.watch = SyncWatch()

    # entry ---------------------------------------------------------------------------------
    def run(self) -> HostProgram:
        fn = self.view.functions.get(self.entry)
        if fn is None:
            fn = self.entry_by_source_name()
        if fn is None or fn.is_declaration:
            raise HostAnalysisError(f"the host entry function '{self.entry}' is not defined "
                                    "in the program (use --entry NAME to pick another)")
        args: list[AV] = []
        if self.argv is not None:
            if len(fn.args) < 2:
                raise HostAnalysisError(f"--args given, but the entry function '{self.entry}' "
                                        "takes no (argc, argv) parameters")
            args = list(program_arguments(self.mem, self.argv))
        self.call_function(fn, args, None)
        return HostProgram(self.entry, tuple(self.api.finish_buffers()), tuple(self.ops[0]),
                           self.argv, tuple(self.api.symbols.values()))

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
        if not self.probing:
            self.watch.emitted(self.ops[-1], op)

    def touched(self, av: AV, write: bool, ins: Instr | None) -> None:
        """Host memory accessed at `ins` (for the syncs the host observes: observe.py)."""
        if self.probing or not (self.watch.open and self.watch.pending):
            return
        if isinstance(av, HostPtr):
            if write:
                self.watch.write(av.region, self.loc(ins))
            else:
                self.watch.read(av.region, self.loc(ins))
        elif not isinstance(av, DevPtr | Null | FuncPtr):
            self.watch.unknown(write, self.loc(ins))

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
        name = self.var_name(frame, v)  # the source name where debug info gives one
        if isinstance(v, Argument):  # of the entry function (calls bind their arguments)
            fn = self.view.source_name(frame.fn) or frame.fn.name
            hint = " (give the program's arguments with --args \"A B ...\")" \
                if frame.fn.name == self.entry or fn == self.entry else ""
            return Unknown(f"'{name}' is a parameter of {fn}, known only when the program "
                           f"runs{hint}")
        return Unknown(f"'{name}' is not computed on the path sirius follows")

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
            return float_binary(op, self.val(frame, ops[0]), self.val(frame, ops[1]), ins.type,
                                self.ranges)
        if op == "fneg":
            a = self.val(frame, ops[0])
            if isinstance(a, FltInt):
                return FltInt(-a.e, a.mant, a.den)
            return Flt(-a.v) if isinstance(a, Flt) else a
        if op == "icmp":
            return icmp(ins.predicate, self.val(frame, ops[0]), self.val(frame, ops[1]),
                        ops[0].type, self.ranges)
        if op in ("zext", "sext", "trunc", "ptrtoint", "inttoptr", "bitcast", "addrspacecast",
                  "sitofp", "uitofp", "fptosi", "fptoui", "fptrunc", "fpext", "freeze"):
            return cast(op, self.val(frame, ops[0]), ops[0].type, ins.type, self.ranges)
        if op == "select":
            c = truth(self.val(frame, ops[0]))
            if c is not None:
                return self.val(frame, ops[1] if c else ops[2])
            a, b = self.val(frame, ops[1]), self.val(frame, ops[2])
            mm = self.select_minmax(frame, ops[0], a, b, ins.type)
            if mm is not None:
                return mm
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
                        return _unknown_index(idx)
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
                        return _unknown_index(idx)
                    total = total + idx.e.scale(self.types.size(elem_ty))
                    cur = elem_ty
        except (ValueError, KeyError) as e:
            return Unknown(f"cannot lay out type {ty}: {e}")
        if isinstance(base, DevPtr):
            return DevPtr(offset_addr(base.addr, total))
        return HostPtr(base.region, base.offset + total)

    def load(self, frame: Frame, ins: Instr) -> AV:
        p = self.val(frame, ins.operands[0])
        self.touched(p, False, ins)
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
        device, via = self.provenance(frame, ins.operands[0])
        if isinstance(p, HostPtr):
            self.touched(p, True, ins)
            placed = p.offset.is_const
            if placed:
                self.mem.store(p.region, p.offset.const, self.types.size(ins.operands[0].type), v)
            else:
                self.mem.havoc(p.region, Unknown(f"host memory '{p.region.name}' written at "
                                                 "an index that depends on loop variables",
                                                 self.loc(ins)))
            if device and not (placed and isinstance(v, DevPtr)):
                what = f"a device address written to '{p.region.name}' at an index sirius " \
                    "does not know" if not placed else f"a pointer sirius does not know (a " \
                    f"device address?) written to '{p.region.name}'"
                self.mem.taint(p.region, Unknown(what, self.loc(ins)))
            self.mem.add_from_device(p.region, via)
        elif not isinstance(p, DevPtr):
            self.havoc_through(frame, ins.operands[1],
                               Unknown("host memory written through a pointer sirius does not "
                                       "follow", self.loc(ins)), device, via, ins)

    def select_minmax(self, frame: Frame, cond, a: AV, b: AV, ty: str) -> AV | None:
        """`select (icmp x, y), a, b` with {a, b} = {x, y}: the min or max of x and y (what
        `MIN(x, y)` compiles to without the intrinsic); None for any other select."""
        if not (isinstance(cond, Instr) and cond.opcode == "icmp" and isinstance(a, Int)
                and isinstance(b, Int) and ty.startswith("i")):
            return None
        pred = cond.predicate
        if pred in ("eq", "ne"):
            return None
        x, y = (self.val(frame, o) for o in cond.operands[:2])
        if {x, y} != {a, b} or x == y:
            return None
        less = pred[1:] in ("lt", "le")
        kind = "min" if less == (a == x) else "max"
        return signed_minmax(kind, a, b, int_bits(ty), pred[0] == "u", self.ranges)

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
        if name.startswith(IGNORED_INTRINSICS):
            return Unknown("intrinsic")
        args = [self.val(frame, a) for a in args_v]
        known = float_call(name, args, self.ranges)
        if known is None:
            known = minmax_call(name, args, self.ranges)
        if known is None:
            known = funnel_call(name, args, self.ranges)
        if known is None:
            known = string_call(name, args, self.mem)
        if known is not None:
            return known
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
        # An external function: assume it may write through every pointer it receives, and
        # copy there what the others point to.
        for a, av in zip(args_v, args, strict=True):
            if a.type.startswith("ptr"):
                self.touched(av, False, ins)
                if not cudaapi.is_readonly(name):
                    self.touched(av, True, ins)
        if not cudaapi.is_readonly(name):
            device = any(isinstance(av, DevPtr) for av in args)
            via: frozenset[str] = frozenset()
            for a in args_v:
                if a.type.startswith("ptr"):
                    d, v = self.provenance(frame, a, through=True)
                    device, via = device or d, via | v
            for av in args:
                if isinstance(av, HostPtr):
                    self.escaped.add(av.region)
                    self.mem.havoc(av.region, Unknown(f"written by {name}()", self.loc(ins)))
                    if device:
                        self.mem.taint(av.region, Unknown(f"device addresses may be copied to "
                                                          f"'{av.region.name}' by {name}()",
                                                          self.loc(ins)))
                    self.mem.add_from_device(av.region, via)
        if cudaapi.is_allocator(name):
            r = Region(self.var_name(frame, ins), "heap")
            self.regions[f"heap{r.id}"] = r
            return HostPtr(r)
        return Unknown(f"result of {name}()", self.loc(ins))


def extract_host_program(host: ModuleView, device: ModuleView, entry: str = "main",
                         argv: Sequence[str] | None = None) -> HostProgram:
    """The host model of the program run from `entry`; `argv`: the program's arguments (argc
    and argv then known, argv[0] being "program"), None: unknown."""
    kernels = cudaapi.kernel_signatures(device)
    return HostInterpreter(host, kernels, entry, argv, device_variables(device)).run()


__all__ = ["HostInterpreter", "LoopShape", "extract_host_program"]


def _unknown_index(idx: AV) -> Unknown:
    """Why an address indexed by `idx` is not known: the index's own reason where it has one
    (a host variable changed in a loop: `src = 1 - src`), not only that an offset is unknown."""
    why = idx.reason if isinstance(idx, Unknown) else "not an integer"
    return Unknown(f"an array index or pointer offset sirius cannot follow: the index is {why}"
                   if why.startswith("not ") else
                   f"an array index or pointer offset sirius cannot follow: the index is not "
                   f"known ({why})")
