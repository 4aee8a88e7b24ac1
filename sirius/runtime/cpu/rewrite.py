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
from dataclasses import dataclass

from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import Function, Instr, ModuleView
from sirius.diagnostics import Location
from sirius.fusion.spec import (
    GRID_SYNC,
    GRID_SYNC_COUNTER,
    MK_FLAGS,
    MK_HELPERS,
    MK_SIGNAL,
    MK_WAIT,
)
from sirius.runtime.cpu import native as N
from sirius.runtime.cpu import ptxlift, wiloop
from sirius.runtime.cpu.checks import access_check_ir
from sirius.runtime.cpu.counters import CounterProgram
from sirius.runtime.cpu.entries import (
    BLOCK_DECLS,
    Segments,
    block_wrapper,
    segment_wrapper,
    segments_of,
    split_top,
    thread_wrapper,
)
from sirius.runtime.cpu.flops import block_flops
from sirius.runtime.cpu.helperexec import Unsupported, compile_helper
from sirius.runtime.cpu.lowering import (
    FLUSH,
    State,
    access_lines,
    count_lines,
    counter_slots,
    flush_lines,
    nvvm_lines,
)
from sirius.runtime.cpu.module_globals import ModuleGlobal, ir_name, module_global
from sirius.runtime.cpu.rounding import uncontracted

DYNAMIC_SMEM_MAX = 227 * 1024  # the largest dynamic shared memory a block may ask for (sm_90)

# Device functions whose host namesakes mean something else: CUDA's vprintf takes a packed
# argument buffer, libc's a va_list.
_RENAMED = {"vprintf": "sirius_rt_vprintf"}



def _entry_symbol(k: int, loops: bool) -> str:
    """What the runtime calls for kernel entry k: a thread, or a work-item-loop kernel's round
    over a block (entries.block_wrapper)."""
    return f"__sirius_block_{k}" if loops else f"__sirius_thread_{k}"


@dataclass(frozen=True, slots=True)
class KernelEntry:
    name: str             # the mangled name of the kernel
    thread_fn: str        # the wrapper that runs one thread of it (work-item loops: a round of
                          # the block, entries.block_wrapper)
    params: tuple[str, ...]
    fibers: bool          # has barriers or warp operations: needs cooperative threads
    rejected: str | None  # why the executor cannot run it (inline PTX, unknown intrinsic, ...)
    loops: bool = False   # runs as work-item loops (wiloop.py): thread_fn is a continuation
    frame_bytes: int = 0  # its per-thread frame
    # a megakernel (fusion's grid arrangement): the entries of its segments, run one after
    # another over the whole grid (what its grid barriers mean); its own body never runs
    segments: tuple[str, ...] = ()
    # a `counters` megakernel: its helper calls, the helpers and their tables; its segments'
    # blocks run as fibers, as far as the helpers let them (counters.py)
    counters: CounterProgram | None = None
    # a device loop: the segments run this many times (each entry takes the iteration as
    # one more i32 argument after the kernel's)
    trips: int = 1


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


# a function's linkage, preemption and visibility, as LLVM prints them after `define`
_LINKAGE_RE = re.compile(r"^define (?:(?:private|internal|external|linkonce|linkonce_odr|weak|"
                         r"weak_odr|available_externally|common) )?(?:(?:dso_local|"
                         r"dso_preemptable) )?(?:(?:hidden|protected|default) )?")


def _internal(header: str) -> str:
    """A function's `define` line with internal linkage (and in no comdat). Every function of
    the device module is internal on the host: only the entries (entries.py) are looked up,
    so LLVM drops a kernel once it is inlined into its entry instead of compiling it twice
    (three times with a block loop)."""
    return re.sub(r" comdat(?:\(\$[^)]*\))?", "", _LINKAGE_RE.sub("define internal ", header, 1))


def _function(st: State, fn: Function, lines: list[str]) -> list[str]:
    """The host lines of one device function, with its counters in slots of its own and a
    FLUSH marker at every stop (lowering.FLUSH; `_flushes` expands them)."""
    st.counters = set()
    out = _body(st, fn, lines)
    if not st.counters:
        return [line for line in out if line != FLUSH]
    first = next(i for i, line in enumerate(out) if i and line.startswith("  "))
    return out[:first] + counter_slots(st) + out[first:]


def _flushes(st: State, lines: list[str]) -> list[str]:
    """`lines` with each FLUSH marker replaced by the adding of its function's counter slots to
    the context. The work-item-loop transform (wiloop.py) has dropped the markers of the
    kernels it made continuations: their slots are their block loop's."""
    out: list[str] = []
    slots: list[int] = []
    for line in lines:
        if line == FLUSH:
            out += flush_lines(st, slots)
            continue
        if line.startswith("define "):
            slots = []
        elif (m := wiloop.COUNTER_SLOT.match(line)) and m.group(1) is not None:
            slots.append(int(m.group(1)))
        out.append(line)
    return out


def _body(st: State, fn: Function, lines: list[str]) -> list[str]:
    out = [_internal(re.sub(r"\b(ptx_kernel|ptx_device) ", "",
                            _global_subst(lines[0], st.smem)))]
    instrs = _instructions(fn)
    blocks = {id(b): sum(map(_executes, b.instrs)) for b in fn.blocks}
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
            out += count_lines(st, blocks[id(ins.block)], flops.get(id(ins.block), ()))
        if ins.opcode == "call":
            callee = ins.callee
            if re.search(r"\bcall\b[^@]*\basm\b", line):
                st.rejected.setdefault(fn.name, ptxlift.refusal(line))
                m = re.match(r"\s*(%[-\w.$\"]+) = ", line)
                if m:
                    out.append(f"  {m.group(1)} = freeze {ins.type} poison")
                continue
            if callee is not None and callee.name.startswith("llvm.nvvm."):
                for new in nvvm_lines(st, fn, ins, line, callee.name[len("llvm.nvvm."):]):
                    if "@sirius_rt_barrier(" in new or "@sirius_rt_warp(" in new:
                        out.append(FLUSH)  # a stop: the work-item loops return there
                    out.append(new)
                continue
        elif ins.opcode == "ret":
            out.append(FLUSH)
        elif ins.opcode in ("load", "store", "atomicrmw", "cmpxchg"):
            out += access_lines(st, ins, line)
        out.append(line)
    return out


# intrinsics that only inform the optimizer (scopes, lifetimes, assumptions, debug values):
# no machine instruction comes of them, and the instruction counter does not count them
_MARKERS = ("llvm.experimental.noalias.scope.decl", "llvm.lifetime.", "llvm.assume",
            "llvm.dbg.", "llvm.invariant.", "llvm.sideeffect", "llvm.pseudoprobe",
            "llvm.var.annotation", "llvm.donothing")


def _executes(ins: Instr) -> bool:
    """Whether `ins` is counted as an executed instruction (not an optimizer marker)."""
    callee = ins.callee
    return callee is None or not callee.name.startswith(_MARKERS)


def _stub(decl: str) -> str:
    """`declare i32 @f(ptr, i32)` -> an internal definition that never runs."""
    m = re.match(r"declare (.*?)(@\S+?)\((.*)\)(.*)$", decl)
    ret_attrs, name, params, _ = m.groups()
    ps = [p.strip() for p in split_top(params)] if params.strip() else []
    named = [p if p == "..." else f"{p} %{i}" for i, p in enumerate(ps)]
    ret = ret_attrs.split()[-1] if ret_attrs.split() else "void"
    return f"define internal {ret} {name}({', '.join(named)}) {{\n  unreachable\n}}"


def _counter_program(view: ModuleView, calls: tuple) -> tuple[CounterProgram | None, str | None]:
    """A `counters` megakernel's helper calls with the helpers compiled (helperexec.py), or
    why the executor cannot run its helpers."""
    waits, signals, memory = calls
    codes = {}
    for name in ((MK_WAIT,) if any(w is not None for w in waits) else ()) + (MK_SIGNAL,):
        fn = view.functions.get(name)
        if fn is None or fn.is_declaration:
            return None, f"its counter helper {name} is not defined in the module"
        try:
            codes[name] = compile_helper(fn)
        except Unsupported as e:
            return None, f"the executor cannot run its counter helper {name}: {e}"
    return CounterProgram(waits, signals, codes.get(MK_WAIT), codes[MK_SIGNAL], memory), None


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
    st = State(view, instrument, smem, smem_bytes, lib_has, count_flops,
               static_smem={a.name for a in shared})

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
    segment_calls: dict[str, tuple[Function, str, str, list[str], str | None]] = {}
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
                segment_calls[entry_name] = (fn, header, callee, call, segs.iteration)
                todo.append((view.functions[callee], header, ()))
        todo.append((fn, header, names))
    seg_names = iter(segment_calls)
    transformed: dict[str, object] = {}  # a segment function called twice: transformed once
    for k, (fn, header, segs) in enumerate(todo):
        if segs:
            why = next((st.rejected[f] for f in [fn.name] if f in st.rejected), None)
            why = why or next((entries[s].rejected for s in segs if entries[s].rejected), None)
            mk = megakernels[fn.name]
            prog = None
            if mk.counters is not None:
                prog, bad = _counter_program(view, mk.counters)
                why = why or bad
            entries[fn.name] = KernelEntry(fn.name, f"__sirius_thread_{k}",
                                           tuple(a.type for a in fn.args), False, why,
                                           segments=segs, counters=prog, trips=mk.trips)
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
            kfn, kheader, callee, call, it = segment_calls[seg]
            entries[seg] = KernelEntry(seg, _entry_symbol(k, lw is not None),
                                       tuple(a.type for a in kfn.args) + (("i32",) if it
                                                                           else ()),
                                       bool(r & st.fibers), why, lw is not None,
                                       lw.frame_bytes if lw is not None else 0)
            wrappers.append(segment_wrapper(k, kheader, kfn, callee, call, lw is not None,
                                            it))
            if lw is not None:
                wrappers.append(block_wrapper(k, lw))
            continue
        entries[fn.name] = KernelEntry(fn.name, _entry_symbol(k, lw is not None),
                                       tuple(a.type for a in fn.args),
                                       bool(r & st.fibers), why, lw is not None,
                                       lw.frame_bytes if lw is not None else 0)
        wrappers.append(thread_wrapper(k, header, fn, lw is not None))
        if lw is not None:
            wrappers.append(block_wrapper(k, lw))
    for (lo, hi), text in sorted(replaced, reverse=True):
        out[lo:hi] = text
    out = _flushes(st, out)

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
        *(access_check_ir(len(st.sites), smem_static) if instrument else ()),
    ]
    if any(e.loops for e in entries.values()):  # what the block loops call
        declared = {m.group(1) for ln in out if ln.startswith("declare ")
                    for m in [re.search(r"@([-\w.$]+)\(", ln)] if m}
        prelude += [d for d in BLOCK_DECLS
                    if re.search(r"@([-\w.$]+)\(", d).group(1) not in declared]
    # the prelude goes after the target lines
    k = next(i for i, ln in enumerate(out) if ln.startswith("target triple")) + 1
    final = out[:k] + prelude + out[k:] + wrappers
    return HostModule(uncontracted("\n".join(final) + "\n"), entries, tuple(shared),
                      smem_static, smem_bytes,
                      tuple(st.sites), device_globals, tuple(module_globals))

