"""`contract-shared`: dead intermediates of one block kept in shared memory (issue 14, item 6,
BLOCK width).

`contract` removes a temporary that fused kernels only store to (their reads forwarded within the
thread). When the threads of a block read what other threads of the same block wrote (a BLOCK
width dependence between the fragments of a vertical fusion, a barrier between them), loads
stay, and the temporary still goes through global memory. This pass moves such a temporary into
shared memory, one slice per block, and removes its allocation: its `cudaMalloc`, `cudaFree` and
memsets leave the fused host program and the launches pass null in its place.

The decision, every part required (per buffer B and the one kernel K it is passed to):

1. **In the kernel text** (each parameter P of K that receives B): every use of P, through
   `getelementptr` (P as the base) and `bitcast`, is the address of a plain load or store (not
   volatile, not atomic, P not the stored value) or a debug record; K is named by no other
   instruction and the module launches no kernel from the device (as for `contract`).
2. **Order in K**: some block barrier (`__syncthreads`) of K dominates every load through P and
   no store through P is reachable from it: each block writes before the barrier, reads after
   (BLOCK width). Or, THREAD width: no store through P is reachable from a load through P, so
   in every thread's run all its stores come before its first load (see 4).
3. **In the host program**: every operation that names B is its alloc, a free of B, a memset of
   B, or a launch of K passing B at one of those parameters at the same constant byte offset in
   every launch (no copy in either direction, no pointer table, no other kernel, no rotating
   address); B is not an output, and the program copies something back (else every buffer is
   what it leaves behind, as in `contract`).
4. **Per block, from the isl relations of the fused kernel's own accesses** (the UAR's effect
   builder run on the fused module and host program, per launch statement of K, with the host
   loop variables of that launch fixed): the bytes of B the blocks touch are disjoint between
   blocks; every byte a block reads, that block writes (the writes are exact relations, none
   atomic); and the bytes block b touches lie in [off(b), off(b) + S), off(b) affine in the block
   index (c0 + cx bx + cy by + cz bz), S at most `limit` bytes and the kernel's shared memory
   with it at most 48 KiB; off(b) and the offsets the launches pass are multiples of the largest
   alignment the loads and stores claim. At THREAD width, also per thread (relations over the
   thread ids): every byte a thread reads, that thread writes, and no byte is written by two
   threads; these imply the two block questions.

Why this is sound. By (3) nothing but K's launches touches B's bytes, and nothing after the
program reads them. By (4) a block's reads are of bytes that block writes in the same launch,
and by (2) the writes happen before a barrier that every read follows, so every value a block
reads was written in that launch by the block itself, behind a barrier that makes shared and
global stores alike visible to the block. No other block touches those bytes. At THREAD width
a thread reads only bytes it wrote itself, all its stores before its first load, and no other
thread writes them: each value it reads is its own last store, no barrier needed. So each
block's slice of B behaves as block-private memory written before it is read: replacing it with the
block's shared memory (P becomes `shared + (offset - off(b))`, address arithmetic unchanged,
`inbounds` dropped from the chain since intermediate addresses may leave the array) changes no
value any thread reads. A launch's blocks start with fresh shared memory, which is fine because
no read depends on what a previous launch left.

The pass's notes name each buffer, its bytes and the per-block slice. Requires the fused host
program and runs the kernel analysis only when parts 1-3 leave a candidate, and then on the
candidate kernels alone (on every launched kernel when one of them loads a pointer from memory:
the points-to analysis reads every launch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from sirius.analysis.host.model import BufferArg, DevRef, HostProgram, Launch
from sirius.analysis.irtypes import TypeParseError, type_size
from sirius.postopt.base import HostRewrite, ModulePass, PassContext, PassInput
from sirius.postopt.contract import (
    _DBG,
    _DEF,
    _DEVICE_LAUNCH,
    _global_refs,
    _has_outputs,
    _is_ptr_type,
    _named_elsewhere,
    _operand,
    _token,
    _without_deref,
    address_step,
    buffer_uses,
    outputs,
    rewrite_host,
)
from sirius.postopt.kernel_text import KernelText, _type_end, kernels_of, split_top
from sirius.postopt.ownership import block_set, own_bytes, slice_of, thread_set

_own_bytes = own_bytes  # looked up here at each call (tests blind it)

__all__ = ["ContractShared"]

STATIC_SHARED = 48 * 1024  # bytes of static shared memory a block may have
BLOCK, THREAD = "block", "thread"  # who reads what: the block after a barrier, or the writer
_BARRIER = re.compile(r"call void @llvm\.nvvm\.barrier(?:0\(\)|\.cta\.sync\.aligned\.all\(i32 0\)"
                      r"|\.sync\(i32 0\))")
_LABEL = re.compile(r'^("(?:[^"\\]|\\.)*"|[-\w.$]+):')
_SUCC = re.compile(r'label %("(?:[^"\\]|\\.)*"|[-\w.$]+)')
_ALIGN = re.compile(r"\balign (\d+)")
_SHARED_GLOBAL = re.compile(r'^@("?)([-\w.$]+)\1 = .*?addrspace\(3\) global (.+)$')


@dataclass
class _Chain:
    """What the uses of one pointer parameter are: lines of address arithmetic (geps, casts),
    loads and stores through it, debug records."""

    arith: list[int]
    loads: list[int]
    stores: list[int]
    align: int  # the largest alignment a load or store claims


def _chain(lines: list[str], k: KernelText, j: int) -> _Chain | str:
    """The uses of parameter j of kernel k, or why they are not only loads and stores."""
    p = k.params[j]
    if not _is_ptr_type(p.type) or p.name is None:
        return "not a named pointer parameter"
    derived, todo = {p.name}, [p.name]
    ch = _Chain([], [], [], 1)
    seen: set[int] = set()
    body = range(k.start + 1, k.end)
    while todo:
        tok = _token(todo.pop())
        for i in body:
            line = lines[i]
            if i in seen or not tok.search(line):
                continue
            seen.add(i)
            if _DBG.match(line):
                continue
            kind = _classify(line, derived)
            if kind.startswith("%"):
                ch.arith.append(i)
                if kind not in derived:
                    derived.add(kind)
                    todo.append(kind)
            elif kind in ("load", "store"):
                (ch.loads if kind == "load" else ch.stores).append(i)
                m = _ALIGN.search(line)
                ch.align = max(ch.align, min(int(m.group(1)), 16) if m else 1)
            else:
                return f"{p.name} {kind}: {line.strip()[:80]}"
    return ch


def _classify(line: str, derived: set[str]) -> str:
    """For a body line naming a pointer derived from the parameter: "load" or "store" through
    it, the defined name for address arithmetic on it, else why it refuses."""
    code = line.split(", !", 1)[0]
    m = _DEF.match(code)
    if m is None:
        s = re.match(r"^\s*store\s+(.*)$", code)
        if s is None:
            return "is used by something other than a load or store"
        if re.match(r"(?:volatile|atomic)\b", s.group(1)):
            return "is stored through volatilely or atomically"
        parts = split_top(s.group(1))
        if len(parts) < 2 or _operand(parts[1]) not in derived or \
                any(_token(d).search(parts[0]) for d in derived):
            return "is stored to memory (captured)"
        return "store"
    name, rhs = m.group(1), m.group(2)
    ld = re.match(r"load\s+(.*)$", rhs)
    if ld:
        if re.match(r"(?:volatile|atomic)\b", ld.group(1)):
            return "is loaded from volatilely or atomically"
        parts = split_top(ld.group(1))
        return "load" if len(parts) > 1 and _operand(parts[1]) in derived else \
            "is used in a load other than as its address"
    if re.match(r"phi\s+ptr\b|select\s+(?:\S+\s+)*i1\s+\S+,\s*ptr\s", rhs):
        # a merge of pointers (LLVM sinks the identical tails of a horizontal kernel's members
        # into one block, their parameters merged by a phi): its uses are followed as the
        # parameter's; loads and stores through it may touch the other incoming pointers'
        # memory too, which only adds to what parts 2 and 4 check
        return name
    return address_step(name, rhs, derived, "bitcast")


# order: writes before a barrier, reads after it -------------------------------------------------
def _blocks(lines: list[str], k: KernelText) -> tuple[list[tuple[str, int, int]], dict]:
    """K's basic blocks as (label, first line, last line) and their successors."""
    out: list[tuple[str, int, int]] = []
    label, first = "%entry", k.start + 1
    for i in range(k.start + 1, k.end):
        m = _LABEL.match(lines[i])
        if m:
            if i > first:
                out.append((label, first, i - 1))
            label, first = m.group(1), i + 1
    out.append((label, first, k.end - 1))
    succ = {lab: [s for i in range(a, b + 1) for s in _SUCC.findall(lines[i])]
            for lab, a, b in out}
    return out, succ


def _graph(lines: list[str], k: KernelText):
    """K's control-flow graph (networkx, nodes the block labels), its blocks and successors."""
    import networkx as nx

    blocks, succ = _blocks(lines, k)
    g = nx.DiGraph()
    g.add_nodes_from(lab for lab, _, _ in blocks)
    g.add_edges_from((a, b) for a, bs in succ.items() for b in bs if b in g)
    return g, blocks, succ


def _after(g, succ: dict, home: str) -> set[str]:
    """The blocks that control may reach after leaving block `home` (`home` again in a loop)."""
    import networkx as nx

    return set().union(*(nx.descendants(g, s) | {s} for s in succ.get(home, []) if s in g))


def _stores_first(lines: list[str], k: KernelText, loads: set[int], stores: set[int]) -> bool:
    """Whether no line of `stores` can run after a line of `loads`: in every thread's run all
    the stores through the parameters come before the first load through them."""
    g, blocks, succ = _graph(lines, k)
    where = {i: lab for lab, a, b in blocks for i in range(a, b + 1)}
    for x in loads:
        later = _after(g, succ, where[x])
        if any(where[s] in later or (where[s] == where[x] and s > x) for s in stores):
            return False
    return True


def _ordered(lines: list[str], k: KernelText, loads: set[int], stores: set[int]) -> bool:
    """Whether some barrier of K dominates every line of `loads` and reaches none of
    `stores` (the stores all happen before it, the loads all after it)."""
    import networkx as nx

    g, blocks, succ = _graph(lines, k)
    entry = blocks[0][0]
    idom = nx.immediate_dominators(g, entry)
    where = {i: lab for lab, a, b in blocks for i in range(a, b + 1)}

    def dominates(a: str, b: str) -> bool:
        while True:
            if a == b:
                return True
            if b == entry or b not in idom or idom[b] == b:
                return False
            b = idom[b]

    for bar in (i for i in range(k.start + 1, k.end) if _BARRIER.search(lines[i])):
        home = where[bar]
        after = _after(g, succ, home)
        if any(where[s] in after or (where[s] == home and s > bar) for s in stores):
            continue
        if all((where[x] == home and x > bar) or (where[x] != home and dominates(home, where[x])
                                                  and where[x] in after)
               for x in loads):
            return True
    return False


# the pass -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ContractShared(ModulePass):
    """Temporaries that one fused kernel writes and reads back within each block, and nothing
    else touches, live in the block's shared memory instead of global memory."""

    name: ClassVar[str] = "contract-shared"
    requires: ClassVar[tuple[str, ...]] = ("host_program",)
    limit: int = 16384  # bytes of shared memory per block one buffer may take
    # THREAD width (each thread reads back only what it wrote, no barrier): `free` only where
    # the slice sits at one place in every block (no per-block address arithmetic, so no
    # instruction is added), `on` everywhere (3 IR instructions a thread for the block's base,
    # for the global bytes saved), `off` never
    thread: Literal["free", "on", "off"] = "free"

    def run(self, module: PassInput, ctx: PassContext) -> str | HostRewrite:
        host = ctx.host_program
        assert host is not None  # `requires` makes the pass manager check it
        text = module.text
        if _DEVICE_LAUNCH.search(text) or not _has_outputs(host):
            return text
        lines = text.splitlines()
        kernels = kernels_of(lines)
        launches = host.launches_by_kernel()
        refs = _global_refs(lines)
        uses = buffer_uses(host)
        seen = outputs(host)
        # (3, first half) buffers passed to one kernel only, at plain addresses
        cands: dict[str, tuple[str, list[int]]] = {}
        for b in host.buffers:
            us = uses.get(b.name, [])
            ks = {u[0] for u in us if isinstance(u, tuple)}
            if b.name in seen or "alloc" not in us or len(ks) != 1 or \
                    any(u not in ("alloc", "free", "memset") and not isinstance(u, tuple)
                        for u in us):
                continue
            (kname,) = ks
            cands[b.name] = (kname, sorted({u[1] for u in us if isinstance(u, tuple)}))
        notes: list[str] = []
        new_lines = list(lines)
        extra: list[str] = []
        inserts: list[tuple[int, list[str]]] = []
        gone: set[str] = set()
        nulls: set[tuple[str, int]] = set()
        builder = None  # made for the first candidate that gets this far
        memo: dict[tuple[str, int], _Chain | str] = {}  # (kernel, parameter) -> _chain's
        added: dict[str, int] = {}  # kernel -> bytes of shared memory this run added
        for bname, (kname, params) in sorted(cands.items()):
            k = kernels.get(kname)
            ops = launches.get(kname, [])
            if k is None or not ops or any(len(op.args) != len(k.params) for op in ops) or \
                    _named_elsewhere(refs, k):
                continue
            offs = _offsets(ops, bname, params)
            if offs is None:
                continue
            in_text = _in_text(memo, lines, k, params)
            if in_text is None:
                continue
            chains, width = in_text
            if width == THREAD and self.thread == "off":
                continue
            if builder is None:
                builder = _Effects(module.peek(), host, launches,
                                   _ready(cands, kernels, lines, memo))
            got = _per_block(builder.of(kname), host, kname, bname, self.limit, width)
            if isinstance(got, str):
                continue
            (c0, cx, cy, cz), size = got
            if width == THREAD and self.thread == "free" and (cx, cy, cz) != (0, 0, 0):
                continue
            align = max(c.align for c in chains)  # type: ignore[union-attr]
            if any(v % align for v in (c0, cx, cy, cz, *offs.values())) or size > self.limit \
                    or size + added.get(kname, 0) + _shared_bytes(lines, k, ops) > STATIC_SHARED:
                continue
            added[kname] = added.get(kname, 0) + size  # arrays this run gave the kernel
            arr = f"__sirius_shared_{bname}"
            extra.append(f"@{arr} = internal addrspace(3) global [{size} x i8] undef, "
                         "align 16")
            inserts.append(_rewrite_kernel(new_lines, k, params, chains, offs,  # type: ignore[arg-type]
                                           (c0, cx, cy, cz), arr, len(gone)))
            gone.add(bname)
            nulls.update((kname, j) for j in params)
            notes.append(f"contracted {bname} into shared memory: {host.buffer(bname).bytes} "
                         f"bytes no longer allocated; {kname} keeps each block's {size} bytes "
                         f"of it in shared memory (parameters {', '.join(map(str, params))})")
        if not gone:
            return text
        for name in {n for n, _ in nulls}:
            k = kernels[name]
            new_lines[k.start] = _without_deref(k, {j for n, j in nulls if n == name})
        for at, pre in sorted(inserts, reverse=True):
            new_lines[at:at] = pre
        top = next((i for i, x in enumerate(new_lines) if x.startswith(("@", "%", "define",
                                                                          "declare"))), 0)
        out = "\n".join([*new_lines[:top], *extra, *new_lines[top:]]) + "\n"
        for d in ("x", "y", "z"):
            sreg = f"@llvm.nvvm.read.ptx.sreg.ctaid.{d}"
            if sreg in out and not re.search(rf"^declare [^\n]*{re.escape(sreg)}\(", out, re.M):
                out += f"declare i32 {sreg}()\n"
        return HostRewrite(out, rewrite_host(host, gone, nulls), tuple(notes))


def _offsets(ops: list[Launch], buffer: str, params: list[int]) -> dict[int, int] | None:
    """The constant byte offset at which every launch passes `buffer` to each parameter."""
    out: dict[int, int] = {}
    for j in params:
        vals = set()
        for op in ops:
            a = op.args[j]
            if not (isinstance(a, BufferArg) and isinstance(a.address, DevRef)
                    and a.address.buffer == buffer and a.address.offset.is_const):
                return None
            vals.add(a.address.offset.const)
        if len(vals) != 1:
            return None
        out[j] = vals.pop()
    return out


def _in_text(memo: dict[tuple[str, int], _Chain | str], lines: list[str], k: KernelText,
             params: list[int]) -> tuple[list[_Chain], str] | None:
    """Parts 1 and 2 of the module docstring for parameters `params` of `k`: their chains
    (each `_chain` kept in `memo` by kernel and parameter) and the width part 4 must prove
    (`BLOCK` after a barrier, `THREAD` where every store comes before every load), or None
    where a part fails."""
    for j in params:
        if (k.name, j) not in memo:
            memo[k.name, j] = _chain(lines, k, j)
    chains = [memo[k.name, j] for j in params]
    if any(isinstance(c, str) for c in chains):
        return None
    loads = {i for c in chains for i in c.loads}  # type: ignore[union-attr]
    stores = {i for c in chains for i in c.stores}  # type: ignore[union-attr]
    if not loads:
        return None
    if _ordered(lines, k, loads, stores):
        return chains, BLOCK  # type: ignore[return-value]
    if _stores_first(lines, k, loads, stores):
        return chains, THREAD  # type: ignore[return-value]
    return None


def _ready(cands: dict[str, tuple[str, list[int]]], kernels: dict[str, KernelText],
           lines: list[str], memo: dict[tuple[str, int], _Chain | str]) -> set[str]:
    """The kernels of the candidates whose text passes parts 1 and 2 (a superset of those
    that reach part 4: the host checks in `run` come after); each chain is kept in `memo`."""
    out = set()
    for kname, params in cands.values():
        k = kernels.get(kname)
        if k is None or kname in out:
            continue
        if _in_text(memo, lines, k, params) is not None:
            out.add(kname)
    return out


class _Effects:
    """Effect builders over the module (one per pass run: every candidate buffer asks). The
    first reads only the candidate kernels (`kernels`): building the view and summaries of
    every launched kernel took seconds on a paper-shape model. A kernel with an access whose
    address is loaded from memory needs the points-to analysis, which reads the summaries of
    every launch: that kernel gets the builder over all launched kernels."""

    def __init__(self, parsed, host: HostProgram, launches: dict[str, list[Launch]],
                 kernels: set[str]):
        self.parsed, self.host, self.launches = parsed, host, launches
        self.part = self._builder(kernels)
        self.whole = None

    def of(self, kernel: str):
        """The builder for `kernel`'s launches, or why there is none."""
        from sirius.analysis.uar.effects import binding_of

        b = self.part
        if not isinstance(b, str) and any(
                acc.base.space == "loaded"
                for op in self.launches.get(kernel, [])
                for acc in b.kernels.summary(kernel, binding_of(op)).accesses):
            if self.whole is None:
                self.whole = self._builder(set(self.launches))
            b = self.whole
        return b

    def _builder(self, kernels: set[str]):
        from sirius.analysis.irview import build_view
        from sirius.analysis.kernel.access import KernelAnalyzer
        from sirius.analysis.kernel.facts import kernel_infos
        from sirius.analysis.uar.effects import EffectBuilder

        view = build_view(self.parsed, only=kernels)
        infos = [i for i in kernel_infos(view) if i.mangled in kernels]
        if {i.mangled for i in infos} != kernels:
            return "a launched kernel is not in the module"
        return EffectBuilder(self.host, KernelAnalyzer(view, infos))


def _per_block(builder, host: HostProgram, kernel: str, buffer: str, limit: int,
               width: str = BLOCK) -> tuple[tuple[int, int, int, int], int] | str:
    """Part 4 of the module docstring over every launch statement of `kernel`: the common
    off(b) and the largest S (each at most `limit`); `builder` from `_Effects.of`. At
    `THREAD` width each thread must also read only bytes it writes, and touch none that
    another thread writes."""
    from sirius.analysis.uar.build import statements_of
    from sirius.analysis.uar.effects import READ, WRITE

    if isinstance(builder, str):
        return builder
    coef, size = None, 0
    for st in statements_of(host):
        if st.kind != "launch" or st.op.mangled != kernel:
            continue
        grid = tuple(e.const if e.is_const else 0 for e in st.op.grid)
        if 0 in grid:
            return "its grid is computed by the host"
        effects, _ = builder.launch(st)
        mine = [e for e in effects if e.buffer == buffer]
        if any(e.atomic or (e.mode == WRITE and not e.exact) for e in mine):
            return "an access is atomic or a write is not exactly known"
        if width == THREAD:
            why = _own_bytes([thread_set(e.relation, st.vars) for e in mine if e.mode == READ],
                             [thread_set(e.relation, st.vars) for e in mine
                              if e.mode == WRITE], st.vars)
            if why is not None:
                return why
        got = slice_of([block_set(e.relation, st.vars) for e in mine if e.mode == READ],
                     [block_set(e.relation, st.vars) for e in mine if e.mode == WRITE],
                     st.vars, grid, limit, width == THREAD)  # type: ignore[arg-type]
        if isinstance(got, str):
            return got
        if coef is not None and got[0] != coef:
            return "its launches place the blocks' bytes differently"
        coef, size = got[0], max(size, got[1])
    return "no launch" if coef is None else (coef, size)


def _shared_bytes(lines: list[str], k: KernelText, ops: list[Launch]) -> int:
    """The static shared memory K's body names plus the most dynamic shared memory a launch of
    it asks for (an unknown size counts as all of it)."""
    arrays = {}
    for line in lines:
        m = _SHARED_GLOBAL.match(line)
        if m:
            try:
                arrays[m.group(2)] = type_size(m.group(3)[:_type_end(m.group(3))])
            except (TypeParseError, IndexError, ValueError, AssertionError):
                arrays[m.group(2)] = STATIC_SHARED
    body = "\n".join(lines[k.start:k.end])
    static = sum(n for name, n in arrays.items() if f"@{name}" in body
                 or f'@"{name}"' in body)
    dyn = max((op.smem.const if op.smem.is_const else STATIC_SHARED for op in ops), default=0)
    return static + dyn


def _rewrite_kernel(lines: list[str], k: KernelText, params: list[int], chains: list[_Chain],
                    offs: dict[int, int], coef: tuple[int, int, int, int], arr: str,
                    n: int = 0) -> tuple[int, list[str]]:
    """K's body with each parameter of `params` replaced by its block's place in `arr`
    (`offset - off(b)` bytes past it), `inbounds`/`nuw`/`nusw` dropped from the address
    arithmetic on it (an intermediate address may lie outside the array); returns the lines
    that compute those places and where they go (the start of the entry block). `n` tells the
    buffers moved in one pass apart (the names of the lines it adds)."""
    c0, *cs = coef
    pre: list[str] = []
    tag = f"sirius.sh{n}" if n else "sirius.sh"
    terms = []
    for d, c in zip("xyz", cs, strict=True):
        if c:
            pre.append(f"  %{tag}.ctaid.{d} = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.{d}()")
            pre.append(f"  %{tag}.b{d} = zext i32 %{tag}.ctaid.{d} to i64")
            pre.append(f"  %{tag}.m{d} = mul i64 %{tag}.b{d}, {c}")
            terms.append(f"%{tag}.m{d}")
    acc = "0"
    for i, t in enumerate(terms):
        pre.append(f"  %{tag}.s{i} = add i64 {acc}, {t}")
        acc = f"%{tag}.s{i}"
    base = f"ptr addrspacecast (ptr addrspace(3) @{arr} to ptr)"
    for j, ch in zip(params, chains, strict=True):
        p = k.params[j]
        new = f"%{tag}.p{j}"
        pre.append(f"  %{tag}.o{j} = sub i64 {offs[j] - c0}, {acc}")
        pre.append(f"  {new} = getelementptr i8, {base}, i64 %{tag}.o{j}")
        tok = _token(p.name or "")
        for i in range(k.start + 1, k.end):
            if tok.search(lines[i]):
                lines[i] = tok.sub(new, lines[i])
        for i in ch.arith:
            lines[i] = re.sub(r"getelementptr\s+(?:(?:inbounds|nuw|nusw|inrange\(\S+\))\s+)+",
                              "getelementptr ", lines[i])
    at = k.start + 1  # after the entry block's label, if it has one
    return (at + 1 if _LABEL.match(lines[at]) else at), pre
