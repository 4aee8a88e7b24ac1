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
from sirius.fusion.spec import GRID_SYNC, GRID_SYNC_COUNTER, Dim3, FusedKernelSpec, FusedParam


def write_grid(asm, spec: FusedKernelSpec, members: list, params: Sequence[FusedParam],
               block: Dim3, grid: Dim3, ptext: list[str], kattrs: str, target: str) -> None:
    """A megakernel: the kernel calls one function per segment, `sirius_grid_sync()`
    between them; a segment runs its members one after another in every block, each over
    its own blocks in a block-stride loop (block b runs b, b + G, b + 2G, ... of a member
    that needs more blocks than the G of the grid), a block barrier between members. The
    segments stay functions of their own (noinline): the CPU executor runs each over all
    blocks before the next, which is what the grid barrier means."""
    args = ", ".join(f"{p.type} %{irtext.local_ref(p.name)}" for p in params)
    fparam = {(mi, j): p for p in params for mi, j in p.uses}
    body = []
    for k, seg in enumerate(spec.segments()):
        fn = f"{spec.name}_seg{k}"
        if k:
            _grid_sync(asm)
            body.append(f"  call void @{GRID_SYNC}()")
        body.append(f"  call void {irtext.global_ref(fn)}({args})")
        _write_segment(asm, spec, fn, [members[i] for i in seg], block, grid, ptext,
                           target, fparam)
    asm.appended.append("\n".join(
        [f"define dso_local ptx_kernel void {irtext.global_ref(spec.name)}"
         f"({', '.join(ptext)}) #{asm.group(kattrs)} {{", "entry:", *body,
         "  ret void", "}"]))

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
    out = [f"define void {irtext.global_ref(fn)}({', '.join(ptext)}) "
           f"#{asm.group(attrs)}{dbg} {{", "entry:"]
    out += w.flush()
    w.scope()
    for j, pm in enumerate(seg):
        i, need = pm.index, pm.blocks
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
        if j + 1 < len(seg):  # the next member may reuse its shared memory
            asm.declare(irtext.SYNC, f"declare void @{irtext.SYNC}(i32)")
            out.append(f"  call void @{irtext.SYNC}(i32 0){w.loc}")
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
    asm.declare(irtext.SYNC, f"declare void @{irtext.SYNC}(i32)")
    for s in ("tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x",
              "nctaid.y", "nctaid.z"):
        asm.declare(f"llvm.nvvm.read.ptx.sreg.{s}",
                     f"declare i32 @llvm.nvvm.read.ptx.sreg.{s}()")
    sreg = "call i32 @llvm.nvvm.read.ptx.sreg."
    bar = f"@{GRID_SYNC_COUNTER}"
    asm.appended.append(f"{bar} = internal addrspace(1) global i32 0, align 4")
    asm.appended.append("\n".join([
        f"define internal void @{GRID_SYNC}() #{asm.group('convergent noinline nounwind')}"
        " {", "entry:",
        f"  call void @{irtext.SYNC}(i32 0)",
        f"  %tx = {sreg}tid.x()", f"  %ty = {sreg}tid.y()", f"  %tz = {sreg}tid.z()",
        "  %t1 = or i32 %tx, %ty", "  %t2 = or i32 %t1, %tz",
        "  %lead = icmp eq i32 %t2, 0",
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
