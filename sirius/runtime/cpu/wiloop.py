"""Work-item loops: a kernel with `__syncthreads` as a continuation the runtime calls per thread.

The classic CPU-runtime transformation (POCL's work-item loops, Karrenberg and Hack's
continuations) on the rewritten host text of one kernel (rewrite.py): the kernel
`void @K(args)` becomes `i32 @K(args, ptr noalias %__frame, i32 %__state, ptr noalias
%__counts)`, which runs one
thread from `%__state` (0: the kernel's start; s + 1: just after the barrier of site s) to its
next barrier, where it returns s + 1, or to its end, where it returns 0. The C runtime
(`run_block_loops` in sirius_rt.c) runs every runnable thread of the block once per round in the
requested order (forward, reverse, a new random order each round), through the kernel's block
loop (`entries.block_wrapper`: the round's threads in one call), and releases a barrier once
every thread waits on it: the fiber scheduler's rounds, with a call where a fiber switched.

No uniformity proof is needed: each thread resumes at its own barrier, so a barrier under
thread-dependent control flow behaves exactly as on fibers (threads at different
`__syncthreads` are released together; a thread that exits while others wait is the same
"divergent barrier" fault). Kernels whose barriers this cannot express stay on fibers: warp
operations (shuffle, vote, `__syncwarp`), named or counted barriers, `__syncthreads_count/and/or`,
barriers in called functions, dynamic allocas (see `eligible` in rewrite.py and the `None`
returns here).

What lives across a barrier lives in the thread's frame, `frame_bytes` bytes at `%__frame`:
  * every `alloca` of the kernel (its local arrays) is a fixed slice of the frame;
  * an SSA value live just after some barrier (liveness over the text) is demoted: it gets an
    `alloca` slot, a store after its definition and a load before every use; at a barrier the
    values live there are copied from their slots into the frame, and at the resume point back;
    LLVM's mem2reg then rebuilds SSA form, so only the copies at barriers touch memory;
  * a live value that is a pure function of arguments, constants, thread and block ids (address
    arithmetic, mostly) is recomputed at the resume point instead of saved (rematerialized).
The instruction counters are untouched: every original block still adds its size once per visit
(the counting code is part of the text moved around), and nothing added here counts. The
function's counter slots (lowering.FLUSH) become the block loop's `%__counts`, which it adds to
the context when it returns; the flushes at the stops go.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.analysis.irtypes import TypeParseError, type_align, type_size
from sirius.analysis.irview import Function, Instr
from sirius.runtime.cpu import lanechain
from sirius.runtime.cpu.irpatterns import INT, META, TOK, WARP, WARP_RECORD, WARP_RESULT, WARP_STOP

_DEF = re.compile(r'\s*(%(?:"(?:[^"\\]|\\.)*"|[-\w.$]+)) = ')
_LABEL = re.compile(r'^("(?:[^"\\]|\\.)*"|[-\w.$]+):')
_BARRIER = re.compile(r"call i32 @sirius_rt_barrier\(ptr @__sirius_ctx, i32 (\S+), i32 (\S+), "
                      r"i32 (\d+), i32 (\S+), i32 (\S+)\)")
# a line of the counters' slots at a function's start (lowering.counter_slots; group 1: an
# alloca's counter offset, rewrite.py's flushes read it); the FLUSH markers at the stops are
# comment lines, which `_blocks` drops
COUNTER_SLOT = re.compile(r"\s*(?:%__cnt\.(\d+) = alloca i64, align 8|"
                          r"store i64 0, ptr %__cnt\.\d+, align 8)$")
# pure instructions a resume point may recompute (their operands permitting)
_PURE = {"getelementptr", "bitcast", "addrspacecast", "zext", "sext", "trunc", "add", "sub",
         "mul", "shl", "lshr", "ashr", "and", "or", "xor", "icmp", "select", "ptrtoint",
         "inttoptr", "udiv", "sdiv", "urem", "srem"}
_SREG = re.compile(r"llvm\.nvvm\.read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.[xyz]$")
REMAT_LIMIT = 16  # instructions one rematerialized value may need
FRAME_ALIGN = 16  # where the frame's slices start; no access claims more (_lower_align)
_ALIGN = re.compile(r"\balign (\d+)")


def _lower_align(line: str) -> str:
    """The line with every alignment claim above FRAME_ALIGN lowered to it (always sound: a
    weaker claim)."""
    return _ALIGN.sub(lambda m: m.group(0) if int(m.group(1)) <= FRAME_ALIGN
                      else f"align {FRAME_ALIGN}", line)


@dataclass(frozen=True, slots=True)
class Loops:
    text: list[str]    # the continuation function's lines
    frame_bytes: int   # per thread, a multiple of 64
    # where a thread resumes after a warp operation: the block loop has a copy for each
    # (entries.block_wrapper), since a warp resumes from one of them once per operation
    warp_states: tuple[int, ...] = ()
    # of those, the ones after an operation whose kind and operands b, c are constants:
    # state -> (op, b, c); the block loop completes such an operation for a full warp itself
    warp_ops: tuple[tuple[int, tuple[int, int, int]], ...] = ()
    # where a thread resumes after a barrier (a round of the whole block resumes there when
    # the barrier releases it)
    barrier_states: tuple[int, ...] = ()
    # warp state -> the body of its lane chain's function (lanechain.py): a full warp's pure
    # steps from there, at once
    lane_chains: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass
class _Block:
    label: str                 # as written after `%`
    lines: list[str]           # logical instruction lines (a switch with its cases is one)


def _ref(name: str) -> str:
    return "%" + name


def _blocks(body: list[str], entry: str) -> list[_Block] | None:
    blocks: list[_Block] = []
    for raw in body:
        s = raw.strip()
        m = _LABEL.match(raw)
        if m:
            blocks.append(_Block(m.group(1), []))
            continue
        if not s or s.startswith(";") or s.startswith("#dbg_"):
            continue
        if not blocks:
            blocks.append(_Block(entry, []))
        if blocks[-1].lines and (raw.startswith("   ") or s.startswith("]")):
            blocks[-1].lines[-1] += "\n" + raw
        else:
            blocks[-1].lines.append(raw)
    return blocks


def _stop(line: str) -> int | None:
    """The site of a barrier or warp operation (where a continuation stops), or None."""
    m = _BARRIER.search(line) or WARP.search(line)
    return int(m.group(3) if m.re is _BARRIER else m.group(6)) if m else None


def _def(line: str) -> str | None:
    m = _DEF.match(line)
    return m.group(1)[1:] if m else None


def _phi_pairs(line: str) -> list[tuple[int, int, str, str]]:
    """(start, end, value, block) of every `[ value, %block ]` of a phi (offsets of the value)."""
    out, depth, start = [], 0, -1
    body_at = line.index(" phi ")
    for i in range(body_at, len(line)):
        ch = line[i]
        if ch in "[(<{":
            if depth == 0 and ch == "[":
                start = i + 1
            depth += 1
        elif ch in "])>}":
            depth -= 1
            if depth == 0 and ch == "]":
                inner = line[start:i]
                d2, cut = 0, -1
                for j, c in enumerate(inner):
                    d2 += c in "([<{"
                    d2 -= c in ")]>}"
                    if c == "," and d2 == 0:
                        cut = j
                val = inner[:cut].strip()
                vs = start + inner.index(val)
                out.append((vs, vs + len(val), val, inner[cut + 1:].strip()[1:]))
        elif ch == "!" and depth == 0:
            break
    return out


def _uses(line: str, values: set[str]) -> set[str]:
    """The values (of `values`: the function's definitions) a line reads."""
    m = _DEF.match(line)
    rhs = line[m.end():] if m else line
    return {t.group(1) for t in TOK.finditer(rhs)} & values


def _succs(term: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r'label %("(?:[^"\\]|\\.)*"|[-\w.$]+)', term)]


def _liveness(blocks: list[_Block], labels: set[str],
              uses=None) -> dict[str, set[str]]:
    """Live-out sets of every block (phi operands live out of their incoming block); `uses`
    (line -> the labels it reads) where the caller keeps them."""
    uses = uses or (lambda line: _uses(line, labels))
    by = {b.label: b for b in blocks}
    phi_out: dict[str, set[str]] = {b.label: set() for b in blocks}
    gen: dict[str, set[str]] = {}
    kill: dict[str, set[str]] = {}
    for b in blocks:
        g: set[str] = set()
        k: set[str] = set()
        for line in reversed(b.lines):
            d = _def(line)
            if " phi " in line and d is not None:
                for _, _, v, blk in _phi_pairs(line):
                    if v.startswith("%") and blk in phi_out:
                        phi_out[blk].add(v[1:])
                k.add(d)
                g.discard(d)
                continue
            if d is not None:
                k.add(d)
                g.discard(d)
            g |= uses(line)
        gen[b.label], kill[b.label] = g, k
    succ = {b.label: [s for s in _succs(b.lines[-1]) if s in by] for b in blocks}
    live_in = {b.label: set(gen[b.label]) for b in blocks}
    live_out = {b.label: set() for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out = set(phi_out[b.label])
            for s in succ[b.label]:
                out |= live_in[s]
            if out != live_out[b.label]:
                live_out[b.label] = out
                live_in[b.label] = gen[b.label] | (out - kill[b.label])
                changed = True
    return live_out


def transform(fn: Function, lines: list[str], structs: dict[str, str]) -> Loops | None:
    """The continuation form of a kernel's rewritten lines (header ... `}`), or None when the
    kernel must stay on fibers."""
    header = lines[0]
    m = re.match(r"define (.*?)\bvoid (@(?:\"[^\"]+\"|[-\w.$]+))\((.*)\)(.*)\{$", header)
    if not m:
        return None
    params, tail = m.group(3), m.group(4)
    nunnamed = len(re.findall(r"%\d+(?=[,)]|$)", params + ")"))
    blocks = _blocks(lines[1:-1], str(nunnamed))
    if not blocks:
        return None
    instrs: dict[str, Instr] = {}
    for b in fn.blocks:
        for ins in b.instrs:
            d = _def(ins.text)
            if d is not None:
                instrs[d] = ins
    args = {a.name for a in fn.args} | {str(i) for i in range(nunnamed)}
    # the counters' slots (lowering.FLUSH) become the block loop's (`%__counts`, one i64 per
    # context offset; entries.block_wrapper): it adds them to the context when it returns, so
    # the continuation flushes nothing at its stops
    slots = []
    while blocks[0].lines and COUNTER_SLOT.match(blocks[0].lines[0]):
        d = _def(blocks[0].lines.pop(0))
        if d is not None:
            slots.append(f"  %{d} = getelementptr inbounds i8, ptr %__counts, "
                         f"i64 {d.rsplit('.', 1)[1]}")
            args.add(d)
    def_line: dict[str, str] = {}
    for b in blocks:
        for line in b.lines:
            d = _def(line)
            if d is not None:
                def_line[d] = line
    labels = set(def_line)  # the values a line may read (not types, labels or arguments)
    read_by: dict[str, set[str]] = {}  # line -> the labels it reads (asked four times a line)

    def uses(line: str) -> set[str]:
        got = read_by.get(line)
        if got is None:
            got = read_by[line] = _uses(line, labels)
        return got

    everything = [line for b in blocks for line in b.lines]
    read: set[str] | None = None  # every value some line reads, once a barrier has a result

    # allocas: slices of the frame; barriers: where the kernel stops
    frame = WARP_RECORD if any(WARP.search(line) for line in everything) else 0
    allocas: dict[str, int] = {}
    barriers = 0
    for bi, b in enumerate(blocks):
        for line in b.lines:
            d = _def(line)
            am = re.match(r"\s*%\S+ = alloca (?:align \d+ )?", line)
            if am and d is not None:
                ins = instrs.get(d)
                if bi != 0 or ins is None or re.search(r", (i\d+) ", line):
                    return None  # a dynamic alloca
                try:
                    size = type_size(ins.source_type, structs)
                except TypeParseError:
                    return None
                # 16 bytes whatever the declared alignment: every access of the kernel claims
                # at most 16 (FRAME_ALIGN below), so TVM's `alignas(64)` one-element arrays do
                # not take a cache line each of every thread's frame
                align = FRAME_ALIGN
                frame = (frame + align - 1) // align * align
                allocas[d] = frame
                frame += size
            bm = _BARRIER.search(line)
            if bm:
                d = _def(line)
                if d is not None and read is None:
                    read = set().union(*(uses(other) for other in everything))
                if bm.groups()[:2] != ("0", "0") or bm.group(4) != "0" or (
                        d is not None and d in read):
                    return None  # a named, counted or reducing barrier: fibers
                barriers += 1
            elif WARP.search(line):
                barriers += 1
            elif "@sirius_rt_warp(" in line or "@sirius_rt_barrier(" in line:
                return None  # a stop whose operands this does not parse: fibers
    if not barriers:
        return None

    # values live just after a barrier
    live_out = _liveness(blocks, labels, uses)
    live_at: dict[int, set[str]] = {}  # site -> live names
    for b in blocks:
        live = set(live_out[b.label])
        for line in reversed(b.lines):
            s = _stop(line)
            if s is not None:
                live_at[s] = set(live) - {_def(line)}
            d = _def(line)
            if d is not None:
                live.discard(d)
            if " phi " not in line:
                live |= uses(line)
    demoted: set[str] = set()
    for live in live_at.values():
        demoted |= live - args - set(allocas)
    live_at = {s: live & demoted for s, live in live_at.items()}
    types: dict[str, str] = {}
    for v in demoted:
        ins = instrs.get(v)
        if ins is None or ins.type in ("void", "token", "metadata", "label"):
            return None
        types[v] = re.sub(r" addrspace\(\d+\)", "", ins.type)

    # rematerializable values: pure chains over arguments, constants, ids and allocas
    remat_memo: dict[str, list[str] | None] = {}

    def chain(v: str) -> list[str] | None:
        """The values to recompute for v (operands first), or None."""
        if v in remat_memo:
            return remat_memo[v]
        remat_memo[v] = None  # cycles (phis) are not pure anyway
        ins = instrs.get(v)
        out: list[str] | None = None
        if ins is not None and v in def_line:
            callee = ins.callee if ins.opcode == "call" else None
            if ins.opcode in _PURE or (callee is not None and _SREG.match(callee.name)):
                out = []
                for u in sorted(uses(def_line[v])):
                    if u in args or u in allocas:
                        continue
                    sub = chain(u)
                    if sub is None:
                        out = None
                        break
                    out += [x for x in sub if x not in out]
                if out is not None:
                    out.append(v)
                    if len(out) > REMAT_LIMIT:
                        out = None
        remat_memo[v] = out
        return out

    remat = {v for v in demoted if chain(v) is not None}
    offsets: dict[str, int] = {}
    for v in sorted(demoted - remat):
        try:
            size, align = type_size(types[v], structs), min(16, type_align(types[v], structs))
        except TypeParseError:
            return None
        frame = (frame + align - 1) // align * align
        offsets[v] = frame
        frame += size
    frame_bytes = max(64, (frame + 63) // 64 * 64)
    warp_sites = {int(m.group(6)) for line in everything for m in [WARP.search(line)] if m}
    chains = lanechain.chains(blocks, live_at, remat, offsets, types, structs, frame_bytes,
                              {s + 1 for s in warp_sites})
    slot = {v: f"%__wslot.{i}" for i, v in enumerate(sorted(demoted))}
    uid = [0]

    def tmp() -> str:
        uid[0] += 1
        return f"%__wi.t{uid[0]}"

    def replace(line: str, name: str, new: str, lo: int = 0) -> str:
        return line[:lo] + re.sub(re.escape(_ref(name)) + r'(?![-\w.$"])', new, line[lo:])

    def load_uses(line: str) -> tuple[list[str], str]:
        pre = []
        d = _def(line)
        for v in sorted(uses(line) & demoted):
            if v == d:
                continue
            t = tmp()
            pre.append(f"  {t} = load {types[v]}, ptr {slot[v]}")
            m0 = _DEF.match(line)
            lo = m0.end() if m0 else 0
            line = replace(line, v, t, lo)
        return pre, line

    # phi operands that are demoted: loaded at the end of the incoming block
    last_part: dict[str, str] = {}
    for b in blocks:
        last_part[b.label] = b.label
        sites = [s for s in map(_stop, b.lines) if s is not None]
        if sites:
            last_part[b.label] = f"__wi.after.{sites[-1]}"
    tail_loads: dict[str, list[str]] = {b.label: [] for b in blocks}
    phi_fixed: dict[tuple[int, int], str] = {}  # (block, line) -> the phi rewritten
    for b in blocks:
        for k, line in enumerate(b.lines):
            if " phi " not in line or _def(line) is None:
                continue
            new, loaded = line, {}
            for vs, ve, val, blk in reversed(_phi_pairs(line)):
                rename = last_part.get(blk, blk)
                seg = new[vs:ve]
                if val.startswith("%") and val[1:] in demoted:
                    if blk not in loaded:
                        t = tmp()
                        loaded[blk] = t
                        tail_loads[blk].append(f"  {t} = load {types[val[1:]]}, "
                                               f"ptr {slot[val[1:]]}")
                    seg = loaded[blk]
                rest = new[ve:]
                if rename != blk:
                    rest = re.sub(r"%" + re.escape(blk) + r'(?![-\w.$"])', "%" + rename,
                                  rest, count=1)
                new = new[:vs] + seg + rest
            phi_fixed[id(b), k] = new

    def frame_ptr(off: int) -> tuple[str, str]:
        p = tmp()
        return p, f"  {p} = getelementptr inbounds i8, ptr %__frame, i64 {off}"

    def rematerialize(site: int) -> list[str]:
        out: list[str] = []
        clones: dict[str, str] = {}
        for v in sorted(live_at[site] & remat):
            for x in chain(v) or []:
                if x in clones:
                    continue
                c = tmp()
                text = META.sub("", def_line[x])
                # the operands cloned before, in one pass over the tokens (a resume point of a
                # megakernel can have thousands of clones: one substitution per clone made the
                # work-item loops of paper lstm_large's run for tens of minutes)
                rhs = TOK.sub(lambda m: clones.get(m.group(1), m.group(0)),
                               text[_DEF.match(text).end():])
                clones[x] = c
                out.append(f"  {c} = " + rhs)
            out.append(f"  store {types[v]} {clones[v]}, ptr {slot[v]}")
        return out

    entry = blocks[0].label
    warp_states: set[int] = set()
    barrier_states: set[int] = set()
    warp_ops: dict[int, tuple[int, int, int]] = {}
    out = [f"define {m.group(1)}i32 {m.group(2)}({params}"
           f"{', ' if params.strip() else ''}ptr noalias %__frame, i32 %__state, "
           f"ptr noalias %__counts){tail}{{",
           "__wi.entry:"]
    for a, off in allocas.items():
        out.append(f"  {_ref(a)} = getelementptr inbounds i8, ptr %__frame, i64 {off}")
    for v in sorted(demoted):
        out.append(f"  {slot[v]} = alloca {types[v]}")
    out += slots
    cases = " ".join(f"i32 {s + 1}, label %__wi.resume.{s}" for s in sorted(live_at))
    out.append(f"  switch i32 %__state, label %{entry} [ {cases} ]")
    for s in sorted(live_at):
        out.append(f"__wi.resume.{s}:")
        for v in sorted(live_at[s] - remat):
            p, g = frame_ptr(offsets[v])
            t = tmp()
            out += [g, f"  {t} = load {types[v]}, ptr {p}",
                    f"  store {types[v]} {t}, ptr {slot[v]}"]
        out += rematerialize(s)
        out.append(f"  br label %__wi.after.{s}")
    for b in blocks:
        out.append(f"{b.label}:")
        nphi = sum(1 for line in b.lines if " phi " in line and _def(line) is not None)
        for k, line in enumerate(b.lines):
            d = _def(line)
            if k == nphi and k > 0:  # after the phis: the demoted ones to their slots
                for line2 in b.lines[:nphi]:
                    d2 = _def(line2)
                    if d2 in demoted:
                        out.append(f"  store {types[d2]} {_ref(d2)}, ptr {slot[d2]}")
            if "@llvm.lifetime." in line or (d in allocas):
                continue
            if k < nphi:
                out.append(phi_fixed.get((id(b), k), line))
                continue
            s = _stop(line)
            if s is not None:
                warp = WARP.search(line)
                state = s + 1
                if not warp:
                    barrier_states.add(state)
                else:  # the operation into the frame's record; its result comes at resume
                    warp_states.add(state)
                    kind, _, _, opb, opc, _ = warp.groups()
                    if all(INT.fullmatch(x) for x in (kind, opb, opc)):
                        warp_ops[state] = (int(kind), int(opb), int(opc))
                    pre, line = load_uses(line)
                    out += pre
                    for off, operand in enumerate(WARP.search(line).groups()[:5]):
                        p, g = frame_ptr(4 * off)
                        out += [g, f"  store i32 {operand}, ptr {p}"]
                    state = (state | WARP_STOP) - (1 << 32)  # as LLVM prints an i32
                for v in sorted(live_at[s] - remat):
                    p, g = frame_ptr(offsets[v])
                    t = tmp()
                    out += [f"  {t} = load {types[v]}, ptr {slot[v]}", g,
                            f"  store {types[v]} {t}, ptr {p}"]
                out += [f"  ret i32 {state}", f"__wi.after.{s}:"]
                if warp and d is not None:
                    p, g = frame_ptr(WARP_RESULT)
                    out += [g, f"  {_ref(d)} = load i32, ptr {p}"]
                    if d in demoted:
                        out.append(f"  store i32 {_ref(d)}, ptr {slot[d]}")
                continue
            pre, line = load_uses(line)
            out += pre
            if k == len(b.lines) - 1:
                out += tail_loads[b.label]
                line = re.sub(r"^(\s*)ret void\b", r"\1ret i32 0", line)
            out.append(line)
            if d in demoted:
                out.append(f"  store {types[d]} {_ref(d)}, ptr {slot[d]}")
    out.append("}")
    return Loops([_lower_align(line) for line in out], frame_bytes, tuple(sorted(warp_states)),
                 tuple(sorted(warp_ops.items())), tuple(sorted(barrier_states)),
                 tuple((st, tuple(body)) for st, body in sorted(chains.items())))
