"""A megakernel's code (the `grid` arrangement, docs/fusion-megakernel.md): the kernel that
calls its segments with grid barriers between them, the segment functions with their
block-stride loops, and the grid barrier itself. Called by `assemble.Assembler` (`asm`), whose
placement, parameters, shared-memory layout and member calls it uses."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from sirius.analysis.expr import Expr
from sirius.fusion.codegen import irtext
from sirius.fusion.codegen.irwriter import Writer
from sirius.fusion.geometry import variable_ranges
from sirius.fusion.spec import (
    GRID_SYNC,
    GRID_SYNC_COUNTER,
    MK_FLAGS,
    MK_SIGNAL,
    MK_WAIT,
    MK_WAITIDX,
    MK_WAITS,
    Dim3,
    FusedKernelSpec,
    FusedParam,
)

_SREG = "call i32 @llvm.nvvm.read.ptx.sreg."
# a device loop's iteration: the kernel's loop variable, and each segment's last parameter
ITERATION = "sirius.it"
IT_ENV = "#it"  # its value in a member's env (assemble.instance_code steps the arguments)
# %lead: this thread is thread (0, 0, 0) of its block, the one that talks to the other blocks
_LEAD = (f"  %tx = {_SREG}tid.x()", f"  %ty = {_SREG}tid.y()", f"  %tz = {_SREG}tid.z()",
         "  %t1 = or i32 %tx, %ty", "  %t2 = or i32 %t1, %tz", "  %lead = icmp eq i32 %t2, 0")


def _declare_sync(asm, more: tuple[str, ...] = ()) -> None:
    """The block barrier and the special registers a grid barrier or a counter helper reads
    (the thread ids and ctaid.x, and `more`)."""
    asm.declare(irtext.SYNC, f"declare void @{irtext.SYNC}(i32)")
    for s in ("tid.x", "tid.y", "tid.z", "ctaid.x", *more):
        asm.declare(f"llvm.nvvm.read.ptx.sreg.{s}",
                     f"declare i32 @llvm.nvvm.read.ptx.sreg.{s}()")


def write_grid(asm, spec: FusedKernelSpec, members: list, params: Sequence[FusedParam],
               block: Dim3, grid: Dim3, ptext: list[str], kattrs: str, target: str) -> None:
    """A megakernel: the kernel calls one function per segment, `sirius_grid_sync()`
    between them; a segment runs its members one after another in every block, each over
    its own blocks in a block-stride loop (block b runs b, b + G, b + 2G, ... of a member
    that needs more blocks than the G of the grid), a block barrier before a member that
    uses shared memory when one before it in the segment did (they overlay it; the members of
    a segment are independent, so no other barrier is needed). The
    segments stay functions of their own (noinline): the CPU executor runs each over all
    blocks before the next, which is what the grid barrier means."""
    args = ", ".join(f"{p.type} %{irtext.local_ref(p.name)}" for p in params)
    loop = spec.device_loop
    if loop is not None:  # the segments take the iteration too
        args += f", i32 %{ITERATION}"
    fparam = {(mi, j): p for p in params for mi, j in p.uses}
    body = []
    segments = spec.segments()
    if spec.waits is not None:
        flags, table, index, first = _counter_tables(asm, spec, len(segments))
        last = len(segments) - 1
    for k, seg in enumerate(segments):
        fn = f"{spec.name}_seg{k}"
        if k and spec.waits is None:
            _grid_sync(asm)
            body.append(f"  call void @{GRID_SYNC}()")
        elif k or (spec.waits is not None and k in first):  # (k = 0: waits across a loop)
            body.append(f"  call void @{MK_WAIT}(ptr addrspace(1) {flags}, ptr addrspace(1) "
                        f"{table}, ptr addrspace(1) {index}, i32 {first[k]}, i32 {grid[0]}, "
                        f"i32 {last})")
        body.append(f"  call void {irtext.global_ref(fn)}({args})")
        if spec.waits is not None:
            body.append(f"  call void @{MK_SIGNAL}(ptr addrspace(1) {flags}, i32 {k}, "
                        f"i32 {grid[0]}, i32 {last})")
        _write_segment(asm, spec, fn, [members[i] for i in seg], block, grid, ptext,
                           target, fparam)
    if loop is not None:  # counters: the waits order the iterations, no grid barrier
        body = _device_loop(asm, loop.trips, body, between=spec.waits is None)
        # LLVM would rewrite the loop by its trip count (two iterations became a phi of
        # booleans) into forms the executor does not run; the body is calls only, so
        # nothing is lost by not optimizing it (the segments are optimized on their own)
        kattrs = f"{kattrs} noinline optnone"
    asm.appended.append("\n".join(
        [f"define dso_local ptx_kernel void {irtext.global_ref(spec.name)}"
         f"({', '.join(ptext)}) #{asm.group(kattrs)} {{", "entry:", *body,
         "  ret void", "}"]))


def _device_loop(asm, trips: int, body: list[str], between: bool = True) -> list[str]:
    """The kernel body of a megakernel whose host loop runs on the device: the segments of
    `body` (which pass the iteration `%sirius.it`) `trips` times, with `between` a grid
    barrier between iterations (every dependence between two iterations, of any width, is
    ordered by it, as the kernel boundary between two launches ordered it; without it, the
    counters variant's waits on the iteration before order them). LLVM must not unroll the
    loop: the executor runs this form (runtime/cpu/entries.py), and unrolling gains nothing
    here."""
    if between:
        _grid_sync(asm)
    it, nxt = f"%{ITERATION}", f"%{ITERATION}.next"
    md = asm.md_node("")
    no_unroll = asm.md_node('!{!"llvm.loop.unroll.disable"}')
    asm.new_md[md] = f"distinct !{{!{md}, !{no_unroll}}}"
    return ["  br label %iter", "iter:",
            f"  {it} = phi i32 [ 0, %entry ], [ {nxt}, %again ]", *body,
            f"  {nxt} = add nuw i32 {it}, 1",
            f"  %{ITERATION}.more = icmp ult i32 {nxt}, {trips}",
            f"  br i1 %{ITERATION}.more, label %again, label %done",
            # the loop's metadata sits on the latch's branch (LLVM's Loop::getLoopID)
            "again:", *([f"  call void @{GRID_SYNC}()"] if between else []),
            f"  br label %iter, !llvm.loop !{md}", "done:"]

def _write_segment(asm, spec: FusedKernelSpec, fn: str, seg: list, block: Dim3, grid: Dim3,
                   ptext: list[str], target: str,
                   fparam: dict[tuple[int, int], FusedParam]) -> None:
    dbg, loc = asm.subprogram(spec, seg, fn)
    w = Writer(loc)
    env: dict[str, str] = {}
    linear, stride = Expr(0), 1
    ranges = variable_ranges(block, grid, prod(grid))
    for axis, n in zip("xyz", block, strict=True):
        env[f"t{axis}"] = w.sreg(f"tid.{axis}", n) if n > 1 else "0"
        if n > 1:
            linear = linear + Expr.var(f"t{axis}").scale(stride)
        stride *= n
    env["thread"] = w.value(linear, env, ranges)
    first = w.sreg("ctaid.x", grid[0]) if grid[0] > 1 else "0"
    env["by"] = env["bz"] = "0"
    for s in w.sregs:
        asm.declare(f"llvm.nvvm.read.ptx.sreg.{s}",
                     f"declare i32 @llvm.nvvm.read.ptx.sreg.{s}()")
    attrs = f"convergent noinline nounwind {target}".strip()
    looped = spec.device_loop is not None
    if looped:
        env[IT_ENV] = f"%{ITERATION}"
    out = [f"define void {irtext.global_ref(fn)}"
           f"({', '.join([*ptext, f'i32 %{ITERATION}'] if looped else ptext)}) "
           f"#{asm.group(attrs)}{dbg} {{", "entry:"]
    out += w.flush()
    w.scope()
    dirty = False  # shared memory used since the last block barrier
    for j, pm in enumerate(seg):
        i, need = pm.index, pm.blocks
        uses = bool(pm.smem) or pm.member.smem > 0
        if j and dirty and uses:  # it overlays what a member before it used: wait for them
            asm.declare(irtext.SYNC, f"declare void @{irtext.SYNC}(i32)")
            out.append(f"  call void @{irtext.SYNC}(i32 0){w.loc}")
            dirty = False
        dirty = dirty or uses
        out += [f"  br label %s{i}", f"s{i}:",
                f"  %c{i} = icmp ult i32 {first}, {need}",
                f"  br i1 %c{i}, label %l{i}, label %d{i}", f"l{i}:",
                f"  %vb{i} = phi i32 [ {first}, %s{i} ], [ %nx{i}, %n{i} ]",
                f"  br label %m{i}", f"m{i}:"]
        w.scope()
        menv = dict(env)
        menv["block"] = menv["bx"] = f"%vb{i}"
        out += asm.member_code(spec, pm, w, menv, fparam, f"n{i}")
        out += [f"n{i}:", f"  %nx{i} = add nuw i32 %vb{i}, {grid[0]}",
                f"  %cc{i} = icmp ult i32 %nx{i}, {need}",
                f"  br i1 %cc{i}, label %l{i}, label %d{i}", f"d{i}:"]
    out += ["  ret void", "}"]
    asm.appended.append("\n".join(out))

def _grid_sync(asm) -> None:
    """`sirius_grid_sync()`: every block of the grid arrives before any leaves (the
    cooperative-groups algorithm: thread 0 of each block adds 1 to a global counter, block
    0 adds 2^31 - (blocks - 1), so the counter's top bit flips when the last block arrives
    and its low bits are back where they were: the next barrier needs no reset). Needs
    every block co-resident: a cooperative launch."""
    if GRID_SYNC in asm.decls:
        return
    asm.declare(GRID_SYNC, "")  # defined here, once per module
    _declare_sync(asm, ("ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y", "nctaid.z"))
    sreg = _SREG
    bar = f"@{GRID_SYNC_COUNTER}"
    asm.appended.append(f"{bar} = internal addrspace(1) global i32 0, align 4")
    asm.appended.append("\n".join([
        f"define internal void @{GRID_SYNC}() #{asm.group('convergent noinline nounwind')}"
        " {", "entry:",
        f"  call void @{irtext.SYNC}(i32 0)", *_LEAD,
        "  br i1 %lead, label %arrive, label %done", "arrive:",
        f"  %bx = {sreg}ctaid.x()", f"  %by = {sreg}ctaid.y()", f"  %bz = {sreg}ctaid.z()",
        "  %b1 = or i32 %bx, %by", "  %b2 = or i32 %b1, %bz",
        "  %first = icmp eq i32 %b2, 0",
        f"  %nx = {sreg}nctaid.x()", f"  %ny = {sreg}nctaid.y()", f"  %nz = {sreg}nctaid.z()",
        "  %n1 = mul i32 %nx, %ny", "  %n = mul i32 %n1, %nz",
        "  %others = sub i32 %n, 1",
        "  %big = sub i32 -2147483648, %others",
        "  %inc = select i1 %first, i32 %big, i32 1",
        '  fence syncscope("device") seq_cst',
        f'  %old = atomicrmw add ptr addrspace(1) {bar}, i32 %inc syncscope("device") '
        "acq_rel, align 4",
        "  br label %spin", "spin:",
        f'  %cur = load atomic volatile i32, ptr addrspace(1) {bar} syncscope("device") '
        "acquire, align 4",
        "  %x = xor i32 %cur, %old",
        "  %flipped = icmp slt i32 %x, 0",
        "  br i1 %flipped, label %arrived, label %spin", "arrived:",
        '  fence syncscope("device") seq_cst',
        "  br label %done", "done:",
        f"  call void @{irtext.SYNC}(i32 0)",
        "  ret void", "}"]))


def _counter_tables(asm, spec: FusedKernelSpec, nseg: int
                    ) -> tuple[str, str, str, dict[int, int]]:
    """The `counters` variant's module globals: the flags (one per segment and block: the
    number of launches in which that block finished that segment), the wait table (five i32
    per entry: waiting block twice, the producer segment, its first and last block) and its
    index; with each waiting segment's base in the index.

    The table holds each segment's waits block by block: an entry names one waiting block,
    and block b of segment k finds its entries at [index[base_k + b], index[base_k + b + 1]),
    so its lead thread reads only its own (a scan of the whole segment's waits cost every
    block of a 128-block chain 49 us per segment on an H200, BENCHMARKS.md "On an H200").
    The executor reads the same index (runtime/cpu/entries.py)."""
    g = spec.grid[0]
    waits = sorted(spec.waits, key=lambda w: (w.segment, w.blocks, w.lag, w.after,
                                              w.producers))
    by_segment: dict[int, list] = {}
    for w in waits:
        by_segment.setdefault(w.segment, []).append(w)
    for k in range(1, nseg):
        by_segment.setdefault(k, [])
    ints: list[int] = []
    index: list[int] = []
    base: dict[int, int] = {}
    for k in sorted(by_segment):
        base[k] = len(index)
        for b in range(g):
            index.append(len(ints) // 5)
            for w in by_segment[k]:
                if w.blocks[0] <= b <= w.blocks[1]:
                    # a wait on the iteration before (lag 1) names its segment + nseg
                    ints += [b, b, w.after + w.lag * nseg, *w.producers]
        index.append(len(ints) // 5)
    flags = irtext.global_ref(spec.name + MK_FLAGS)
    table = irtext.global_ref(spec.name + MK_WAITS)
    idx = irtext.global_ref(spec.name + MK_WAITIDX)
    asm.appended.append(f"{flags} = dso_local addrspace(1) global [{nseg * g} x i32] "
                        "zeroinitializer, align 4")
    for ref, vals in ((table, ints or [0]), (idx, index or [0])):
        asm.appended.append(f"{ref} = dso_local addrspace(1) constant [{len(vals)} x i32] "
                            f"[{', '.join(f'i32 {x}' for x in vals)}], align 4")
    _counter_helpers(asm)
    return flags, table, idx, base


def _counter_helpers(asm) -> None:
    """`sirius_mk_signal(flags, k, G, last)`: after a block barrier, thread 0 publishes
    flag[k][block] = e + 1 (a device-scope fence, then a release store), where e, the launches
    of this kernel the block has finished, is its own flag of the last segment (written by the
    block itself, at the end of each launch: read before that write, it is e all launch long;
    nothing is reset). `sirius_mk_wait(flags, table, index, base, G, last)`: thread 0 reads
    this block's entries, [index[base + b], index[base + b + 1]) of the table, and for each
    spins until flag[j][p] >= e + 1 for every producer block p (acquire loads, then a fence); a
    block barrier releases the other threads. An entry naming segment j + nseg (a device
    loop's wait on the iteration before) waits for flag[j][p] >= e instead. Every wait is on
    an earlier segment or iteration (checked by FusedKernelSpec), and a block runs its
    segments in order, so with every block co-resident
    the earliest unfinished segment of any block can always proceed: no deadlock. Nothing
    stays live in the kernel across the calls but its parameters."""
    if MK_WAIT in asm.decls:
        return
    for h in (MK_SIGNAL, MK_WAIT):
        asm.declare(h, "")  # defined here, once per module
    _declare_sync(asm)
    attrs = f"#{asm.group('convergent noinline nounwind')}"
    g1 = "ptr addrspace(1)"
    lead = [*_LEAD, f"  %b = {_SREG}ctaid.x()",
            "  %erow = mul i32 %lastseg, %g", "  %eat = add i32 %erow, %b",
            f"  %ep = getelementptr inbounds i32, {g1} %flags, i32 %eat"]
    epoch = f"  %e = load volatile i32, {g1} %ep, align 4"
    asm.appended.append("\n".join([
        f"define dso_local void @{MK_SIGNAL}({g1} %flags, i32 %k, i32 %g, i32 %lastseg) {attrs} "
        "{", "entry:", f"  call void @{irtext.SYNC}(i32 0)", *lead,
        "  br i1 %lead, label %publish, label %done", "publish:", epoch,
        "  %row = mul i32 %k, %g", "  %i = add i32 %row, %b",
        f"  %p = getelementptr inbounds i32, {g1} %flags, i32 %i",
        "  %v = add i32 %e, 1",
        '  fence syncscope("device") seq_cst',
        f'  store atomic volatile i32 %v, {g1} %p syncscope("device") release, align 4',
        "  br label %done", "done:", "  ret void", "}"]))
    asm.appended.append("\n".join([
        f"define dso_local void @{MK_WAIT}({g1} %flags, {g1} %tab, {g1} %idx, i32 %ibase, "
        f"i32 %g, i32 %lastseg) {attrs} {{", "entry:", *lead,
        "  br i1 %lead, label %start, label %done", "start:", epoch,
        # this block's entries: [idx[ibase + b], idx[ibase + b + 1])
        "  %at0 = add i32 %ibase, %b", "  %at1 = add i32 %at0, 1",
        f"  %q0 = getelementptr inbounds i32, {g1} %idx, i32 %at0",
        f"  %q1 = getelementptr inbounds i32, {g1} %idx, i32 %at1",
        f"  %first = load i32, {g1} %q0, align 4", f"  %end = load i32, {g1} %q1, align 4",
        "  %want = add i32 %e, 1", "  br label %entries", "entries:",
        "  %i = phi i32 [ %first, %start ], [ %i1, %next ]",
        "  %more = icmp ult i32 %i, %end",
        "  br i1 %more, label %entry1, label %fenced", "entry1:",
        "  %base = mul i32 %i, 5",
        # the entry's fields 2-4 (0 and 1 name this block: the executor checks them)
        *[line for f, name in ((2, "j"), (3, "plo"), (4, "phi"))
          for line in (f"  %o{name} = add i32 %base, {f}",
                       f"  %q{name} = getelementptr inbounds i32, {g1} %tab, i32 %o{name}",
                       f"  %{name} = load i32, {g1} %q{name}, align 4")],
        "  br label %producers", "producers:",
        # a producer segment past the last: the same segment of the iteration before, whose
        # flag must hold e (it finished e iterations), not e + 1
        "  %nseg = add i32 %lastseg, 1", "  %lagged = icmp uge i32 %j, %nseg",
        "  %jback = sub i32 %j, %nseg", "  %jj = select i1 %lagged, i32 %jback, i32 %j",
        "  %target = select i1 %lagged, i32 %e, i32 %want",
        "  %row = mul i32 %jj, %g", "  br label %outer", "outer:",
        "  %p = phi i32 [ %plo, %producers ], [ %p1, %ready ]",
        "  %at = add i32 %row, %p",
        f"  %fp = getelementptr inbounds i32, {g1} %flags, i32 %at",
        "  br label %spin", "spin:",
        f'  %cur = load atomic volatile i32, {g1} %fp syncscope("device") acquire, align 4',
        "  %diff = sub i32 %cur, %target", "  %early = icmp slt i32 %diff, 0",
        "  br i1 %early, label %spin, label %ready", "ready:",
        "  %p1 = add i32 %p, 1", "  %last = icmp ugt i32 %p1, %phi",
        "  br i1 %last, label %next, label %outer", "next:",
        "  %i1 = add i32 %i, 1", "  br label %entries", "fenced:",
        '  fence syncscope("device") seq_cst', "  br label %done", "done:",
        f"  call void @{irtext.SYNC}(i32 0)", "  ret void", "}"]))
