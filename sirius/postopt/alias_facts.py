"""`alias-facts`: `noalias` on kernel pointer parameters that the host model proves disjoint
(issue 14, item 2).

The host model knows, for every launch, which allocation each pointer argument points into and
at which byte offset; the kernel access summary (sirius/analysis/kernel/summary.py) knows which
bytes, relative to each pointer parameter, the kernel may read and write (exact, or an
over-approximation; an offset it cannot express is "any byte"). For every kernel of the module
and every launch of it in the (fused) host program, two pointer parameters *conflict* when
their footprints may meet on a byte that one of them writes:

- arguments in distinct allocations never conflict;
- arguments in one allocation conflict unless (writes of one, shifted by its offset) and
  (accesses of the other, shifted by its offset) are provably disjoint, for every value of the
  host loop variables and unknown scalars (isl emptiness);
- an argument whose allocation or offset the host model does not know (a rotating pointer, an
  offset isl cannot write) conflicts with every parameter it may meet: with every other
  parameter that touches memory when one of the two writes;
- a null argument, or a parameter the kernel never dereferences, touches no byte.

A pointer parameter that conflicts with no other parameter in any launch, and whose location is
known in every launch, becomes `noalias`. Read-only overlap is no conflict: LLVM's `noalias`
only speaks of memory that is modified during the call.

Why this is sound, including NVPTX's non-coherent loads. LLVM reads `noalias` as: memory
reached through this parameter is not reached, during the kernel, through any pointer not
based on it, where that memory is modified. The pairwise check covers the other parameters; the
kernel is refused outright (no parameter gets anything) when another path could reach that
memory: an access through a pointer loaded from memory (pointer tables, `__device__` pointer
variables; a pointer the kernel stores matters only where it is loaded back, and that load is
such an access), an access to a module global in the global address space (the host may have
passed its address), an access the summary cannot attribute to a base (`any`), a call to a
device function that is not always inlined (or to a declared one, except libdevice functions
without pointer parameters), an indirect or recursive call, inline asm that touches memory,
textures. NVPTX turns loads through a `noalias` parameter that the kernel only reads into
`ld.global.nc`, which is correct only if nothing writes that memory while the kernel runs: a
read-only parameter that conflicts with no other parameter is written through none of them, and
the refusals above exclude every other path, so nothing writes it.

Threads. LLVM reasons about one thread: with a `noalias` parameter that is not captured, a call
to `__syncthreads` (or a fence) is assumed not to touch its memory, so a load after the barrier
may be merged with a load of the same address before it, across another thread's store. In a
kernel with barriers, fences, warp synchronisation or atomics, only parameters nothing writes
(no store or atomic through them in any launch) get `noalias`; in a kernel without any of these,
two threads that communicate through memory race, and the program has no defined result anyway.

Requires the fused host program (`sirius fuse`); runs after host-constants (its clones have
launches of their own) and before `llvm-opt`, whose inliner carries the attribute into the
inlined fragments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import islpy as isl
import llvmlite.binding as llvm

from sirius.analysis.expr import Expr
from sirius.analysis.host.model import BufferArg, DevRef, Launch, NullArg
from sirius.analysis.irview import ModuleView, build_view
from sirius.analysis.kernel.access import KernelAnalyzer
from sirius.analysis.kernel.facts import KernelInfo, kernel_infos
from sirius.analysis.kernel.flows import ASM_MEMORY_RE, ASM_RE
from sirius.analysis.kernel.summary import KernelSummary
from sirius.analysis.uar.effects import binding_of
from sirius.backend.ptx import ptx_version_for, target_machine
from sirius.postopt.base import ModulePass, PassContext, PassInput
from sirius.postopt.kernel_text import KernelText, ModuleEdit, Param

__all__ = ["AliasFacts", "Footprint", "noalias_params", "refusal"]

_BASES_OK = ("param", "shared", "local", "const", "null")
_SYNC_RE = re.compile(r"\bfence\b|\batomicrmw\b|\bcmpxchg\b|llvm\.nvvm\.(?:membar|fence|"
                      r"barrier|bar\.|atomic|red\.|cp\.async)")
_UNKNOWN = "?"  # a location the host model does not know


@dataclass(frozen=True, slots=True)
class Footprint:
    """The bytes a kernel may touch through one pointer parameter under one launch binding,
    relative to the parameter: all accesses, and the writes (stores and atomics) among them,
    as isl sets `{ [x] }` (None: no byte)."""

    touched: isl.Set | None
    written: isl.Set | None


def footprints(summary: KernelSummary, n: int) -> list[Footprint]:
    """Per parameter index < n, what the kernel touches through it."""
    acc: dict[tuple[int, str], isl.Set] = {}
    for (base, mode), rel in summary.effects("kernel").items():
        if base.space == "param":
            acc[(int(base.ref), mode)] = rel.range()  # type: ignore[arg-type]
    out = []
    for i in range(n):
        r, w = acc.get((i, "read")), acc.get((i, "write"))
        touched = w if r is None else r if w is None else r.union(w).coalesce()
        out.append(Footprint(touched, w))
    return out


def _shifted(s: isl.Set | None, offset: Expr) -> isl.Set | None:
    """The set moved by a byte offset (an Expr over host loop variables)."""
    if s is None or offset.is_const and offset.const == 0:
        return s
    names = sorted(offset.variables())
    head = f"[{', '.join(names)}] -> " if names else ""
    return s.apply(isl.Map(f"{head}{{ [x] -> [y] : y = x + {offset} }}"))


def _meet(a: isl.Set | None, b: isl.Set | None) -> bool:
    """Whether two byte sets may share a byte for some value of their parameters."""
    if a is None or b is None:
        return False
    a = a.align_params(b.get_space())
    return not a.intersect(b.align_params(a.get_space())).is_empty()


def _location(arg: object) -> tuple[str, Expr] | None | str:
    """(buffer, byte offset) of a pointer argument; None for a null pointer; _UNKNOWN else."""
    if isinstance(arg, NullArg):
        return None
    if isinstance(arg, BufferArg) and isinstance(arg.address, DevRef) \
            and isinstance(arg.address.offset, Expr):
        return arg.address.buffer, arg.address.offset
    return _UNKNOWN


def _conflicts(loc_i, loc_j, fi: Footprint, fj: Footprint) -> bool:
    """Whether parameters i and j may meet on a byte one of them writes in one launch."""
    if fi.touched is None or fj.touched is None or loc_i is None or loc_j is None:
        return False  # one touches nothing (never dereferenced, or a null argument)
    if fi.written is None and fj.written is None:
        return False  # read-only overlap: noalias says nothing about unmodified memory
    if loc_i == _UNKNOWN or loc_j == _UNKNOWN:
        return True
    (buf_i, off_i), (buf_j, off_j) = loc_i, loc_j
    if buf_i != buf_j:
        return False
    try:
        wi, ti = _shifted(fi.written, off_i), _shifted(fi.touched, off_i)
        wj, tj = _shifted(fj.written, off_j), _shifted(fj.touched, off_j)
        return _meet(wi, tj) or _meet(ti, wj)
    except isl.Error:
        return True


def _has_alwaysinline(view: ModuleView, name: str) -> bool:
    fn = view.functions[name]
    head = fn.text.split("{", 1)[0]
    if re.search(r"\balwaysinline\b", head):
        return True
    m = re.search(r"#(\d+)", head)
    return m is not None and bool(re.search(r"\balwaysinline\b",
                                            view.attribute_group(int(m.group(1))) or ""))


def _takes_pointer(view: ModuleView, name: str) -> bool:
    fn = view.functions.get(name)
    if fn is not None and not fn.is_declaration:
        return any(a.type.startswith("ptr") for a in fn.args)
    m = re.search(rf"^declare [^\n]*@{re.escape(name)}\(([^\n]*)\)", view.text, re.M)
    return m is None or "ptr" in m.group(1)


def refusal(view: ModuleView, info: KernelInfo) -> str | None:
    """Why no parameter of the kernel may get `noalias` whatever its launches, or None."""
    for name in info.calls:
        fn = view.functions.get(name)
        if fn is None or fn.is_declaration:
            return f"calls {name}, which is not defined in the module"
        if not _has_alwaysinline(view, name):
            return f"calls {name}, which is not always inlined"
    for name in info.libdevice:
        if _takes_pointer(view, name):
            return f"calls {name}, which takes a pointer"
    if info.indirect_calls or info.recursive:
        return "has an indirect or recursive call"
    if info.textures:
        return "reads textures"
    for name in (info.mangled, *info.calls):
        for m in ASM_RE.finditer(view.functions[name].text):
            if ASM_MEMORY_RE.search(m.group(1)) or "~{memory}" in m.group(2):
                return "has inline asm that touches memory"
    return None


def synchronises(view: ModuleView, info: KernelInfo) -> bool:
    """Whether threads of the kernel may order their memory accesses: barriers, fences, warp
    synchronisation, atomics."""
    if info.barriers or info.atomics or info.warp_ops:
        return True
    return any(_SYNC_RE.search(view.functions[n].text) for n in (info.mangled, *info.calls))


def summary_refusal(summary: KernelSummary) -> str | None:
    """Why the accesses of a kernel under one launch rule out `noalias`, or None."""
    for a in summary.accesses:
        if a.base.space not in _BASES_OK:
            return f"accesses memory through {a.base} ({a.reason or a.opcode})"
    return None


def noalias_params(view: ModuleView, analyzer: KernelAnalyzer, info: KernelInfo,
                   ops: list[Launch]) -> tuple[set[int], str]:
    """The parameters of a kernel that may be `noalias` in all its launches, and, when there
    are none, why."""
    why = refusal(view, info)
    if why:
        return set(), why
    ptrs = [i for i, p in enumerate(info.params) if p.ir_type == "ptr"]
    good = set(ptrs)
    writes: set[int] = set()
    prints: dict[int, list[Footprint]] = {}  # id(summary) -> its footprints: launches that
    # differ only in their pointers (a host loop unrolled) share one summary
    for op in ops:
        summary = analyzer.summary(info.mangled, binding_of(op))
        why = summary_refusal(summary)
        if why:
            return set(), why
        fp = prints.get(id(summary))
        if fp is None:
            fp = prints[id(summary)] = footprints(summary, len(info.params))
        locs = [_location(a) for a in op.args]
        for i in ptrs:
            if locs[i] == _UNKNOWN:
                good.discard(i)
            if fp[i].written is not None:
                writes.add(i)
            for j in ptrs:
                if j > i and _conflicts(locs[i], locs[j], fp[i], fp[j]):
                    good -= {i, j}
    if synchronises(view, info):
        good -= writes
    return good, "" if good else "no pointer parameter is disjoint from the others"


def _with_noalias(k: KernelText, which: set[int]) -> str:
    """The kernel's define line with `noalias` on the parameters `which`."""
    parts = []
    for i, p in enumerate(k.params):
        attrs = p.attrs
        if i in which and not re.search(r"\bnoalias\b", attrs):
            attrs = f"noalias {attrs}".strip()
        parts.append(" ".join(x for x in (p.type, attrs, p.name or "") if x))
    return f"{k.head}{', '.join(parts)}){k.tail}"


@dataclass(frozen=True, slots=True)
class AliasFacts(ModulePass):
    """`noalias` on kernel pointer parameters the host model and access summaries prove
    disjoint in every launch."""

    name: ClassVar[str] = "alias-facts"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)

    def run(self, module: PassInput, ctx: PassContext) -> str:
        host = ctx.host_program
        assert host is not None  # `requires` makes the pass manager check it
        edit = ModuleEdit(module.text)
        launches = host.launches_by_kernel()
        wanted = [n for n, k in edit.kernels.items() if launches.get(n) and any(
            _is_ptr(p) and not re.search(r"\bnoalias\b", p.attrs) for p in k.params)]
        if not wanted:
            return module.text
        view = build_view(_inlined(module.parse(), module.text, ctx.arch), only=wanted)
        infos = {i.mangled: i for i in kernel_infos(view)}
        analyzer = KernelAnalyzer(view, list(infos.values()))
        lines = list(edit.lines)
        changed = False
        for name in wanted:
            k, ops, info = edit.kernels[name], launches[name], infos.get(name)
            if info is None or any(len(op.args) != len(k.params) for op in ops) or \
                    len(info.params) != len(k.params):
                continue
            which, _ = noalias_params(view, analyzer, info, ops)
            if not which or not all(_is_ptr(k.params[i]) for i in which):
                continue
            new = _with_noalias(k, which)
            if new != lines[k.start]:
                lines[k.start] = new
                changed = True
        return "\n".join(lines) + "\n" if changed else module.text


def _inlined(mod: llvm.ModuleRef, text: str, arch: str) -> llvm.ModuleRef:
    """The module with every always-inline call inlined (fragments of fused kernels, the bodies
    host-constants writes): what the analysis sees. A fragment summarised on its own has its
    thread and block indices as parameters (`ctaid * ntid` is a product of two unknowns: any
    byte); inlined, they are the kernel's own, and the accesses keep their shape. The kernels'
    parameters are the same, so what is found holds for the module as it is."""
    pm = llvm.create_new_module_pass_manager()
    pm.add_always_inliner_pass()
    tm = target_machine(arch, ptx_version_for(text, arch))
    pm.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(0)))
    return mod


def _is_ptr(p: Param) -> bool:
    return p.type == "ptr"
