"""The entry points of the CPU executor's host module: `__sirius_thread_N`, one thread of a
kernel, which unpacks a CUDA-style argument array (`void **`) and calls the kernel; and for a
megakernel (fusion's grid arrangement, docs/fusion-megakernel.md) its segments, each an entry of
its own that calls the segment function as the kernel's body does. Also the argument-list
parsing `rewrite.py` shares."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.analysis.irview import Function
from sirius.fusion.spec import GRID_SYNC, MK_HELPERS, MK_SIGNAL, MK_WAIT
from sirius.runtime.cpu import native as N
from sirius.runtime.cpu.wiloop import WARP_STOP, Loops

_PARAM_ATTRS = {"noundef", "signext", "zeroext", "inreg", "nonnull", "returned"}


def split_top(s: str) -> list[str]:
    """Split at commas that are not inside (), [], {} or <>."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


def call_args(line: str, callee: str) -> tuple[list[str], str]:
    """The argument texts of a call to `@callee` and what follows the closing parenthesis."""
    i = line.index(f"@{callee}(") + len(callee) + 2
    depth = 1
    j = i
    while depth:
        depth += {"(": 1, ")": -1}.get(line[j], 0)
        j += 1
    inner = line[i:j - 1].strip()
    return ([a.strip() for a in split_top(inner)] if inner else []), line[j:]


def arg_value(arg: str) -> tuple[str, str]:
    """`i32 noundef %x` -> ("i32", "%x")."""
    ty, rest = arg.split(" ", 1)
    words = rest.split(" ")
    while len(words) > 1 and words[0] in _PARAM_ATTRS:
        words.pop(0)
    return ty, " ".join(words)


def thread_wrapper(index: int, header: str, fn: Function, loops: bool = False) -> str:
    """`__sirius_thread_N(ptr args)`, one thread of kernel N; for a work-item-loop kernel
    `i32 __sirius_thread_N(ptr args, ptr frame, i32 state, ptr counts)`, one step of one thread
    (adding to the block loop's counters)."""
    name = re.search(r'@("[^"]+"|[-\w.$]+)\(', header).group(1)
    params, _ = call_args(header, name)
    # a work-item-loop thread is internal: only its block loop (block_wrapper) calls it
    lines = [f"define internal i32 @__sirius_thread_{index}(ptr %args, ptr %frame, i32 %state, "
             "ptr %counts) {"
             if loops else f"define void @__sirius_thread_{index}(ptr %args) {{", "entry:"]
    # the argument array and what it points to do not change during a launch: marked
    # invariant, the block loop loads them once, not once per thread and stop
    inv = ", !invariant.load !{}" if loops else ""
    passed = []
    for i, (arg, ptext) in enumerate(zip(fn.args, params, strict=True)):
        ty = arg.type
        lines.append(f"  %p{i} = getelementptr inbounds ptr, ptr %args, i64 {i}")
        lines.append(f"  %a{i} = load ptr, ptr %p{i}, align 8{inv}")
        byval = re.search(r"byval\(([^)]*)\)", ptext)
        if byval:
            passed.append(f"ptr byval({byval.group(1)}) %a{i}")
        else:
            lines.append(f"  %v{i} = load {ty}, ptr %a{i}, align 1{inv}")
            passed.append(f"{ty} %v{i}")
    if loops:
        passed += ["ptr %frame", "i32 %state", "ptr %counts"]
        # inlined: the runtime calls this once per thread and stop (a call and a return less)
        lines += [f"  %next = call i32 @{name}({', '.join(passed)}) alwaysinline",
                  "  ret i32 %next", "}"]
    else:
        lines += [f"  call void @{name}({', '.join(passed)})", "  ret void", "}"]
    return "\n".join(lines)


# A kernel with more resume states than this gets no per-state copies of its block loop (each
# copy holds the code from one resume point to the next stops; a megakernel can have thousands)
UNIFORM_STATES_MAX = 32


def _exchange(state: int, op: int, b: int, c: int) -> list[str] | None:
    """The block `x{state}` of a block loop: a full warp's operation (op, b, c) completed by
    `sirius_rt_warp_exchange` (complete_warp's rule, for 32 lanes waiting at one site: each
    lane's value at byte 8 of its frame, its result to byte 24), then on to the copy for
    `state`. None for an operation the runtime must complete (votes, ballots, matches)."""
    if op not in (N.W_SHFL_IDX, N.W_SHFL_UP, N.W_SHFL_DOWN, N.W_SHFL_BFLY, N.W_ACTIVEMASK,
                  N.W_SYNC):
        return None
    x = f"x{state}"
    return [f"{x}:", f"  %{x}.i = load i32, ptr %list, align 4",
            f"  call void @sirius_rt_warp_exchange(ptr %frames, i64 %fb, i32 %{x}.i, i32 {op}, "
            f"i32 {b}, i32 {c})",
            f"  %{x}.r = icmp ne ptr %rng, null",  # the random order: the lanes' next one
            f"  br i1 %{x}.r, label %{x}.d, label %u{state}",
            f"{x}.d:", "  call void @sirius_rt_warp_order(ptr %rng, ptr %list)",
            f"  br label %u{state}"]


def _counted_ret(value: str) -> list[str]:
    """A block loop's `ret i32 value`, after adding its threads' counts (`%counts`, one i64 at
    each counter's context offset) to the context's (a counter no thread added to folds
    away)."""
    tag = value.strip("%")
    out = []
    for off in N.CTX_COUNTERS:
        p, v, c, n = (f"%{tag}.c{off}{x}" for x in "pvcn")
        out += [f"  {p} = getelementptr inbounds i8, ptr %counts, i64 {off}",
                f"  {v} = load i64, ptr {p}, align 8",
                f"  {c} = load i64, ptr {N.ctx_field(off)}, align 8",
                f"  {n} = add i64 {c}, {v}",
                f"  store i64 {n}, ptr {N.ctx_field(off)}, align 8"]
    return out + [f"  ret i32 {value}"]


def block_wrapper(index: int, loops: Loops) -> str:
    """`i32 __sirius_block_N(args, frames, frame_bytes, list, count, tids, res, uniform,
    chain)`: one round of a work-item-loop kernel over the threads of a block (`run_block_loops`
    in sirius_rt.c). For each thread index i of `list[0, count)`, in that order, it sets the
    context's thread id from `tids[3 i]`, runs thread i from its state in its frame
    `frames + i * frame_bytes`, and writes where it stopped into `res[i]`. The state is
    `res[i]` (a warp stop's top bit cleared), or `uniform` for every thread when that is not -1
    (the runtime knows they all stopped in one place). It returns 1 when every thread stopped in
    the same place, else 0. The loop lives here rather than in the runtime so that a stop costs
    no call and no reload of the arguments.

    For each state a thread resumes from after a warp operation (`loops.warp_states`) the loop
    has a copy with that state constant, which `uniform` selects: in it LLVM folds the
    continuation's dispatch away, and only the code from that resume point on is left, so a
    lane's step there costs no state load, jump table or indirect branch. A kernel with warp
    operations has such copies for its start and its barriers' resume points too
    (`loops.barrier_states`): TVM's shuffle reductions run a few instructions between stops.

    `chain` (the runtime passes 1 for one full warp): when every lane stopped at one warp
    operation of `loops.warp_ops` (state -> kind and constant operands; shuffles, activemask,
    syncwarp), the block loop completes it itself and runs the lanes on from there, as the
    runtime's `run_warps` would, until they stop anywhere else; `rng` (the random order's lane
    orders, else null): the lanes' next order is drawn before each such step, as `run_warps`
    draws it.

    The threads' counts go to `%counts` (the continuations' counter slots, wiloop.py), which
    the loop adds to the context's counters when it returns: LLVM keeps them in registers
    through the whole round, the bounds checker's calls (which take the context) included."""
    k = index
    states = loops.warp_states
    uniform = states if len(states) <= UNIFORM_STATES_MAX else ()
    # with warp operations, where a lane's step between two stops is a few instructions, also
    # the kernel's start and the barriers' resume points (rounds of the whole block): their
    # dispatch (the state, a jump table) cost as much as the step
    more = (0, *loops.barrier_states)
    if uniform and len(uniform) + len(more) <= UNIFORM_STATES_MAX:
        uniform = tuple(sorted({*uniform, *more}))
    ops = dict(loops.warp_ops)
    chained = {st: x for st in uniform if st in ops
               for x in [_exchange(st, *ops[st])] if x is not None}
    # lane chains (lanechain.py) where the loop has a copy to fall back on and goes on
    # through completed operations
    vchains = {st: body for st, body in loops.lane_chains if st in uniform} if chained else {}
    cases = " ".join(f"i32 {s}, label %u{s}" for s in uniform)
    lines = [f"define i32 @__sirius_block_{k}(ptr %args, ptr %frames, i64 %fb, ptr %list, "
             "i32 %count, ptr %tids, ptr %res, i32 %uniform, i32 %chain, ptr %rng) {",
             "entry:",
             # i64 elements: zeroed as bytes, LLVM would assemble each counter from 8 bytes
             f"  %counts = alloca [{N.CTX_BYTES // 8} x i64], align 8",
             f"  store [{N.CTX_BYTES // 8} x i64] zeroinitializer, ptr %counts, align 8",
             f"  switch i32 %uniform, label %any [ {cases} ]"]
    call = (f"call i32 @__sirius_lanes_{k}(ptr %args, ptr %frames, i64 %fb, ptr %list, "
            "i32 %count, ptr %tids, ptr %res, i32 {}, ptr %counts) alwaysinline")
    came: list[str] = []  # the incoming (value, block) pairs of `next`'s phi
    for s in uniform:
        lines.append(f"u{s}:")
        if s in vchains:  # one full warp: the chain, else lane by lane
            lines += [f"  %vq{s}.a = icmp ne i32 %chain, 0",
                      f"  %vq{s}.b = icmp eq i32 %count, 32",
                      f"  %vq{s} = and i1 %vq{s}.a, %vq{s}.b",
                      f"  br i1 %vq{s}, label %v{s}, label %u{s}.l",
                      f"v{s}:",
                      f"  %rv{s} = call i32 @__sirius_vchain_{k}_{s}(ptr %frames, ptr %list, "
                      "ptr %res, ptr %rng)",
                      "  br label %next", f"u{s}.l:"]
            came += [f"[ 1, %v{s} ]", f"[ %r{s}, %u{s}.l ]"]
        else:
            came.append(f"[ %r{s}, %u{s} ]")
        lines += [f"  %r{s} = " + call.format(s)]
        lines += ["  br label %next"] if chained else _counted_ret(f"%r{s}")
    if chained:  # after any copy: on through a completed warp operation, or back
        stops = " ".join(f"i32 {(st | WARP_STOP) - (1 << 32)}, label %x{st}" for st in chained)
        lines += ["next:",
                  "  %r = phi i32 " + ", ".join(came),
                  "  %same = icmp ne i32 %r, 0",
                  "  %chain1 = icmp ne i32 %chain, 0",
                  "  %go = and i1 %chain1, %same",
                  "  br i1 %go, label %look, label %back",
                  "look:",
                  "  %i = load i32, ptr %list, align 4",
                  "  %i64 = zext i32 %i to i64",
                  "  %rp = getelementptr inbounds i32, ptr %res, i64 %i64",
                  "  %st = load i32, ptr %rp, align 4",
                  f"  switch i32 %st, label %back [ {stops} ]",
                  "back:", *_counted_ret("%r")]
        for x in chained.values():
            lines += x
    lines += ["any:", "  %ra = " + call.format("%uniform"), *_counted_ret("%ra"), "}"]
    for s, body in vchains.items():
        lines += [f"define internal i32 @__sirius_vchain_{k}_{s}(ptr %frames, ptr %list, "
                  "ptr %res, ptr %rng) noinline {", *body, "}"]
    return "\n".join(lines + [
        f"define internal i32 @__sirius_lanes_{k}(ptr %args, ptr %frames, i64 %fb, ptr %list, "
        "i32 %count, ptr %tids, ptr %res, i32 %uniform, ptr %counts) alwaysinline {",
        "entry:",
        "  %own = icmp eq i32 %uniform, -1",
        "  br label %loop",
        "loop:",
        "  %k = phi i32 [ 0, %entry ], [ %k1, %loop ]",
        "  %lo = phi i32 [ -1, %entry ], [ %lo1, %loop ]",
        "  %hi = phi i32 [ 0, %entry ], [ %hi1, %loop ]",
        "  %k64 = zext i32 %k to i64",
        "  %lp = getelementptr inbounds i32, ptr %list, i64 %k64",
        "  %i = load i32, ptr %lp, align 4",
        "  %i64 = zext i32 %i to i64",
        "  %t3 = mul i64 %i64, 12",
        "  %tp = getelementptr inbounds i8, ptr %tids, i64 %t3",
        "  call void @llvm.memcpy.p0.p0.i64(ptr align 64 @__sirius_ctx, ptr align 4 %tp, "
        "i64 12, i1 false)",
        "  %off = mul i64 %i64, %fb",
        "  %frame = getelementptr inbounds i8, ptr %frames, i64 %off",
        "  %rp = getelementptr inbounds i32, ptr %res, i64 %i64",
        "  %st = load i32, ptr %rp, align 4",
        "  %st1 = and i32 %st, 2147483647",
        "  %st2 = select i1 %own, i32 %st1, i32 %uniform",
        f"  %r = call i32 @__sirius_thread_{k}(ptr %args, ptr %frame, i32 %st2, ptr %counts) "
        "alwaysinline",
        "  store i32 %r, ptr %rp, align 4",
        "  %lo1 = call i32 @llvm.umin.i32(i32 %lo, i32 %r)",
        "  %hi1 = call i32 @llvm.umax.i32(i32 %hi, i32 %r)",
        "  %k1 = add nuw i32 %k, 1",
        "  %more = icmp ult i32 %k1, %count",
        "  br i1 %more, label %loop, label %done",
        "done:",
        "  %same = icmp eq i32 %lo1, %hi1",
        "  %z = zext i1 %same to i32",
        "  ret i32 %z",
        "}"])


BLOCK_DECLS = ("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
               "declare i32 @llvm.umin.i32(i32, i32)",
               "declare i32 @llvm.umax.i32(i32, i32)",
               "declare void @sirius_rt_warp_order(ptr, ptr)",
               "declare void @sirius_rt_warp_exchange(ptr, i64, i32, i32, i32, i32)")


@dataclass(frozen=True, slots=True)
class Segments:
    """A megakernel's segments: (the function called, the call's argument texts) each, in
    order; for the `counters` variant, its helper calls and their tables (`counters`: the wait
    arguments before each segment or None, the signal arguments after each, and the globals
    they name with their initial bytes and whether they may be written)."""
    calls: list[tuple[str, list[str]]]
    counters: tuple | None = None
    # a device loop: the segments run `trips` times (grid variant: a grid barrier between
    # iterations); `iteration` is the loop variable (`%name`) the calls pass as their last
    # argument
    trips: int = 1
    iteration: str | None = None


def segments_of(fn: Function, defined: set[str], module_text: str = ""
                ) -> Segments | str | None:
    """A megakernel's segments when `fn` is one. The grid variant: a body of calls of
    functions defined in the module, `sirius_grid_sync()` between them, and `ret void`. The
    counters variant: per segment an optional `sirius_mk_wait`, the segment's call and a
    `sirius_mk_signal` (`_counter_segments`).
    None when `fn` has neither; a sentence when it has one in another form (the executor
    cannot say what it means then)."""
    calls = [ins for b in fn.blocks for ins in b.instrs
             if ins.opcode == "call" and ins.callee is not None]
    names = {c.callee.name for c in calls}
    if MK_SIGNAL in names or MK_WAIT in names:
        return _counter_segments(fn, defined, module_text)
    if GRID_SYNC not in names:
        return None
    if len(fn.blocks) > 1:
        return _loop_segments(fn, defined)
    segments: list[tuple[str, list[str]]] = []
    for b in fn.blocks:
        for ins in b.instrs:
            if ins.opcode == "ret" and len(fn.blocks) == 1:
                continue
            callee = ins.callee.name if ins.opcode == "call" and ins.callee is not None \
                else None
            if callee == GRID_SYNC:
                continue
            if callee in defined and callee != fn.name and callee not in MK_HELPERS:
                segments.append((callee, call_args(ins.text, callee)[0]))
                continue
            return (f"has a grid barrier ({GRID_SYNC}) outside the form the executor runs "
                    f"(segment calls and grid barriers only): {ins.text.strip()[:80]}")
    return Segments(segments)


_CMP = {"eq": lambda x, c: x == c, "ne": lambda x, c: x != c, "ult": lambda x, c: x < c,
        "ule": lambda x, c: x <= c, "ugt": lambda x, c: x > c, "uge": lambda x, c: x >= c}
_MAX_TRIPS = 1 << 20


def _callee(ins) -> str | None:
    return ins.callee.name if ins.opcode == "call" and ins.callee is not None else None


def _passes_iteration(args: list[str], it: str | None) -> bool:
    """A segment call's arguments: in a device loop the iteration (or poison, where the
    segment does not use it) last and nowhere else; otherwise no iteration at all."""
    if it is None:
        return True
    return bool(args) and arg_value(args[-1])[0] == "i32" and arg_value(args[-1])[1] in (
        it, "poison", "undef") and all(arg_value(a)[1] != it for a in args[:-1])


def _loop_segments(fn: Function, defined: set[str]) -> Segments | str:
    """A device loop of segment calls with grid barriers between them (fusion/codegen/grid.py,
    `_device_loop`; the shape: `_loop_shape`). Anything else is refused."""
    def bad(what: str) -> str:
        return (f"has a grid barrier ({GRID_SYNC}) outside the form the executor runs "
                f"(a device loop of segment calls and grid barriers): {what[:100]}")

    shape = _loop_shape(fn, barrier=True)
    if isinstance(shape, str):
        return bad(shape)
    body, trips, it = shape
    calls: list[tuple[str, list[str]]] = []
    for j, ins in enumerate(body):
        name = _callee(ins)
        if j % 2 == 1 and name == GRID_SYNC:
            continue
        if j % 2 == 0 and name in defined and name != fn.name and name not in MK_HELPERS:
            args = call_args(ins.text, name)[0]
            if _passes_iteration(args, it):
                calls.append((name, args))
                continue
        return bad(ins.text.strip())
    if not body or len(body) % 2 == 0:
        return bad("a grid barrier after the last segment of an iteration")
    return Segments(calls, trips=trips, iteration=it)


def _loop_shape(fn: Function, barrier: bool) -> tuple[list, int, str] | str:
    """A device loop as LLVM leaves it: an entry block that only branches to the loop; the
    loop block with one phi (the iteration, 0 from the entry), the iteration's body and the
    exit test; a latch block that branches back, with one grid barrier (`barrier`) or no
    call at all (counters: the waits order the iterations); an exit block that returns. The
    increment by 1 may sit in either loop block (or be folded to the constant 1, two
    iterations), the test may compare the iteration or its successor with the trip count in
    any unsigned or equality predicate. Returns the body's instructions, the trip
    count and the iteration's name, or what does not fit (a phrase)."""
    if len(fn.blocks) != 4:
        return f"{len(fn.blocks)} basic blocks"
    entry = fn.blocks[0]
    if [i.opcode for i in entry.instrs] != ["br"] or len(entry.succs) != 1:
        return entry.instrs[-1].text.strip()
    head = entry.succs[0]
    phi = head.instrs[0]
    m = re.fullmatch(r"%(\S+) = phi i32 \[ (\S+), %(\S+) \], \[ (\S+), %(\S+) \]",
                     phi.text.strip())
    if phi.opcode != "phi" or m is None:
        return phi.text.strip()
    it = f"%{m.group(1)}"
    # (an unnamed entry block is `%0` in the text, "" in the view)
    entry_name = entry.name or "0"
    incoming = {m.group(3): m.group(2), m.group(5): m.group(4)}
    if len(incoming) != 2 or incoming.get(entry_name) != "0":
        return phi.text.strip()
    (latch_name, back), = [(k, v) for k, v in incoming.items() if k != entry_name]
    latch = next((x for x in fn.blocks[1:] if x.name == latch_name), None)
    if latch is None or latch is head or latch.succs != [head] or latch not in head.succs \
            or len(head.succs) != 2:
        return "the loop's latch"
    exit_block = next(x for x in head.succs if x is not latch)
    if [i.opcode for i in exit_block.instrs] != ["ret"]:
        return "the loop's exit"
    # the increment (at most one, in either loop block): `%n = add i32 %it, 1`
    inc = re.compile(rf"%(\S+) = add (?:nuw )?(?:nsw )?i32 {re.escape(it)}, 1")
    incs = [inc.fullmatch(i.text.strip()) for i in (*head.instrs[1:-1], *latch.instrs[:-1])]
    names = [f"%{x.group(1)}" for x in incs if x]
    nxt = names[0] if len(names) == 1 else None
    if len(names) > 1 or sum(1 for i in latch.instrs[:-1] if not inc.fullmatch(
            i.text.strip())) != int(barrier) or [_callee(i) for i in latch.instrs
                                                 if i.opcode == "call"] != [GRID_SYNC] * barrier:
        return ("the latch holds more than " + ("a grid barrier and " if barrier else "")
                   + "the increment")
    # the iteration after `k`: the increment, or a constant LLVM folded it to
    if back == nxt:
        def after(k: int) -> int:
            return k + 1
    elif re.fullmatch(r"-?\d+", back):
        def after(k: int) -> int:
            return int(back)
    else:
        return phi.text.strip()
    br = head.instrs[-1]
    cmp = head.instrs[-2] if head.instrs[-2].opcode == "icmp" else None
    subject = re.escape(it) + (f"|{re.escape(nxt)}" if nxt else "")
    mc = cmp and re.fullmatch(rf"%(\S+) = icmp (\w+) i32 ({subject}), (-?\d+)",
                              cmp.text.strip())
    if not mc or _CMP.get(mc.group(2)) is None or f"%{mc.group(1)}" not in br.text:
        return cmp.text.strip() if cmp else br.text.strip()
    test, limit, shift = _CMP[mc.group(2)], int(mc.group(4)), int(mc.group(3) == nxt)
    go_on = head.succs[0] is latch  # the branch continues when the test holds
    k, trips = 0, 1
    while test(k + shift, limit) == go_on:
        if after(k) != k + 1:
            return f"an iteration that does not follow {k}: {phi.text.strip()}"
        k, trips = k + 1, trips + 1
        if trips > _MAX_TRIPS:
            return f"more than {_MAX_TRIPS} iterations: {cmp.text.strip()}"
    return [i for i in head.instrs[1:-2] if not inc.fullmatch(i.text.strip())], trips, it


def _counter_segments(fn: Function, defined: set[str], text: str) -> Segments | str:
    """The counters form: per segment an optional `sirius_mk_wait`, the segment's call and a
    `sirius_mk_signal`, the helpers' arguments constants and globals of the module. What the
    helpers do with them is theirs to say: the executor runs them (counters.py)."""
    def bad(what: str) -> str:
        return (f"has dependence counters ({MK_WAIT}) outside the form the executor runs "
                f"(wait, segment call and signal per segment): {what[:100]}")

    trips, it = 1, None
    if len(fn.blocks) == 1:
        ins = [i for i in fn.blocks[0].instrs if i.opcode != "ret"]
    else:  # a device loop: the waits, calls and signals of one iteration in its body
        shape = _loop_shape(fn, barrier=False)
        if isinstance(shape, str):
            return bad(shape)
        ins, trips, it = shape
    calls: list[tuple[str, list[str]]] = []
    waits: list[tuple[tuple[str, object], ...] | None] = []
    signals: list[tuple[tuple[str, object], ...]] = []
    # what comes next: a wait or a segment call ("open"), the segment after a wait, a signal
    state, wait = "open", None
    for x in ins:
        callee = _callee(x)
        refs = _helper_args(call_args(x.text, callee)[0]) if callee in MK_HELPERS else None
        if callee == MK_WAIT and state == "open" and refs is not None:
            state, wait = "segment", refs
        elif callee in defined and callee not in MK_HELPERS and callee != fn.name \
                and state in ("open", "segment") and _passes_iteration(
                    call_args(x.text, callee)[0], it):
            waits.append(wait)
            calls.append((callee, call_args(x.text, callee)[0]))
            state, wait = "signal", None
        elif callee == MK_SIGNAL and state == "signal" and refs is not None:
            signals.append(refs)
            state = "open"
        else:
            return bad(x.text.strip())
    if state != "open" or not calls:
        return bad("a wait or a segment without the signal after it")
    names = sorted({x for refs in (*waits, *signals) if refs for kind, x in refs
                    if kind == "g"})
    memory = []
    for name in names:
        got = _int_global(text, name)
        if got is None:
            return bad(f"@{name} is not an integer array the executor can read")
        # the helpers take it as an argument: named anywhere but its definition and this
        # body, a segment could reach it, and would see other memory than the helpers
        uses = len(re.findall(rf'@"?{re.escape(name)}"?\b', text))
        if uses != 1 + len(re.findall(rf'@"?{re.escape(name)}"?\b', fn.text)):
            return bad(f"@{name}, a table of the counters, is used outside the megakernel's "
                       "body")
        memory.append((name, *got))
    return Segments(calls, trips=trips, iteration=it,
                    counters=(tuple(waits), tuple(signals), tuple(memory)))


def _helper_args(args: list[str]) -> tuple[tuple[str, object], ...] | None:
    """A helper call's arguments as ("g", global) and ("c", integer); None for any other."""
    out: list[tuple[str, object]] = []
    for a in args:
        ty, v = a.split()[0], a.split()[-1]
        if v.startswith("@"):
            out.append(("g", v[1:].strip('"')))
        elif ty.startswith("i") and _int(v) is not None:
            out.append(("c", _int(v)))
        else:
            return None
    return tuple(out)


def _int(a: str) -> int | None:
    try:
        return int(a)
    except ValueError:
        return None


def _int_global(text: str, name: str) -> tuple[bytes, bool] | None:
    """The initial bytes of a module global that is an array of integers (`@name = ...
    global|constant [N x iW] zeroinitializer|[...]`), and whether it may be written."""
    m = re.search(rf'^@"?{re.escape(name)}"? = [^\n]*?\b(global|constant) \[(\d+) x i(\d+)\] '
                  r"(zeroinitializer|\[([^\]]*)\])", text, re.M)
    if m is None or int(m.group(3)) % 8:
        return None
    n, width = int(m.group(2)), int(m.group(3)) // 8
    if m.group(4) == "zeroinitializer":
        return bytes(n * width), m.group(1) == "global"
    vals = [_int(v.strip().split()[-1]) for v in m.group(5).split(",")]
    if None in vals or len(vals) != n:
        return None
    data = b"".join((v % (1 << (8 * width))).to_bytes(width, "little")
                    for v in vals)  # type: ignore[operator]
    return data, m.group(1) == "global"


def segment_wrapper(index: int, header: str, fn: Function, callee: str, call: list[str],
                     loops: bool, iteration: str | None = None) -> str:
    """`__sirius_thread_N`: one thread of one segment of megakernel `fn`, which unpacks the
    kernel's arguments and calls the segment as the kernel's body does (constants and poison
    where the body passes them); a device loop's `iteration` comes after the kernel's
    arguments (the executor passes it as one more i32)."""
    lines = thread_wrapper(index, header, fn, loops).split("\n")[:-3]  # without call, ret, }
    if iteration is not None:
        n = len(fn.args)
        lines += [f"  %pit = getelementptr inbounds ptr, ptr %args, i64 {n}",
                  "  %ait = load ptr, ptr %pit, align 8", "  %vit = load i32, ptr %ait, align 1"]
    own = {f"%{a.name}": i for i, a in enumerate(fn.args)}
    name = re.search(r'@("[^"]+"|[-\w.$]+)\(', header).group(1)
    params, _ = call_args(header, name)
    args = []
    for a in call:
        if iteration is not None and arg_value(a)[1] == iteration:
            args.append("i32 %vit")
            continue
        i = own.get(arg_value(a)[1])
        if i is None:  # a constant or poison, as the kernel's body passes it
            args.append(a)
        else:
            byval = re.search(r"byval\(([^)]*)\)", params[i])
            args.append(f"{a.rsplit(' ', 1)[0]} {'%a' if byval else '%v'}{i}")
    if loops:
        args += ["ptr %frame", "i32 %state", "ptr %counts"]
        lines += [f"  %next = call i32 @{_quote(callee)}({', '.join(args)})", "  ret i32 %next"]
    else:
        lines += [f"  call void @{_quote(callee)}({', '.join(args)})", "  ret void"]
    return "\n".join(lines + ["}"])


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[-\w.$]+", name) else f'"{name}"'
