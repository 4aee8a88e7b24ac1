"""Lane chains: a full warp's pure steps between warp operations, run as one straight-line
function over its 32 lanes.

TVM's cross-thread reductions (`v += __shfl_down_sync(mask, v, 16, 32)`, then 8, 4, 2, 1) stop a
work-item-loop kernel (wiloop.py) at every shuffle, and between two shuffles each lane does one
add. The block loop (entries.block_wrapper) completes such a shuffle itself and runs the 32
lanes on one after another from the copy after it: per lane and step, its ids into the context,
its live values out of its frame and back, its stop into the warp record; that bookkeeping is
most of the work. A *lane chain* does those steps at once: for a resume state whose code up to
the next warp operation is *pure* (arithmetic, comparisons, casts, selects and side-effect-free
LLVM intrinsics on values; no memory access, call, branch, division that can trap, thread id or
argument), its function `__sirius_vchain_N_S` holds that code 32 times (one renamed copy per
lane, adjacent, which LLVM's SLP vectorizer may pack), loads each lane's live values and the
operation's result from its frame once, completes every following shuffle, activemask or
`__syncwarp` whose kind and operands are constants by renaming (lane l's result is the value of
its source lane, the rule of `exchange_full_warp` in sirius_rt.c), and goes on through the next
pure step, until a step is not pure. There it stores what the scalar steps would have left: each
lane's warp record for the operation it stops at, the live values defined in the chain, its
stop in `res`.

Why this computes what the lane-by-lane steps compute, in every order: a pure step reads only
its own lane's values and writes only its own, so the order of the lanes within it changes
nothing; the block loop draws the lanes' next order before each step in the random order, and
the chain makes the same draws (`sirius_rt_warp_order`) at the same points, so the steps after
it see the same orders. Counters: a pure step is the middle of one LLVM basic block, whose
instructions were counted when the lane entered it (lowering.py counts per block), so it adds
none; a step with a counter line is not pure (it loads and stores).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.runtime.cpu import native as N
from sirius.runtime.cpu.irpatterns import INT, META, TOK, WARP, WARP_RESULT, WARP_STOP

# the most lines (per lane) one chain may hold; 0 turns lane chains off (the tests compare)
MAX_LINES = 256
# how many warp operations a chain may complete in registers
MAX_STEPS = 16

_DEF = re.compile(r'\s*%("(?:[^"\\]|\\.)*"|[-\w.$]+) = ')
_OPCODE = re.compile(r'\s*%\S+ = (?:(?:tail|notail|musttail) )?(\w+)\b')
_CALLEE = re.compile(r"\bcall\b[^@]*@([-\w.$]+)\(")
_PURE_OPS = {"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "fadd", "fsub",
             "fmul", "fdiv", "frem", "fneg", "icmp", "fcmp", "select", "freeze", "bitcast",
             "zext", "sext", "trunc", "fpext", "fptrunc", "sitofp", "uitofp", "fptosi",
             "fptoui", "extractelement", "insertelement", "shufflevector", "extractvalue",
             "insertvalue"}
_PURE_INTRINSIC = re.compile(r"llvm\.(?:maxnum|minnum|maximum|minimum|maximumnum|minimumnum|"
                             r"fabs|copysign|smax|smin|umax|umin|abs|fma|fmuladd|ctpop|ctlz|"
                             r"cttz|bswap|bitreverse|fshl|fshr)\.")
# the operations a chain completes in registers (exchange_full_warp's)
_EXCHANGED = (N.W_SHFL_IDX, N.W_SHFL_UP, N.W_SHFL_DOWN, N.W_SHFL_BFLY, N.W_ACTIVEMASK,
              N.W_SYNC)


def shfl_source(op: int, lane: int, b: int, c: int) -> int:
    """The lane whose value lane `lane` receives (sirius_rt.c's shfl_source: PTX's clamp
    `c & 31` and segment mask `c >> 8 & 31`)."""
    seg, clamp = (c >> 8) & 31, c & 31
    maxl, minl = (lane & seg) | (clamp & ~seg), lane & seg
    if op == N.W_SHFL_UP:
        j = lane - (b & 0xFFFFFFFF)
        ok = j >= maxl
    elif op == N.W_SHFL_DOWN:
        j = (lane + b) & 0xFFFFFFFF
        ok = j <= maxl
    elif op == N.W_SHFL_BFLY:
        j = (lane ^ b) & 0xFFFFFFFF
        ok = j <= maxl
    else:
        j = minl | (b & 31 & ~seg)
        ok = j <= maxl
    if j >= 1 << 31:  # int32_t in the C
        j -= 1 << 32
    return lane if not ok or j < 0 or j > 31 else j


@dataclass(frozen=True)
class _Stop:
    block: int
    line: int
    site: int
    result: str | None      # the value the operation defines (a name as TOK gives it)
    operands: tuple[str, ...]  # kind, mask, val, b, c as written


@dataclass(frozen=True)
class _Step:
    lines: tuple[str, ...]  # the pure lines from the resume point to the stop
    stop: _Stop


def _mangle(name: str, lane: int) -> str:
    if name.startswith('"'):
        return f'%"__vc{lane}.{name[1:-1]}"'
    return f"%__vc{lane}.{name}"


def _pure(line: str) -> bool:
    m = _OPCODE.match(line)
    if not m or not _DEF.match(line):
        return False
    op = m.group(1)
    if op == "call":
        c = _CALLEE.search(line)
        return c is not None and _PURE_INTRINSIC.match(c.group(1)) is not None
    return op in _PURE_OPS


def chains(blocks: list, live_at: dict[int, set[str]], remat: set[str],
           offsets: dict[str, int], types: dict[str, str], structs: dict[str, str],
           frame_bytes: int, states: set[int]) -> dict[int, list[str]]:
    """Resume state -> the body of its lane chain's function (see the module's docstring), for
    each state of `states` (where the block loop has a copy) that starts one. `blocks` are
    wiloop's (label, lines); `live_at` maps a stop's site to the values live after it."""
    if MAX_LINES <= 0:
        return {}
    stops: dict[int, _Stop] = {}
    for bi, b in enumerate(blocks):
        for li, line in enumerate(b.lines):
            m = WARP.search(line)
            if m:
                d = _DEF.match(line)
                stops[int(m.group(6))] = _Stop(bi, li, int(m.group(6)),
                                               d.group(1) if d else None, m.groups()[:5])

    def step(state: int) -> _Step | None:
        """The pure code from `state`'s resume point to a warp operation in the same block."""
        at = stops.get(state - 1)
        if at is None:
            return None
        lines = blocks[at.block].lines
        out = []
        for line in lines[at.line + 1:]:
            m = WARP.search(line)
            if m:
                return _Step(tuple(out), stops[int(m.group(6))])
            if not _pure(line):
                return None
            out.append(META.sub("", line))
        return None

    def exchanged(stop: _Stop) -> tuple[int, int, int] | None:
        kind, _, _, b, c = stop.operands
        if not all(INT.fullmatch(x) for x in (kind, b, c)) or int(kind) not in _EXCHANGED:
            return None
        return int(kind), int(b), int(c)

    steps = {s: step(s) for s in states}
    followers = {st.stop.site + 1 for st in steps.values()
                 if st is not None and exchanged(st.stop) is not None}
    out: dict[int, list[str]] = {}
    for s in sorted(states):
        if steps[s] is None or s in followers:
            continue  # no pure step here, or the chain of an earlier state runs this one
        chain = [steps[s]]
        while len(chain) < MAX_STEPS and exchanged(chain[-1].stop) is not None:
            nxt = steps.get(chain[-1].stop.site + 1)
            if nxt is None or sum(len(x.lines) for x in chain) + len(nxt.lines) > MAX_LINES:
                break
            chain.append(nxt)
        body = _function(s, chain, stops, live_at, remat, offsets, types, structs,
                         frame_bytes)
        if body is not None:
            out[s] = body
    return out


def _function(state: int, chain: list[_Step], stops: dict[int, _Stop],
              live_at: dict[int, set[str]], remat: set[str], offsets: dict[str, int],
              types: dict[str, str], structs: dict[str, str], fb: int) -> list[str] | None:
    """The body of `i32 (ptr frames, ptr list, ptr res, ptr rng)`, or None when the chain
    reads a value it cannot have (an argument, a rematerialized value, a local array)."""
    first = stops[state - 1]
    live_in = live_at.get(first.site, set()) - remat
    defined: set[str] = set() if first.result is None else {first.result}
    loads: set[str] = set()
    for st in chain:
        for line in st.lines:
            d = _DEF.match(line)
            for t in TOK.finditer(line[d.end():]):
                name = t.group(1)
                if name in defined:
                    continue
                if name in live_in and name in offsets:
                    loads.add(name)
                elif "%" + name not in structs:
                    return None
            defined.add(d.group(1))
        for x in st.stop.operands:
            for t in TOK.finditer(x):
                if t.group(1) in defined:
                    continue
                if t.group(1) in live_in and t.group(1) in offsets:
                    loads.add(t.group(1))
                else:
                    return None
        if st.stop.result is not None:
            defined.add(st.stop.result)
    last = chain[-1].stop
    live_out = sorted((live_at.get(last.site, set()) - remat) & defined)
    if any(v not in offsets or v not in types for v in live_out):
        return None

    env: list[dict[str, str]] = [{} for _ in range(32)]
    body = ["entry:",
            "  %i0 = load i32, ptr %list, align 4",
            "  %w0 = and i32 %i0, -32",
            "  %w64 = zext i32 %w0 to i64",
            f"  %base = mul i64 %w64, {fb}",
            "  %fw = getelementptr inbounds i8, ptr %frames, i64 %base",
            "  %rw = getelementptr inbounds i32, ptr %res, i64 %w64",
            "  %rngp = icmp ne ptr %rng, null"]
    for lane in range(32):
        body.append(f"  %f{lane} = getelementptr inbounds i8, ptr %fw, i64 {lane * fb}")
    for v in sorted(loads):
        for lane in range(32):
            p, x = f"%p{lane}.{len(body)}", _mangle(v, lane)
            body += [f"  {p} = getelementptr inbounds i8, ptr %f{lane}, i64 {offsets[v]}",
                     f"  {x} = load {types[v]}, ptr {p}"]
            env[lane][v] = x
    if first.result is not None:
        for lane in range(32):
            x = _mangle(first.result, lane)
            body += [f"  %r{lane} = getelementptr inbounds i8, ptr %f{lane}, i64 {WARP_RESULT}",
                     f"  {x} = load i32, ptr %r{lane}"]
            env[lane][first.result] = x

    def rename(text: str, lane: int) -> str:
        return TOK.sub(lambda m: env[lane].get(m.group(1), m.group(0)), text)

    for k, st in enumerate(chain):
        if k > 0:  # the lanes' next order, as the block loop draws it before each step
            body += [f"  br i1 %rngp, label %draw{k}, label %go{k}", f"draw{k}:",
                     "  call void @sirius_rt_warp_order(ptr %rng, ptr %list)",
                     f"  br label %go{k}", f"go{k}:"]
        for line in st.lines:
            d = _DEF.match(line)
            name, rhs = d.group(1), line[d.end():]
            for lane in range(32):
                x = _mangle(name, lane)
                body.append(f"  {x} = {rename(rhs, lane)}")
                env[lane][name] = x
        if k == len(chain) - 1:
            break
        kind, b, c = (int(st.stop.operands[i]) for i in (0, 3, 4))
        r = st.stop.result
        if r is None:
            continue
        vals = [rename(st.stop.operands[2], lane) for lane in range(32)]
        for lane in range(32):
            if kind == N.W_ACTIVEMASK:
                env[lane][r] = "-1"
            elif kind == N.W_SYNC:
                env[lane][r] = "0"
            else:
                env[lane][r] = vals[shfl_source(kind, lane, b, c)]
    # where the scalar steps would have stopped: the warp record, the live values, `res`
    stop_state = ((last.site + 1) | WARP_STOP) - (1 << 32)
    for lane in range(32):
        for off, operand in enumerate(last.operands):
            p = f"%o{lane}.{off}"
            body += [f"  {p} = getelementptr inbounds i8, ptr %f{lane}, i64 {4 * off}",
                     f"  store i32 {rename(operand, lane)}, ptr {p}"]
        for v in live_out:
            p = f"%l{lane}.{len(body)}"
            body += [f"  {p} = getelementptr inbounds i8, ptr %f{lane}, i64 {offsets[v]}",
                     f"  store {types[v]} {env[lane][v]}, ptr {p}"]
        body += [f"  %s{lane} = getelementptr inbounds i32, ptr %rw, i64 {lane}",
                 f"  store i32 {stop_state}, ptr %s{lane}, align 4"]
    body.append(f"  ret i32 {stop_state}")
    return body
