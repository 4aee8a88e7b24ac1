"""The per-instruction part of the rewrite of device IR into host IR (rewrite.py): the host
lines that replace a call of an NVVM intrinsic (special registers read from `@__sirius_ctx`,
barriers and warp operations calling `sirius_rt.c`, other intrinsics calling the runtime's
`sirius_nvvm_*` helpers), and the counter lines added before a memory access (with the bounds
checker's call when instrumented) and at the start of a basic block. `State` is what the
rewrite of one module gathers as it goes (temporaries, sites, externs, fibers, refusals)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import ConstExpr, Function, Instr, ModuleView
from sirius.diagnostics import Location
from sirius.runtime.cpu import native as N
from sirius.runtime.cpu.entries import arg_value, call_args, split_top

_SREG = {"tid": N.CTX_TID, "ntid": N.CTX_NTID, "ctaid": N.CTX_CTAID, "nctaid": N.CTX_NCTAID}
_AXIS = {"x": 0, "y": 4, "z": 8}
_SHFL = {"idx": N.W_SHFL_IDX, "up": N.W_SHFL_UP, "down": N.W_SHFL_DOWN, "bfly": N.W_SHFL_BFLY}
_VOTE = {"ballot": N.W_BALLOT, "any": N.W_ANY, "all": N.W_ALL, "uni": N.W_UNI}
_RED = {"popc": 1, "and": 2, "or": 3}


def _dbg(tail: str) -> str:
    m = re.search(r", !dbg !\d+", tail)
    return m.group(0) if m else ""


@dataclass
class State:
    """What the rewrite of one module gathers as it goes."""

    view: ModuleView
    instrument: bool
    smem: dict[str, int]
    smem_bytes: int
    lib_has: object
    count_flops: bool = False
    static_smem: set[str] = field(default_factory=set)  # the static __shared__ arrays
    uid: int = 0
    sites: list[Location | None] = field(default_factory=list)
    externs: dict[str, str] = field(default_factory=dict)  # name -> declaration
    fibers: set[str] = field(default_factory=set)           # functions with barriers/warp ops
    barriers: set[str] = field(default_factory=set)         # functions with barriers
    warps: set[str] = field(default_factory=set)            # functions with warp operations
    rejected: dict[str, str] = field(default_factory=dict)  # function -> reason
    counters: set[int] = field(default_factory=set)  # the function's counters (context offsets)

    def tmp(self, stem: str) -> str:
        self.uid += 1
        return f"%__{stem}{self.uid}"

    def site(self, ins: Instr) -> int:
        self.sites.append(self.view.loc(ins))
        return len(self.sites) - 1


# The counters a function adds to accumulate in stack slots of its own, `%__cnt.<context
# offset>`, which no pointer of the kernel and no runtime call can reach: LLVM keeps them in
# registers across the bounds checker's cold calls, which take the context and would otherwise
# make it load and store the context's counters around every checked access. They are added to
# the context at every stop (FLUSH: before a `ret`, a barrier, a warp operation) and start
# again from 0 after one; a thread that faults loses the counts since its last stop (the run
# failed anyway). `counter_slots` puts them at the function's start.
FLUSH = "  ; sirius: counters to the context"


def _counter(st: State, off: int) -> str:
    st.counters.add(off)
    return f"%__cnt.{off}"


def counter_slots(st: State) -> list[str]:
    """The stack slots of the counters the function uses, zeroed (at its entry)."""
    return [x for off in sorted(st.counters)
            for x in (f"  %__cnt.{off} = alloca i64, align 8",
                      f"  store i64 0, ptr %__cnt.{off}, align 8")]


def flush_lines(st: State, counters: list[int]) -> list[str]:
    """The counter slots `counters` (context offsets) added to the context's and zeroed (at a
    stop)."""
    out = []
    for off in counters:
        v, c, n = st.tmp("fl"), st.tmp("fl"), st.tmp("fl")
        out += [f"  {v} = load i64, ptr %__cnt.{off}, align 8",
                f"  {c} = load i64, ptr {N.ctx_field(off)}, align 8",
                f"  {n} = add i64 {c}, {v}",
                f"  store i64 {n}, ptr {N.ctx_field(off)}, align 8",
                f"  store i64 0, ptr %__cnt.{off}, align 8"]
    return out


# ---- NVVM intrinsics --------------------------------------------------------------------------
def _warp_call(st: State, ins: Instr, res: str, op: int, mask: str, val: str, vty: str, b: str,
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


def nvvm_lines(st: State, fn: Function, ins: Instr, line: str, name: str) -> list[str]:
    """Replacement lines for a call of `@llvm.nvvm.<name>`."""
    m = re.match(r"\s*(%[-\w.$\"]+) = ", line)
    res = m.group(1) if m else ""
    args, tail = call_args(line, f"llvm.nvvm.{name}")
    vals = [arg_value(a) for a in args]
    dbg = _dbg(tail)
    rty = ins.type
    if m := re.fullmatch(r"read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.([xyz])", name):
        return [f"  {res} = load i32, ptr {N.ctx_field(_SREG[m.group(1)] + _AXIS[m.group(2)])}, "
                f"align 4{dbg}"]
    if name in ("read.ptx.sreg.laneid", "read.ptx.sreg.warpid"):
        t = [st.tmp("l") for _ in range(7)]
        out = [f"  {t[0]} = load i32, ptr {N.ctx_field(N.CTX_TID)}, align 4",
               f"  {t[1]} = load i32, ptr {N.ctx_field(N.CTX_TID + 4)}, align 4",
               f"  {t[2]} = load i32, ptr {N.ctx_field(N.CTX_TID + 8)}, align 4",
               f"  {t[3]} = load i32, ptr {N.ctx_field(N.CTX_NTID)}, align 4",
               f"  {t[4]} = load i32, ptr {N.ctx_field(N.CTX_NTID + 4)}, align 4",
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
def _derived_from(v, is_base, depth: int = 0) -> bool:
    """True when every value the pointer may come from, through GEPs, casts, phis and
    selects, is a base (`is_base`)."""
    if depth > 16:
        return False
    if is_base(v):
        return True
    if not isinstance(v, Instr):
        return False
    if v.opcode in ("getelementptr", "bitcast", "addrspacecast"):
        return _derived_from(v.operands[0], is_base, depth + 1)
    if v.opcode == "phi":
        return all(_derived_from(o, is_base, depth + 1) for o in v.operands)
    if v.opcode == "select":
        return _derived_from(v.operands[1], is_base, depth + 1) and \
            _derived_from(v.operands[2], is_base, depth + 1)
    return False


def _is_local(v) -> bool:
    """True when the pointer is a stack slot (an alloca)."""
    return _derived_from(v, lambda b: isinstance(b, Instr) and b.opcode == "alloca")


def _is_static_shared(v, static: set[str]) -> bool:
    """True when the pointer comes from a static `__shared__` array (named in `static`). Only
    which check runs first depends on it: the check itself decides (checks.py)."""
    def is_base(b) -> bool:
        if b.kind == "global":
            return b.name.strip('"') in static
        if isinstance(b, ConstExpr):
            names = re.findall(r'@("[^"]+"|[-\w.$]+)', b.text)
            return bool(names) and all(n.strip('"') in static for n in names)
        return False
    return _derived_from(v, is_base)


def access_lines(st: State, ins: Instr, line: str) -> list[str]:
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
    # both counters always (the shared one gets `size` or 0, the global one the rest): no
    # branch, and the function's counter slots become registers (FLUSH above)
    sz, gz = st.tmp("po"), st.tmp("po")
    out += [f"  {sz} = select i1 {s}, i64 {size}, i64 0", f"  {gz} = sub i64 {size}, {sz}"]
    for kind in kinds:
        for off, add in ((N.CTX_SLD, sz), (N.CTX_GLD, gz)) if kind == 0 else \
                ((N.CTX_SST, sz), (N.CTX_GST, gz)):
            v, n = st.tmp("pv"), st.tmp("pn")
            c = _counter(st, off)
            out += [f"  {v} = load i64, ptr {c}, align 8",
                    f"  {n} = add i64 {v}, {add}",
                    f"  store i64 {n}, ptr {c}, align 8"]
    if st.instrument:
        kind = 2 if len(kinds) == 2 else kinds[0]
        check = "__sirius_access_shared" if _is_static_shared(ptr_v, st.static_smem) \
            else "__sirius_access"
        out.append(f"  call void @{check}(ptr {p}, i32 {size}, i32 {kind}, "
                   f"i32 {st.site(ins)})")
    return out


def count_lines(st: State, n: int, flops: tuple[int, ...] = ()) -> list[str]:
    """Add `n` instructions (and `flops`, per precision, with count_flops) to the counters."""
    out = []
    for off, k in [(N.CTX_ICOUNT, n)] + [(N.CTX_FLOPS + 8 * i, f)
                                         for i, f in enumerate(flops) if f]:
        v, w, c = st.tmp("ic"), st.tmp("ic"), _counter(st, off)
        out += [f"  {v} = load i64, ptr {c}, align 8",
                f"  {w} = add i64 {v}, {k}",
                f"  store i64 {w}, ptr {c}, align 8"]
    return out
