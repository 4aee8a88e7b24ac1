"""Rewrite NVPTX device IR into host IR that runs under the CPU executor's runtime.

The result is one LLVM module for the host target in which
  * every `__shared__` array is a slice of one per-worker buffer `@__sirius_smem` (static arrays
    first, the dynamic `extern __shared__` area after them);
  * address spaces are gone (`addrspacecast` becomes a no-op `bitcast`);
  * `sreg` reads load from `@__sirius_ctx`, which the runtime fills for the running thread;
  * barriers, warp shuffles and votes call into `sirius_rt.c`, which schedules the threads;
  * every basic block adds its instruction count to the context's counter (with `count_flops`,
    also its FLOPs per precision to three more: flops.py), and every load, store
    and atomic adds its bytes to the global or shared counter (decided by the address at run
    time); accesses through a stack slot are local and not counted;
  * with `instrument=True` every non-local access also calls `sirius_rt_access`, the bounds
    checker and tracer;
  * each kernel gets a wrapper `@__sirius_thread_N(ptr args)` that unpacks a CUDA-style
    argument array (`void **`) and calls it for one thread;
  * every module global (`__device__`, `__constant__`, clang's constant arrays and strings)
    gets a red zone: its type `T` becomes `<{ T, [256 x i8] }>` (the address of the global is
    still that of its `T`), so an access just past it lands in no global; a table
    `@__sirius_globals` holds their addresses, in `HostModule.globals` order, for the bounds
    checker and for restoring their initial values before every run.
The rewrite works on the text of one print of the module; `irview` (built from that same print)
supplies operand types and the pointer roots of accesses. The result is parsed and verified by
the caller (sirius/runtime/cpu/jit.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import Function, Instr, ModuleView
from sirius.diagnostics import Location
from sirius.fusion.spec import GRID_SYNC, GRID_SYNC_COUNTER, MK_FLAGS, MK_HELPERS
from sirius.runtime.cpu import native as N
from sirius.runtime.cpu import ptxlift, wiloop
from sirius.runtime.cpu.checks import access_check_ir
from sirius.runtime.cpu.entries import (
    Segments,
    arg_value,
    call_args,
    segment_wrapper,
    segments_of,
    split_top,
    thread_wrapper,
)
from sirius.runtime.cpu.flops import block_flops
from sirius.runtime.cpu.module_globals import ModuleGlobal, ir_name, module_global
from sirius.runtime.cpu.rounding import uncontracted

DYNAMIC_SMEM_MAX = 227 * 1024  # the largest dynamic shared memory a block may ask for (sm_90)

_SREG = {"tid": N.CTX_TID, "ntid": N.CTX_NTID, "ctaid": N.CTX_CTAID, "nctaid": N.CTX_NCTAID}
_AXIS = {"x": 0, "y": 4, "z": 8}
_SHFL = {"idx": N.W_SHFL_IDX, "up": N.W_SHFL_UP, "down": N.W_SHFL_DOWN, "bfly": N.W_SHFL_BFLY}
_VOTE = {"ballot": N.W_BALLOT, "any": N.W_ANY, "all": N.W_ALL, "uni": N.W_UNI}
_RED = {"popc": 1, "and": 2, "or": 3}
# Device functions whose host namesakes mean something else: CUDA's vprintf takes a packed
# argument buffer, libc's a va_list.
_RENAMED = {"vprintf": "sirius_rt_vprintf"}



@dataclass(frozen=True, slots=True)
class KernelEntry:
    name: str             # the mangled name of the kernel
    thread_fn: str        # the wrapper that runs one thread of it
    params: tuple[str, ...]
    fibers: bool          # has barriers or warp operations: needs cooperative threads
    rejected: str | None  # why the executor cannot run it (inline PTX, unknown intrinsic, ...)
    loops: bool = False   # runs as work-item loops (wiloop.py): thread_fn is a continuation
    frame_bytes: int = 0  # its per-thread frame
    # a megakernel (fusion's grid arrangement): the entries of its segments, run one after
    # another over the whole grid (what its grid barriers mean); its own body never runs
    segments: tuple[str, ...] = ()
    # a `counters` megakernel: the wait-table entries before each segment (counters.Entry)
    # and the grid its waits assume; its segments' blocks run as the waits allow
    waits: tuple[tuple[tuple[int, int, int, int, int], ...], ...] | None = None
    waits_grid: int = 0


@dataclass(frozen=True, slots=True)
class SharedArray:
    name: str
    offset: int
    bytes: int


@dataclass(frozen=True, slots=True)
class HostModule:
    text: str
    kernels: dict[str, KernelEntry]
    shared: tuple[SharedArray, ...]
    smem_static: int  # where the dynamic area starts: the static arrays' end, 16-aligned
    smem_bytes: int
    sites: tuple[Location | None, ...]
    device_globals: bool  # mutable __device__ variables: workers must share one module
    globals: tuple[ModuleGlobal, ...] = ()  # in `@__sirius_globals` order


def _dbg(tail: str) -> str:
    m = re.search(r", !dbg !\d+", tail)
    return m.group(0) if m else ""


@dataclass
class _State:
    view: ModuleView
    instrument: bool
    smem: dict[str, int]
    smem_bytes: int
    lib_has: object
    count_flops: bool = False
    uid: int = 0
    sites: list[Location | None] = field(default_factory=list)
    externs: dict[str, str] = field(default_factory=dict)  # name -> declaration
    fibers: set[str] = field(default_factory=set)           # functions with barriers/warp ops
    barriers: set[str] = field(default_factory=set)         # functions with barriers
    warps: set[str] = field(default_factory=set)            # functions with warp operations
    rejected: dict[str, str] = field(default_factory=dict)  # function -> reason

    def tmp(self, stem: str) -> str:
        self.uid += 1
        return f"%__{stem}{self.uid}"

    def site(self, ins: Instr) -> int:
        self.sites.append(self.view.loc(ins))
        return len(self.sites) - 1


def _ctx(off: int) -> str:
    return f"getelementptr (i8, ptr @__sirius_ctx, i64 {off})" if off else "@__sirius_ctx"


def _global_subst(line: str, smem: dict[str, int]) -> str:
    line = re.sub(r" addrspace\(\d+\)", "", line)
    line = re.sub(r"\baddrspacecast\b", "bitcast", line)
    line = re.sub(r"(@llvm\.[\w.]+)", lambda m: re.sub(r"\.p\d+", ".p0", m.group(1)), line)
    if smem:
        def repl(m: re.Match) -> str:
            off = smem.get(m.group(1).strip('"'))
            if off is None:
                return m.group(0)
            return f"getelementptr (i8, ptr @__sirius_smem, i64 {off})" if off else "@__sirius_smem"
        line = re.sub(r'@("[^"]+"|[-\w.$]+)', repl, line)
    return line


# ---- NVVM intrinsics --------------------------------------------------------------------------
def _warp_call(st: _State, ins: Instr, res: str, op: int, mask: str, val: str, vty: str, b: str,
               c: str, rty: str, dbg: str) -> list[str]:
    site = st.site(ins)
    lines = []
    v = val
    if vty == "float":
        v = st.tmp("w")
        lines.append(f"  {v} = bitcast float {val} to i32")
    elif vty == "i1":
        v = st.tmp("w")
        lines.append(f"  {v} = zext i1 {val} to i32")
    r = st.tmp("w")
    lines.append(f"  {r} = call i32 @sirius_rt_warp(ptr @__sirius_ctx, i32 {op}, i32 {mask}, "
                 f"i32 {v}, i32 {b}, i32 {c}, i32 {site}){dbg}")
    if res:
        conv = {"float": f"bitcast i32 {r} to float", "i1": f"trunc i32 {r} to i1",
                "i32": f"add i32 {r}, 0"}[rty]
        lines.append(f"  {res} = {conv}")
    return lines


def _nvvm(st: _State, fn: Function, ins: Instr, line: str, name: str) -> list[str]:
    """Replacement lines for a call of `@llvm.nvvm.<name>`."""
    m = re.match(r"\s*(%[-\w.$\"]+) = ", line)
    res = m.group(1) if m else ""
    args, tail = call_args(line, f"llvm.nvvm.{name}")
    vals = [arg_value(a) for a in args]
    dbg = _dbg(tail)
    rty = ins.type
    if m := re.fullmatch(r"read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.([xyz])", name):
        return [f"  {res} = load i32, ptr {_ctx(_SREG[m.group(1)] + _AXIS[m.group(2)])}, "
                f"align 4{dbg}"]
    if name in ("read.ptx.sreg.laneid", "read.ptx.sreg.warpid"):
        t = [st.tmp("l") for _ in range(7)]
        out = [f"  {t[0]} = load i32, ptr {_ctx(N.CTX_TID)}, align 4",
               f"  {t[1]} = load i32, ptr {_ctx(N.CTX_TID + 4)}, align 4",
               f"  {t[2]} = load i32, ptr {_ctx(N.CTX_TID + 8)}, align 4",
               f"  {t[3]} = load i32, ptr {_ctx(N.CTX_NTID)}, align 4",
               f"  {t[4]} = load i32, ptr {_ctx(N.CTX_NTID + 4)}, align 4",
               f"  {t[5]} = mul i32 {t[2]}, {t[4]}",
               f"  {t[6]} = add i32 {t[5]}, {t[1]}"]
        a, b = st.tmp("l"), st.tmp("l")
        out += [f"  {a} = mul i32 {t[6]}, {t[3]}", f"  {b} = add i32 {a}, {t[0]}"]
        op = "and i32 {}, 31" if name.endswith("laneid") else "lshr i32 {}, 5"
        return out + [f"  {res} = {op.format(b)}"]
    if name == "read.ptx.sreg.warpsize":
        return [f"  {res} = add i32 0, 32"]
    if name.startswith("barrier") or name == "barrier0":
        st.fibers.add(fn.name)
        st.barriers.add(fn.name)
        site = st.site(ins)
        red, pred = 0, "0"
        rm = re.search(r"\b(popc|and|or)\b", name)
        if rm:
            red = _RED[rm.group(1)]
            pty, pv = vals[-1]
            if pty == "i1":
                p = st.tmp("b")
                pre = [f"  {p} = zext i1 {pv} to i32"]
                pred = p
            else:
                pre, pred = [], pv
        else:
            pre = []
        bid = vals[0][1] if vals and not (name == "barrier0" or name.startswith("barrier0.")) \
            else "0"
        counted = re.search(r"\b(count|cnt)\b", name) or name == "barrier"
        cnt = vals[1][1] if counted and len(vals) > 1 else "0"
        if red:
            bid = vals[0][1] if len(vals) >= 2 else "0"
        r = st.tmp("b")
        out = pre + [f"  {r} = call i32 @sirius_rt_barrier(ptr @__sirius_ctx, i32 {bid}, "
                     f"i32 {cnt}, i32 {site}, i32 {red}, i32 {pred}){dbg}"]
        if res:
            out.append(f"  {res} = " + (f"trunc i32 {r} to i1" if rty == "i1"
                                         else f"add i32 {r}, 0"))
        return out
    if m := re.fullmatch(r"shfl\.sync\.(idx|up|down|bfly)\.(i32|f32)", name):
        st.fibers.add(fn.name)
        st.warps.add(fn.name)
        (_, mask), (vty, val), (_, b), (_, c) = vals
        return _warp_call(st, ins, res, _SHFL[m.group(1)], mask, val, vty, b, c, rty, dbg)
    if m := re.fullmatch(r"vote\.(ballot|any|all|uni)\.sync", name):
        st.fibers.add(fn.name)
        st.warps.add(fn.name)
        (_, mask), (vty, val) = vals
        return _warp_call(st, ins, res, _VOTE[m.group(1)], mask, val, vty, "0", "0", rty, dbg)
    if name == "match.any.sync.i32":
        st.fibers.add(fn.name)
        st.warps.add(fn.name)
        (_, mask), (vty, val) = vals
        return _warp_call(st, ins, res, N.W_MATCH_ANY, mask, val, vty, "0", "0", rty, dbg)
    if name == "bar.warp.sync":
        st.fibers.add(fn.name)
        st.warps.add(fn.name)
        return _warp_call(st, ins, "", N.W_SYNC, vals[0][1], "0", "i32", "0", "0", "void", dbg)
    if name == "activemask":
        st.fibers.add(fn.name)
        st.warps.add(fn.name)
        return _warp_call(st, ins, res, N.W_ACTIVEMASK, "0", "0", "i32", "0", "0", "i32", dbg)
    if name.startswith(("membar.", "fence.")) and not res:
        return []  # workers on x86 see each other's stores in order; atomics are real atomics
    cname = "sirius_nvvm_" + re.sub(r"[^\w]", "_", re.sub(r"\.p\d+", "", name))
    if st.lib_has(cname):
        st.externs[cname] = (f"declare {rty} @{cname}("
                             + ", ".join(t for t, _ in vals) + ")")
        call = f"call {rty} @{cname}(" + ", ".join(f"{t} {v}" for t, v in vals) + f"){dbg}"
        return [f"  {res} = {call}" if res else f"  {call}"]
    st.rejected.setdefault(fn.name, f"uses the NVVM intrinsic llvm.nvvm.{name}, which the CPU "
                                    "executor does not implement")
    return [f"  {res} = freeze {rty} poison"] if res else []


# ---- memory accesses --------------------------------------------------------------------------
def _is_local(v, depth: int = 0) -> bool:
    """True when the pointer is a stack slot (an alloca, through GEPs, casts, phis, selects)."""
    if not isinstance(v, Instr) or depth > 16:
        return False
    if v.opcode == "alloca":
        return True
    if v.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        return _is_local(v.operands[0], depth + 1)
    if v.opcode == "phi":
        return all(_is_local(o, depth + 1) for o in v.operands)
    if v.opcode == "select":
        return _is_local(v.operands[1], depth + 1) and _is_local(v.operands[2], depth + 1)
    return False


def _access(st: _State, ins: Instr, line: str) -> list[str]:
    """Counter (and checker) lines to put before a load, store, atomicrmw or cmpxchg."""
    body = line.split(" = ", 1)[1] if re.match(r"\s*%[-\w.$\"]+ = ", line) else line.strip()
    parts = split_top(body)
    if ins.opcode in ("load", "store"):
        ptr_text = parts[1].strip()
        ptr_v = ins.operands[0] if ins.opcode == "load" else ins.operands[1]
        ty = ins.type if ins.opcode == "load" else ins.operands[0].type
        kinds = [0] if ins.opcode == "load" else [1]
    else:
        ptr_text = "ptr " + parts[0].split(" ptr ", 1)[1].strip()
        ptr_v = ins.operands[0]
        ty = ins.operands[1].type
        kinds = [0, 1]
    if not ptr_text.startswith("ptr ") or _is_local(ptr_v):
        return []
    p = ptr_text[4:]
    size = type_size(ty, st.view.struct_bodies)
    a, d, s = st.tmp("pa"), st.tmp("pd"), st.tmp("ps")
    out = [f"  {a} = ptrtoint ptr {p} to i64",
           f"  {d} = sub i64 {a}, ptrtoint (ptr @__sirius_smem to i64)",
           f"  {s} = icmp ult i64 {d}, {st.smem_bytes}"]
    # both counters at fixed addresses (the shared one gets `size` or 0, the global one the
    # rest): LLVM then keeps a run of them in registers where no store may alias them
    sz, gz = st.tmp("po"), st.tmp("po")
    out += [f"  {sz} = select i1 {s}, i64 {size}, i64 0", f"  {gz} = sub i64 {size}, {sz}"]
    for kind in kinds:
        for off, add in ((N.CTX_SLD, sz), (N.CTX_GLD, gz)) if kind == 0 else \
                ((N.CTX_SST, sz), (N.CTX_GST, gz)):
            v, n = st.tmp("pv"), st.tmp("pn")
            out += [f"  {v} = load i64, ptr {_ctx(off)}, align 8",
                    f"  {n} = add i64 {v}, {add}",
                    f"  store i64 {n}, ptr {_ctx(off)}, align 8"]
    if st.instrument:
        kind = 2 if len(kinds) == 2 else kinds[0]
        out.append(f"  call void @__sirius_access(ptr {p}, i32 {size}, i32 {kind}, "
                   f"i32 {st.site(ins)})")
    return out


def _count(st: _State, n: int, flops: tuple[int, ...] = ()) -> list[str]:
    """Add `n` instructions (and `flops`, per precision, with count_flops) to the counters."""
    out = []
    for off, k in [(N.CTX_ICOUNT, n)] + [(N.CTX_FLOPS + 8 * i, f)
                                         for i, f in enumerate(flops) if f]:
        v, w = st.tmp("ic"), st.tmp("ic")
        out += [f"  {v} = load i64, ptr {_ctx(off)}, align 8",
                f"  {w} = add i64 {v}, {k}",
                f"  store i64 {w}, ptr {_ctx(off)}, align 8"]
    return out


# ---- functions --------------------------------------------------------------------------------
def _instructions(fn: Function) -> Iterator[tuple[Instr, bool]]:
    """Every instruction with a flag: True for the first non-phi of its block."""
    for b in fn.blocks:
        first = True
        for ins in b.instrs:
            start = first and ins.opcode not in ("phi", "landingpad")
            if start:
                first = False
            yield ins, start


def _function(st: _State, fn: Function, lines: list[str]) -> list[str]:
    out = [re.sub(r"\b(ptx_kernel|ptx_device) ", "", _global_subst(lines[0], st.smem))]
    instrs = _instructions(fn)
    blocks = {id(b): len(b.instrs) for b in fn.blocks}
    flops = {id(b): block_flops(i.text for i in b.instrs) for b in fn.blocks} \
        if st.count_flops else {}
    in_switch = False  # the case lines of a multi-line `switch ... [` up to its `]`
    for raw in lines[1:]:
        s = raw.strip()
        if in_switch:
            out.append(_global_subst(raw, st.smem))
            in_switch = not s.startswith("]")
            continue
        if not s or s.startswith(";") or s.startswith("#dbg_") or not raw.startswith("  "):
            out.append(_global_subst(raw, st.smem))
            continue
        ins, start = next(instrs)
        line = _global_subst(raw, st.smem)
        if ins.opcode == "switch" and s.endswith("["):
            in_switch = True
        for old, new in _RENAMED.items():
            line = line.replace(f"@{old}(", f"@{new}(")
        if start and not fn.name.startswith(ptxlift.PREFIX):  # lifted asm counts as its call
            out += _count(st, blocks[id(ins.block)], flops.get(id(ins.block), ()))
        if ins.opcode == "call":
            callee = ins.callee
            if re.search(r"\bcall\b[^@]*\basm\b", line):
                st.rejected.setdefault(fn.name, ptxlift.refusal(line))
                m = re.match(r"\s*(%[-\w.$\"]+) = ", line)
                if m:
                    out.append(f"  {m.group(1)} = freeze {ins.type} poison")
                continue
            if callee is not None and callee.name.startswith("llvm.nvvm."):
                out += _nvvm(st, fn, ins, line, callee.name[len("llvm.nvvm."):])
                continue
        elif ins.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
            out += _access(st, ins, line)
        out.append(line)
    return out


def _stub(decl: str) -> str:
    """`declare i32 @f(ptr, i32)` -> an internal definition that never runs."""
    m = re.match(r"declare (.*?)(@\S+?)\((.*)\)(.*)$", decl)
    ret_attrs, name, params, _ = m.groups()
    ps = [p.strip() for p in split_top(params)] if params.strip() else []
    named = [p if p == "..." else f"{p} %{i}" for i, p in enumerate(ps)]
    ret = ret_attrs.split()[-1] if ret_attrs.split() else "void"
    return f"define internal {ret} {name}({', '.join(named)}) {{\n  unreachable\n}}"


def rewrite(view: ModuleView, host_layout: str, host_triple: str, lib_has,
            instrument: bool = False, loops: bool = True,
            count_flops: bool = False) -> HostModule:
    """The host-target module that runs `view`'s kernels (see the module docstring); with
    `loops`, kernels whose only cooperation is `__syncthreads` run as work-item loops; with
    `count_flops`, every block also adds its FLOPs per precision to the thread's FLOP counters
    (flops.py)."""
    text = view.text
    # shared arrays, in declaration order, each aligned as declared
    shared: list[SharedArray] = []
    offset = 0
    smem: dict[str, int] = {}
    dyn: list[str] = []
    device_globals = False
    for line in text.splitlines():
        m = re.match(r'@("[^"]+"|[-\w.$]+) = .*?addrspace\((\d)\) (global|constant) ', line)
        if not m:
            continue
        name, space, kind = m.group(1).strip('"'), m.group(2), m.group(3)
        if name == GRID_SYNC_COUNTER or name.endswith(MK_FLAGS):
            continue
        if space == "1" and kind == "global":
            device_globals = True
        if space != "3":
            continue
        gv_type = view.globals[name].type
        am = re.search(r", align (\d+)", line)
        align = int(am.group(1)) if am else 4
        if " external " in f" {line} ":
            dyn.append(name)
            continue
        size = type_size(gv_type, view.struct_bodies)
        offset = (offset + align - 1) // align * align
        smem[name] = offset
        shared.append(SharedArray(name, offset, size))
        offset += size
    # the dynamic area starts 16-aligned after the static arrays; a launch's shared window is
    # [0, smem_static + its dynamic bytes)
    smem_static = (offset + 15) // 16 * 16
    for name in dyn:
        smem[name] = smem_static
    smem_bytes = smem_static + DYNAMIC_SMEM_MAX
    st = _State(view, instrument, smem, smem_bytes, lib_has, count_flops)

    out: list[str] = []
    module_globals: list[ModuleGlobal] = []
    lines = text.splitlines()
    i = 0
    kernels: list[tuple[Function, str]] = []
    spans: dict[str, tuple[int, int]] = {}  # kernel -> its lines in `out`
    headers: dict[str, str] = {}  # function -> its define line
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            j = i
            while lines[j] != "}":
                j += 1
            name = re.search(r'@("[^"]+"|[-\w.$]+)\(', line).group(1).strip('"')
            fn = view.functions[name]
            if fn.calling_conv == "ptx_kernel":
                kernels.append((fn, _global_subst(line, smem)))
            headers[fn.name] = _global_subst(line, smem)
            start = len(out)
            if name == GRID_SYNC:  # runs only on a GPU: the executor runs the segments apart
                out += [f"define internal void @{GRID_SYNC}() {{", "entry:", "  ret void", "}"]
            elif name in MK_HELPERS:  # likewise: the executor orders the segments' blocks
                out += [_global_subst(line, smem), "entry:", "  unreachable", "}"]
            else:
                out += _function(st, fn, lines[i:j + 1])
            spans[fn.name] = (start, len(out))
            i = j + 1
            continue
        i += 1
        if line.startswith("target datalayout"):
            out.append(f'target datalayout = "{host_layout}"')
        elif line.startswith("target triple"):
            out.append(f'target triple = "{host_triple}"')
        elif re.match(r"@[^=]+= .*addrspace\(3\) global", line) or \
                line.startswith(f"@{GRID_SYNC_COUNTER} ") or \
                re.match(rf"@[-\w.$]+{MK_FLAGS} = ", line):
            continue
        elif line.startswith("declare "):
            m = re.search(r'@("[^"]+"|[-\w.$]+)\(', line)
            name = m.group(1).strip('"')
            if name.startswith("llvm.nvvm."):
                continue
            decl = _global_subst(line, smem)
            if name in _RENAMED:
                continue  # declared in the prelude under the runtime's name
            if not name.startswith("llvm.") and not lib_has(name):
                st.rejected.setdefault(f"@{name}", f"calls {name}, which the CPU executor "
                                                   "does not provide")
                out.append(_stub(decl))
            else:
                out.append(decl)
        elif (mg := module_global(st.view, line)) is not None:
            module_globals.append(mg[0])
            out.append(_global_subst(mg[1], smem))
        elif line.startswith("attributes #"):
            line = re.sub(r' "target-(cpu|features)"="[^"]*"', "", line)
            out.append(re.sub(r" \b(noinline|optnone)\b", "", line))
        else:
            out.append(_global_subst(line, smem))

    # which kernels need fibers or cannot run: through the (direct) call graph
    calls = {f.name: {ins.callee.name for b in f.blocks for ins in b.instrs
                      if ins.opcode == "call" and ins.callee is not None}
             for f in view.functions.values() if not f.is_declaration}

    def reach(root: str) -> set[str]:
        seen, todo = set(), [root]
        while todo:
            f = todo.pop()
            if f not in seen:
                seen.add(f)
                todo += calls.get(f, ())
        return seen

    entries: dict[str, KernelEntry] = {}
    wrappers = []
    replaced: list[tuple[tuple[int, int], list[str]]] = []
    defined = {f.name for f in view.functions.values() if not f.is_declaration}
    todo: list[tuple[Function, str, tuple[str, ...]]] = []
    segment_calls: dict[str, tuple[Function, str, str, list[str]]] = {}
    megakernels: dict[str, Segments] = {}
    for fn, header in kernels:
        segs = segments_of(fn, defined, text)
        if segs is not None:  # never runs: its segments do (or it is refused)
            lo, hi = spans[fn.name]
            replaced.append(((lo, hi), [out[lo], "entry:", "  unreachable", "}"]))
        if isinstance(segs, str):
            st.rejected.setdefault(fn.name, segs)
            segs = None
        names: tuple[str, ...] = ()
        if segs:
            megakernels[fn.name] = segs
            names = tuple(f"{fn.name}#{j}" for j in range(len(segs.calls)))
            for entry_name, (callee, call) in zip(names, segs.calls, strict=True):
                segment_calls[entry_name] = (fn, header, callee, call)
                todo.append((view.functions[callee], header, ()))
        todo.append((fn, header, names))
    seg_names = iter(segment_calls)
    transformed: dict[str, object] = {}  # a segment function called twice: transformed once
    for k, (fn, header, segs) in enumerate(todo):
        if segs:
            why = next((st.rejected[f] for f in [fn.name] if f in st.rejected), None)
            why = why or next((entries[s].rejected for s in segs if entries[s].rejected), None)
            mk = megakernels[fn.name]
            entries[fn.name] = KernelEntry(fn.name, f"__sirius_thread_{k}",
                                           tuple(a.type for a in fn.args), False, why,
                                           segments=segs,
                                           waits=None if mk.waits is None else
                                           tuple(mk.waits), waits_grid=mk.grid)
            wrappers.append(thread_wrapper(k, header, fn))
            continue
        seg = next(seg_names) if fn.calling_conv != "ptx_kernel" else None
        r = reach(fn.name)
        why = next((st.rejected[f] for f in sorted(r) if f in st.rejected), None)
        why = why or next((st.rejected[f"@{f}"] for f in sorted(r) if f"@{f}" in st.rejected),
                          None)
        # work-item loops: barriers and warp operations in the kernel itself, no cooperation in
        # the functions it calls (wiloop.transform may still decline: fibers then)
        lw = None
        if loops and why is None and fn.name in st.fibers and not (r - {fn.name}) & st.fibers:
            if fn.name in transformed:
                lw = transformed[fn.name]
            else:
                lo, hi = spans[fn.name]
                lw = wiloop.transform(fn, out[lo:hi], view.struct_bodies)
                transformed[fn.name] = lw
                if lw is not None:
                    replaced.append((spans[fn.name], lw.text))
        if seg is not None:  # a megakernel's segment: the kernel's arguments, its call
            kfn, kheader, callee, call = segment_calls[seg]
            entries[seg] = KernelEntry(seg, f"__sirius_thread_{k}",
                                       tuple(a.type for a in kfn.args),
                                       bool(r & st.fibers), why, lw is not None,
                                       lw.frame_bytes if lw is not None else 0)
            wrappers.append(segment_wrapper(k, kheader, kfn, callee, call, lw is not None))
            continue
        entries[fn.name] = KernelEntry(fn.name, f"__sirius_thread_{k}",
                                       tuple(a.type for a in fn.args),
                                       bool(r & st.fibers), why, lw is not None,
                                       lw.frame_bytes if lw is not None else 0)
        wrappers.append(thread_wrapper(k, header, fn, lw is not None))
    for (lo, hi), text in sorted(replaced, reverse=True):
        out[lo:hi] = text

    device_globals = device_globals or any(g.mutable for g in module_globals)
    table = ", ".join(f"ptr @{ir_name(g.name)}" for g in module_globals)
    prelude = [
        f"@__sirius_ctx = global [{N.CTX_BYTES} x i8] zeroinitializer, align 64",
        f"@__sirius_globals = constant [{len(module_globals)} x ptr] "
        + (f"[{table}]" if table else "zeroinitializer"),
        f"@__sirius_smem = global [{smem_bytes} x i8] zeroinitializer, align 64",
        "declare i32 @sirius_rt_barrier(ptr, i32, i32, i32, i32, i32)",
        "declare i32 @sirius_rt_warp(ptr, i32, i32, i32, i32, i32, i32)",
        "declare void @sirius_rt_access(ptr, ptr, i32, i32, i32)",
        "declare i32 @sirius_rt_vprintf(ptr, ptr)",
        *st.externs.values(),
        *(access_check_ir(len(st.sites)) if instrument else ()),
    ]
    # the prelude goes after the target lines
    k = next(i for i, ln in enumerate(out) if ln.startswith("target triple")) + 1
    final = out[:k] + prelude + out[k:] + wrappers
    return HostModule(uncontracted("\n".join(final) + "\n"), entries, tuple(shared),
                      smem_static, smem_bytes,
                      tuple(st.sites), device_globals, tuple(module_globals))

