"""`contract`: dead-intermediate contraction (issue 14, item 6).

A fused kernel that writes a temporary buffer and reads it back in the same thread (the THREAD
width dependence between the fragments of a vertical fusion) still stores every element to
global memory, though nothing reads it afterwards. This pass removes those stores and, with
them, the buffer: its `cudaMalloc`, `cudaFree` and memsets leave the fused host program, and the
launches pass a null pointer in its place. The pass's notes (plan.json, report.md) name each
contracted buffer and its bytes.

Where it runs: after `alias-facts` and an `llvm-opt` round (`host-constants,alias-facts,
llvm-opt,contract,llvm-opt`). `alias-facts` gives the fused kernel's parameters `noalias`
where the host model proves them disjoint, and then GVN forwards a fragment's store of `t[i]`
to the next fragment's load of `t[i]` in the same thread: no load through the parameter is
left. The pass does not forward anything itself; it only reads off what LLVM has proven.

The decision, in two halves, both required:

1. **In the kernel** (per pointer parameter P of a launched kernel K): every use of P, followed
   through `getelementptr` (P as the base), `addrspacecast` and `bitcast`, is the address of a
   plain `store` (not volatile, not atomic, P not the stored value) or a debug record. Anything
   else refuses P: a load, an atomic, a call (memcpy/memset intrinsics, a non-inlined device
   function, inline asm), `ptrtoint`, a comparison, a `phi` or `select` (which could mix P with
   other pointers), P stored as a value (captured). K itself must be named by no instruction of
   the module (a kernel launched from the device would run with arguments the host model does
   not see), and the module must not launch kernels from the device. So K never reads memory
   through P, and its only effect through P is those stores.

2. **In the host program** (per buffer B): B is removed only if every operation that names B
   is its `Alloc`, a `Free` of B itself, a `Memset` of B, or a launch argument at a parameter
   that passed (1) in a kernel every one of whose launches passes, at that parameter, either a
   null pointer or a buffer that passes (2) too (a fixpoint over parameters and buffers). Any
   other mention refuses B: a copy in either direction (so B is no output: the host model's role
   `output` is "a device-to-host copy reads it"), a device-to-device copy, a host pointer table
   holding B's address (`Copy.pointers`) or host bytes that came from B (`Copy.via`), a rotating
   (ping-pong) address with B among its choices, a free at an offset, a launch argument at a
   parameter that failed (1), wherever it sits in the program (before or after K, in any host
   loop). A buffer without an `Alloc` (a `__device__` array) is refused: kernels may reach it
   by name.

Why this is sound. B's address enters device code only as a launch argument (host copies of it
into memory are refused), and every parameter that receives it only stores through it and never
writes it anywhere (no capture): no kernel ever loads from B, through any pointer. No host
operation reads B (no copy, D2D or D2H, names it). So no value stored to B, by a kernel, a
memset or anything else, is ever read: the stores, the memsets and the allocation can go, and
nothing the program computes changes. This holds whatever the order of operations and across
iterations of host loops, because it does not depend on order at all; the price is that a
buffer that is reused later (read after a full overwrite) is kept. Loads that LLVM forwarded
were forwarded under LLVM's single-thread rules with the `noalias` facts `alias-facts` proved
(kernels that synchronise get `noalias` only on parameters nothing writes, so forwarding across
a barrier does not happen); a value another thread wrote is never forwarded, and such a load
stays and refuses P.

Observation. `sirius verify` compares the outputs (role output or copied back); B is neither.
A program that copies nothing back leaves every buffer as its result (verify then compares every
buffer the original holds, skipping those the fused program dropped): there every buffer counts
as observed and the pass changes nothing. (Contracting there would drop the final results too,
and leave verify nothing to compare.)

Requires the fused host program (`sirius fuse`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar

from sirius.analysis.host.model import (
    Alloc,
    BufferArg,
    Copy,
    DevRef,
    Free,
    HostProgram,
    Launch,
    Loop,
    Memset,
    NullArg,
    Op,
    dev_refs,
    flat_ops,
)
from sirius.postopt.base import HostRewrite, ModulePass, PassContext, PassInput
from sirius.postopt.kernel_text import KernelText, kernels_of, split_top

__all__ = ["Contract", "address_step", "buffer_uses", "outputs", "rewrite_host", "store_only"]

_DEF = re.compile(r"^\s*(%[-\w.$]+|%\"[^\"]*\")\s*=\s*(.*)$")
_DBG = re.compile(r"^\s*#dbg_\w+\(|^\s*(?:tail |notail )?call void @llvm\.dbg\.")
_DEVICE_LAUNCH = re.compile(r"@cudaLaunchDevice|@cudaGetParameterBuffer")
_DROP_ATTRS = re.compile(r"\b(?:dereferenceable|dereferenceable_or_null)\(\d+\)\s*|\bnonnull\s*")


def _token(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"(?![-\w.$])")


def _is_ptr_type(t: str) -> bool:
    return bool(re.fullmatch(r"ptr(?: addrspace\(\d+\))?", t.strip()))


def _operand(part: str) -> str | None:
    """The value of a typed scalar pointer operand `ptr %x` / `ptr addrspace(1) %x`."""
    m = re.fullmatch(r"ptr(?: addrspace\(\d+\))?\s+(%[-\w.$]+|%\"[^\"]*\")", part.strip())
    return m.group(1) if m else None


def store_only(lines: list[str], k: KernelText, j: int) -> tuple[list[int], str]:
    """The lines to delete (stores through parameter j of kernel k, the address arithmetic that
    only feeds them, and debug records naming it), and "", when the parameter is used for
    nothing else; else ([], why)."""
    p = k.params[j]
    if not _is_ptr_type(p.type) or p.name is None:
        return [], "not a named pointer parameter"
    derived = {p.name}
    todo = [p.name]
    delete: set[int] = set()
    body = range(k.start + 1, k.end)
    while todo:
        name = todo.pop()
        tok = _token(name)
        for i in body:
            line = lines[i]
            if i in delete or not tok.search(line):
                continue
            if _DBG.match(line):
                delete.add(i)
                continue
            why = _classify(line, derived)
            if isinstance(why, str) and why.startswith("%"):
                delete.add(i)
                if why not in derived:
                    derived.add(why)
                    todo.append(why)
            elif why == "":
                delete.add(i)
            else:
                return [], f"{p.name} {why}: {line.strip()[:80]}"
    return sorted(delete), ""


def _classify(line: str, derived: set[str]) -> str:
    """For a body line that names a pointer derived from the parameter: "" for a store through
    it, the defined name for address arithmetic on it (`%r`), else why it refuses."""
    code = line.split(", !", 1)[0]  # metadata attachments name no values
    m = _DEF.match(code)
    if m is None:
        s = re.match(r"^\s*store\s+(.*)$", code)
        if s is None:
            return "is used by something other than a store"
        rest = s.group(1)
        if re.match(r"(?:volatile|atomic)\b", rest):
            return "is stored through volatilely or atomically"
        parts = split_top(rest)
        if len(parts) < 2:
            return "is used by a store the pass cannot read"
        ptr = _operand(parts[1])
        if ptr not in derived or any(_token(d).search(parts[0]) for d in derived):
            return "is stored to memory (captured)"
        return ""
    return address_step(m.group(1), m.group(2), derived, "addrspacecast|bitcast")


def address_step(name: str, rhs: str, derived: set[str], casts: str) -> str:
    """For the definition `name = rhs` naming a pointer derived from a parameter: `name` when
    it is address arithmetic on it (a getelementptr with it as the base, a cast among `casts`
    to a pointer), else why it refuses."""
    g = re.match(r"getelementptr\s+(?:(?:inbounds|nuw|nusw|inrange\(\S+\))\s+)*(.*)$", rhs)
    if g:
        parts = split_top(g.group(1))
        base = _operand(parts[1]) if len(parts) > 1 else None
        if base in derived and not any(_token(d).search(", ".join(parts[2:])) for d in derived):
            return name
        return "is used in a getelementptr other than as its base"
    c = re.match(rf"(?:{casts})\s+(.*?)\s+to\s+(.*)$", rhs)
    if c and _operand(c.group(1)) in derived and _is_ptr_type(c.group(2)):
        return name
    return "is used by " + rhs.split()[0] if rhs.split() else "is used"


# the host program ----------------------------------------------------------------------------
def _names(addr) -> list[str]:
    return [r.buffer for r in dev_refs(addr)]


Use = tuple[str, int] | str  # (kernel, parameter index) of a launch argument, or a kind


def buffer_uses(host: HostProgram) -> dict[str, list[Use]]:
    """Every mention of each buffer in the host program: `alloc`, `free` (of the buffer
    itself), `memset` (of a plain address), (kernel, parameter) for a launch argument that is a
    plain address, `other` for anything else (copies, pointer tables, rotating addresses, a
    free at an offset)."""
    uses: dict[str, list[Use]] = {b.name: [] for b in host.buffers}

    def add(name: str, use: Use) -> None:
        uses.setdefault(name, []).append(use)

    for op in flat_ops(host.ops):
        if isinstance(op, Alloc):
            add(op.buffer, "alloc")
        elif isinstance(op, Free):
            a = op.address
            plain = isinstance(a, DevRef) and a.offset.is_const and a.offset.const == 0
            for n in _names(a):
                add(n, "free" if plain else "other")
        elif isinstance(op, Memset):
            for n in _names(op.dst):
                add(n, "memset" if isinstance(op.dst, DevRef) else "other")
        elif isinstance(op, Copy):
            for n in [*_names(op.dst), *_names(op.src), *op.via,
                      *(x for _, a in op.pointers for x in _names(a))]:
                add(n, "other")
        elif isinstance(op, Launch):
            for j, a in enumerate(op.args):
                if isinstance(a, BufferArg):
                    plain = isinstance(a.address, DevRef)
                    for n in _names(a.address):
                        add(n, (op.mangled, j) if plain else "other")
    return uses


def outputs(host: HostProgram) -> set[str]:
    """The buffers the program's user observes: role output, or read by a device-to-host
    copy (what `sirius verify` compares)."""
    out = {b.name for b in host.buffers if b.role == "output"}
    for op in flat_ops(host.ops):
        if isinstance(op, Copy) and op.kind == "D2H":
            out.update(_names(op.src))
    return out


def _has_outputs(host: HostProgram) -> bool:
    return bool(outputs(host))


def _rewrite_ops(ops: tuple[Op, ...], gone: set[str], nulls: set[tuple[str, int]]
                 ) -> tuple[Op, ...]:
    out: list[Op] = []
    for op in ops:
        if isinstance(op, Alloc) and op.buffer in gone:
            continue
        if isinstance(op, (Free, Memset)) and set(_names(
                op.address if isinstance(op, Free) else op.dst)) & gone:
            continue
        if isinstance(op, Loop):
            body = _rewrite_ops(op.body, gone, nulls)
            if body:
                out.append(replace(op, body=body))
            continue
        if isinstance(op, Launch) and any((op.mangled, j) in nulls for j in range(len(op.args))):
            args = tuple(NullArg() if (op.mangled, j) in nulls else a
                         for j, a in enumerate(op.args))
            op = replace(op, args=args)
        out.append(op)
    return tuple(out)


def rewrite_host(host: HostProgram, gone: set[str], nulls: set[tuple[str, int]]
                 ) -> HostProgram:
    """The host program without the buffers `gone` (their allocs, frees and memsets; loops
    left empty go too), passing null at the (kernel, parameter) positions `nulls`."""
    return replace(host, buffers=tuple(b for b in host.buffers if b.name not in gone),
                   ops=_rewrite_ops(host.ops, gone, nulls))


@dataclass(frozen=True, slots=True)
class Contract(ModulePass):
    """Temporaries that fused kernels only write (their reads forwarded within the thread) and
    nothing else reads lose their stores and their allocation."""

    name: ClassVar[str] = "contract"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)

    def run(self, module: PassInput, ctx: PassContext) -> str | HostRewrite:
        host = ctx.host_program
        assert host is not None  # `requires` makes the pass manager check it
        text = module.text
        if _DEVICE_LAUNCH.search(text):
            return text
        lines = text.splitlines()
        kernels = kernels_of(lines)
        launches = host.launches_by_kernel()
        # (1) parameters that only store
        params: dict[tuple[str, int], list[int]] = {}
        refs = _global_refs(lines)
        for name, ops in launches.items():
            k = kernels.get(name)
            if k is None or any(len(op.args) != len(k.params) for op in ops) or \
                    _named_elsewhere(refs, k):
                continue
            for j in range(len(k.params)):
                dele, why = store_only(lines, k, j)
                if not why:
                    params[(name, j)] = dele
        if not params:
            return text
        # (2) buffers named only by those, as a fixpoint
        if not _has_outputs(host):
            return text  # every buffer is what the program leaves behind: all are observed
        uses = buffer_uses(host)
        seen = outputs(host)
        bufs = {b.name for b in host.buffers if b.name not in seen
                and "alloc" in uses.get(b.name, [])}
        while True:
            bufs = {b for b in bufs if all(u in ("alloc", "free", "memset") or u in params
                                           for u in uses.get(b, []))}
            keep = {}
            for (name, j), dele in params.items():
                ok = all(isinstance(op.args[j], NullArg) or (
                    isinstance(op.args[j], BufferArg) and isinstance(op.args[j].address, DevRef)
                    and op.args[j].address.buffer in bufs) for op in launches[name])
                if ok:
                    keep[(name, j)] = dele
            if keep.keys() == params.keys():
                break
            params = keep
        # a parameter is contracted when some buffer it receives is (parameters that only ever
        # receive null are left as they are)
        used = {u for b in bufs for u in uses.get(b, []) if isinstance(u, tuple)}
        params = {pj: d for pj, d in params.items() if pj in used}
        bufs = {b for b in bufs if any(isinstance(u, tuple) for u in uses.get(b, []))}
        if not bufs or not params:
            return text
        drop: set[int] = {i for d in params.values() for i in d}
        for name in {n for n, _ in params}:
            k = kernels[name]
            lines[k.start] = _without_deref(k, {j for n, j in params if n == name})
        new_text = "\n".join(x for i, x in enumerate(lines) if i not in drop) + "\n"
        gone = set(bufs)
        new_host = rewrite_host(host, gone, set(params))
        notes = tuple(_note(host, b, uses[b]) for b in sorted(gone, key=_order(host)))
        return HostRewrite(new_text, new_host, notes)


def _order(host: HostProgram):
    pos = {b.name: i for i, b in enumerate(host.buffers)}
    return lambda n: pos.get(n, len(pos))


def _note(host: HostProgram, b: str, uses: list[Use]) -> str:
    where = sorted({f"{k} (parameter {j})" for k, j in (u for u in uses if isinstance(u, tuple))})
    return (f"contracted {b}: {host.buffer(b).bytes} bytes no longer allocated, its stores "
            f"in {', '.join(where)} removed")


_GLOBAL_REF = re.compile(r'@(?:"((?:[^"\\]|\\.)*)"|([-\w.$]+))')


def _global_refs(lines: list[str]) -> dict[str, set[int]]:
    """For every global name, the lines (not metadata, not comments) that name it: one pass
    over the module (a megakernel's module has hundreds of thousands of lines, and a scan per
    kernel took minutes)."""
    out: dict[str, set[int]] = {}
    for i, line in enumerate(lines):
        if "@" not in line or line.startswith(("!", ";")):
            continue
        for m in _GLOBAL_REF.finditer(line):
            out.setdefault(m.group(1) if m.group(1) is not None else m.group(2),
                           set()).add(i)
    return out


def _named_elsewhere(refs: dict[str, set[int]], k: KernelText) -> bool:
    """Whether an instruction or global of the module names kernel k (not its own define line,
    not metadata): it could be launched or called from device code. `refs`: _global_refs."""
    return bool(refs.get(k.name, set()) - {k.start})


def _without_deref(k: KernelText, which: set[int]) -> str:
    """The kernel's define line with `dereferenceable`/`nonnull` dropped from the parameters
    `which` (they receive null now)."""
    parts = [" ".join(x for x in (q.type, _DROP_ATTRS.sub("", q.attrs).strip() if i in which
                                  else q.attrs, q.name or "") if x)
             for i, q in enumerate(k.params)]
    return f"{k.head}{', '.join(parts)}){k.tail}"
