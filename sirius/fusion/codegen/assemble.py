"""Step 2 of `build`: place the members, rewrite the fragments, write the fused kernels.

Works on one print of the module that already holds the fragments (step 1, in
`codegen/fragment.py`). For each spec: the fused block and grid, each member's block range,
id expressions and guard (`fusion/geometry.py`), its counted-barrier id when it runs on part
of a block, its shared-memory offsets, the fused parameter list; then each fragment's sreg
reads, barriers and shared arrays are rewritten and the kernel that calls the fragments is
written. `run()` returns the module text with all of it spliced in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from sirius.analysis.expr import Expr
from sirius.analysis.irtypes import type_size
from sirius.analysis.irview import ModuleView
from sirius.fusion.codegen import fragment as frag
from sirius.fusion.codegen import grid as grid_code
from sirius.fusion.codegen import irtext
from sirius.fusion.codegen.dispatch import dispatch
from sirius.fusion.codegen.grid import IT_ENV
from sirius.fusion.codegen.irwriter import Writer
from sirius.fusion.geometry import (
    EmptyMember,
    Guard,
    active_threads,
    guard,
    member_id_sets,
    variable_ranges,
    whole_warps,
)
from sirius.fusion.spec import (
    CodegenError,
    Dim3,
    FusedKernel,
    FusedKernelSpec,
    FusedParam,
    Member,
    Placement,
)

MAX_BARRIER_ID = 15


@dataclass
class _Member:
    index: int
    member: Member
    fragment: str
    ids: tuple[Expr, ...]
    guard: Guard
    ranges: dict[str, tuple[int, int]]
    first_block: int
    blocks: int
    threads: int | None
    barrier_id: int | None
    smem: dict[str, int]  # shared global -> byte offset in the fused buffer (static) or dyn area
    smem_offset: int
    dyn_offset: int
    more: tuple[tuple[tuple[Expr, ...], Guard], ...] = ()  # further instances per thread


class Assembler:
    def __init__(self, text: str, view: ModuleView, specs: Sequence[FusedKernelSpec],
                 frags: dict[tuple[int, int], str]):
        self.text = text
        self.view = view
        self.specs = specs
        self.frags = frags
        self.md = irtext.metadata(text)
        self.next_md = irtext.max_metadata_id(text) + 1
        self.groups = irtext.attr_groups(text)
        self.next_group = max(self.groups, default=-1) + 1
        self.shared = frag.shared_globals(view)
        self.cache: dict[str, frag.Facts] = {}
        self.replaced: dict[str, str] = {}  # fragment -> rewritten text
        self.appended: list[str] = []
        self.new_md: dict[int, str] = {}
        self.new_groups: list[str] = []
        self.decls: dict[str, str] = {}

    # bookkeeping ---------------------------------------------------------------------------------
    def group(self, attrs: str) -> int:
        n = self.next_group
        self.next_group += 1
        self.new_groups.append(f"attributes #{n} = {{ {attrs} }}")
        return n

    def md_node(self, text: str) -> int:
        n = self.next_md
        self.next_md += 1
        self.new_md[n] = text
        return n

    def declare(self, name: str, decl: str) -> None:
        self.decls[name] = decl

    def run(self) -> tuple[str, list[FusedKernel]]:
        kernels = [self.kernel(si, s) for si, s in enumerate(self.specs)]
        spans = irtext.functions(self.text)
        out, last = [], 0
        for name, (a, b) in sorted(spans.items(), key=lambda kv: kv[1][0]):
            if name in self.replaced:
                out += [self.text[last:a], self.replaced[name]]
                last = b
        out.append(self.text[last:])
        have = irtext.declared(self.text)
        tail = [d for n, d in sorted(self.decls.items()) if n not in have and d]
        tail += self.appended + self.new_groups + [f"!{n} = {t}"
                                                   for n, t in sorted(self.new_md.items())]
        return "".join(out) + "\n" + "\n".join(tail) + "\n", kernels

    # one fused kernel ----------------------------------------------------------------------------
    def fail(self, spec: FusedKernelSpec, msg: str, mi: int | None = None) -> CodegenError:
        who = spec.name if mi is None else \
            f"{spec.name}: member {mi} ({spec.members[mi].kernel})"
        return CodegenError(f"{who}: {msg}")

    def kernel(self, si: int, spec: FusedKernelSpec) -> FusedKernel:
        block = spec.block or _default_block(spec)
        threads = prod(block)
        if threads > 1024:
            raise self.fail(spec, f"the fused block has {threads} threads; at most 1024")
        needs = [m.blocks_needed(threads) for m in spec.members]
        for mi, m in enumerate(spec.members):
            if m.mapping.kind == "block" and m.threads > threads:
                raise self.fail(spec, f"needs {m.threads} threads per block; the fused block "
                                f"has {threads}", mi)
        if spec.arrangement == "grid" and any(n is None for n in needs):
            raise self.fail(spec, "a megakernel member with a custom map must say how many "
                            "blocks it needs (Member.blocks)")
        if spec.arrangement == "horizontal":
            if any(n is None for n in needs):
                raise self.fail(spec, "a horizontal member with a custom map must say how many "
                                "blocks it needs (Member.blocks)")
            firsts = [sum(n or 0 for n in needs[:i]) for i in range(len(needs))]
            total = sum(n or 0 for n in needs)
        else:
            known = [n for n in needs if n is not None]
            if not known and spec.grid is None:
                raise self.fail(spec, "no member says how many blocks it needs; give a grid")
            firsts = [0] * len(needs)
            total = max(known, default=0)
        grid: Dim3 = spec.grid or (total, 1, 1)
        if spec.arrangement == "grid":  # each member loops over its blocks (block stride)
            if grid[1] * grid[2] != 1:
                raise self.fail(spec, f"a megakernel's grid is one-dimensional, not {grid}")
        elif prod(grid) < total:
            raise self.fail(spec, f"the grid {grid} has {prod(grid)} blocks; the members need "
                            f"{total}")
        if spec.arrangement == "vertical":
            ranges = [(0, prod(grid))] * len(needs)
        else:
            ranges = [(f, n or 0) for f, n in zip(firsts, needs, strict=True)]
        # a megakernel member sees its own blocks, one at a time: block ids up to its need
        members = [self.place(spec, si, mi, m, block,
                              (ranges[mi][1], 1, 1) if spec.arrangement == "grid" else grid,
                              ranges[mi])
                   for mi, m in enumerate(spec.members)]
        self.barrier_ids(spec, members)
        static_total, dyn_total = self.layout(spec, members)
        params = self.params(spec)
        for pm in members:
            self.rewrite_fragment(spec, pm)
        self.write_kernel(spec, members, params, block, grid, static_total)
        placements = tuple(Placement(pm.index, pm.fragment, pm.first_block, pm.blocks,
                                     pm.threads, pm.barrier_id, pm.smem_offset, pm.dyn_offset)
                           for pm in members)
        return FusedKernel(spec.name, spec.arrangement, grid, block, dyn_total, static_total,
                           params, placements, spec)

    def place(self, spec: FusedKernelSpec, si: int, mi: int, m: Member, block: Dim3,
              grid: Dim3, rng: tuple[int, int]) -> _Member:
        name = self.frags[(si, mi)]
        facts, _ = frag.closure(self.view, name, self.shared, self.cache)
        sets = member_id_sets(m, prod(block))
        ids = sets[0]
        # a repeated member's ids see one repetition's blocks (the block index modulo them)
        ranges = variable_ranges(block, grid, rng[1] // m.repeat)
        guards: list[Guard] = []
        for k, one in enumerate(sets):
            try:
                guards.append(guard(one, m, ranges))
            except EmptyMember as e:
                if len(sets) == 1:
                    raise self.fail(spec, f"its thread map never runs it: {e}", mi) from None
                raise self.fail(spec, f"its thread map never runs its instance {k}: {e}",
                                mi) from None
        g = guards[0]
        own = self.cache[name]
        for callee in own.calls:
            cf, _ = frag.closure(self.view, callee, self.shared, self.cache)
            if cf.context:
                raise self.fail(spec, f"calls {callee}, which could not be inlined into it "
                                "(recursive?) and reads thread ids, uses barriers, warp "
                                "operations or shared memory", mi)
        if facts.asm:
            raise self.fail(spec, "contains inline assembly that reads special registers or "
                            f"synchronizes ({facts.asm[0].strip()[:80]}); it cannot be "
                            "remapped", mi)
        cluster = sorted(s for s in facts.sregs if s.startswith(("cluster", "nclusterid")))
        if cluster:
            raise self.fail(spec, f"reads cluster registers ({', '.join(cluster)})", mi)
        if m.mapping.kind != "block":
            lane = sorted(s for s in facts.sregs if s.startswith(("laneid", "warpid",
                                                                  "lanemask")))
            what = [w for w, has in (("barriers", facts.barriers),
                                     ("shared memory", facts.shared),
                                     ("warp operations", facts.warp_ops or lane)) if has]
            if what:
                raise self.fail(spec, f"uses {' and '.join(what)}, which need its blocks "
                                f"intact; a {m.mapping.kind} thread map spreads a member block "
                                "over fused blocks (use the block map)", mi)
        threads: int | None = prod(block)
        bar_id: int | None = None
        more = tuple(zip(sets[1:], guards[1:], strict=True))
        if more:  # several instances per thread (no barriers: refused above)
            if any(x.thread_checks_use_blocks for x in guards):
                threads = None
            elif any(x.thread_checks for x in guards):
                act = [any(t) for t in zip(*(active_threads(x, block) for x in guards),
                                           strict=True)]
                threads = sum(act)
            return _Member(mi, m, name, ids, g, ranges, rng[0], rng[1], threads, None, {}, 0,
                           0, more)
        if g.thread_checks:
            if g.thread_checks_use_blocks:
                threads = None
            else:
                act = active_threads(g, block)
                threads = sum(act)
                if threads == 0:
                    raise self.fail(spec, "no thread of a fused block runs it", mi)
                if facts.barriers and threads < prod(block):
                    if not whole_warps(act) or threads % 32:
                        raise self.fail(spec, f"has barriers and runs on {threads} of the "
                                        f"{prod(block)} threads of a block, not whole warps; "
                                        "counted barriers need a multiple of 32 threads", mi)
                    bar_id = -1  # assigned in barrier_ids
            if facts.barriers and threads is None:
                raise self.fail(spec, "has barriers, and which of a block's threads run it "
                                "depends on the block; a counted barrier needs a fixed count",
                                mi)
        return _Member(mi, m, name, ids, g, ranges, rng[0], rng[1], threads, bar_id, {}, 0, 0)

    def barrier_ids(self, spec: FusedKernelSpec, members: list[_Member]) -> None:
        used: set[int] = set()
        for pm in members:
            facts, _ = frag.closure(self.view, pm.fragment, self.shared, self.cache)
            for name, bid in facts.barriers:
                if pm.barrier_id is not None:
                    ok = frag.SYNC_ALL.match(name) or frag.RED_ALL.match(name)
                    if not ok or bid not in ("0", ""):
                        raise self.fail(spec, f"uses {name} with barrier id {bid or '?'}; only "
                                        "block-wide barriers (__syncthreads and its _count/"
                                        "_and/_or forms) can be made counted", pm.index)
                elif bid.lstrip("-").isdigit():
                    used.add(int(bid))
        # Vertical members run one after another in the same block, so each gets its own id;
        # horizontal members never share a block, so one id serves them all, and so it does for
        # a megakernel's members, which a block barrier (or a grid barrier) separates.
        free = (i for i in range(1, MAX_BARRIER_ID + 1) if i not in used)
        shared_id: int | None = None
        for pm in members:
            if pm.barrier_id is not None:
                if shared_id is not None:
                    pm.barrier_id = shared_id
                    continue
                try:
                    pm.barrier_id = next(free)
                except StopIteration:
                    raise self.fail(spec, "more partial members with barriers than the 15 "
                                    "named barriers a block has") from None
                if spec.arrangement in ("horizontal", "grid"):
                    shared_id = pm.barrier_id

    def layout(self, spec: FusedKernelSpec, members: list[_Member]) -> tuple[int, int]:
        """Offsets of every member's shared arrays; (static bytes, dynamic bytes)."""
        # a megakernel's members are separated by block (or grid) barriers: they may overlay
        share = spec.share_smem if spec.share_smem is not None else \
            spec.arrangement in ("horizontal", "grid")
        if share and spec.arrangement == "vertical":
            users = [pm for pm in members if self.cache[pm.fragment].shared or pm.member.smem]
            for prev, pm in zip(users, users[1:], strict=False):
                between = members[prev.index + 1:pm.index + 1]
                if not any(x.member.barrier_before for x in between):
                    raise self.fail(spec, "shares shared memory with an earlier member "
                                    "(share_smem) but no barrier separates them", pm.index)
        static_end = dyn_end = 0
        for pm in members:
            used = sorted(self.cache[pm.fragment].shared,
                          key=lambda g: list(self.view.globals).index(g))
            start = 0 if share else _align(static_end, 16)
            off = start
            for g in used:
                if self.shared[g]:
                    continue
                gv = self.view.globals[g]
                am = re.search(r", align (\d+)", self.view.global_texts[g])
                off = _align(off, int(am.group(1)) if am else 4)
                pm.smem[g] = off
                off += type_size(gv.type, self.view.struct_bodies)
            pm.smem_offset = start
            if off > start:
                static_end = max(static_end, off)
            dstart = 0 if share else _align(dyn_end, 16)
            pm.dyn_offset = dstart
            for g in used:
                if self.shared[g]:
                    pm.smem[g] = dstart
            if pm.member.smem:
                dyn_end = max(dyn_end, dstart + pm.member.smem)
        return static_end, dyn_end

    def params(self, spec: FusedKernelSpec) -> tuple[FusedParam, ...]:
        slots: dict[int, list[tuple[int, int]]] = {}
        nxt = 0
        for mi, m in enumerate(spec.members):
            n = len(self.view.functions[m.kernel].args)
            pmap = m.param_map if m.param_map is not None else tuple(range(nxt, nxt + n))
            nxt = max(nxt, max(pmap, default=-1) + 1)
            for j, k in enumerate(pmap):
                slots.setdefault(k, []).append((mi, j))
        if sorted(slots) != list(range(len(slots))):
            missing = sorted(set(range(max(slots, default=-1) + 1)) - set(slots))
            raise self.fail(spec, f"fused parameter(s) {missing} receive no member parameter")
        out: list[FusedParam] = []
        names: set[str] = set()
        for k in range(len(slots)):
            uses = tuple(slots[k])
            kinds = {self.param_type(spec, mi, j) for mi, j in uses}
            if len(kinds) > 1:
                raise self.fail(spec, f"fused parameter {k} merges parameters of different "
                                f"types: {', '.join(sorted(kinds))}")
            mi, j = uses[0]
            h = irtext.parse_header(self.view.functions[spec.members[mi].kernel].text
                                    .split("\n", 1)[0])
            base = irtext.param_name(h.params[j]) or f"p{k}"
            base = base if not base.isdigit() else f"p{k}"
            name = base if base not in names else f"{base}.{k}"
            names.add(name)
            out.append(FusedParam(name, kinds.pop(), uses))
        return tuple(out)

    def param_type(self, spec: FusedKernelSpec, mi: int, j: int) -> str:
        fn = self.view.functions[spec.members[mi].kernel]
        h = irtext.parse_header(fn.text.split("\n", 1)[0])
        byval = re.search(r"byval\([^)]*\)(?: align \d+)?", h.params[j])
        return fn.args[j].type + (f" {byval.group(0)}" if byval else "")

    # fragment rewrite ----------------------------------------------------------------------------
    def rewrite_fragment(self, spec: FusedKernelSpec, pm: _Member) -> None:
        text = self.view.functions[pm.fragment].text
        head, body = text.split("\n", 1)
        h = irtext.parse_header(head)
        attrs = irtext.edit_attrs(self.groups.get(h.attr_group, "") if h.attr_group is not None
                                  else "", drop=("noinline", "optnone"), drop_prefix=("nvvm.",),
                                  add=("alwaysinline",))
        suffix = re.sub(r"#\d+", f"#{self.group(attrs)}", h.suffix) if h.attr_group is not None \
            else f" #{self.group(attrs)}" + h.suffix
        lines = []
        for line in body.split("\n"):
            if "@llvm.nvvm." in line:
                new = frag.rewrite_sreg(line)
                if new is None and pm.barrier_id is not None:
                    got = frag.rewrite_barrier(line, pm.barrier_id, pm.threads or 0)
                    if got is not None:
                        new, intrinsic = got
                        self.declare(intrinsic, _BARRIER_DECLS[intrinsic.rsplit(".", 2)[-2]]
                                     .format(intrinsic))
                line = new if new is not None else line
            lines.append(line)
        body = "\n".join(lines)
        fused_smem = irtext.global_ref(f"{spec.name}.smem")
        for g, off in pm.smem.items():
            if self.shared[g]:
                rep = irtext.global_ref(g) if off == 0 else \
                    f"getelementptr (i8, ptr addrspace(3) {irtext.global_ref(g)}, i64 {off})"
            else:
                rep = fused_smem if off == 0 else \
                    f"getelementptr inbounds (i8, ptr addrspace(3) {fused_smem}, i64 {off})"
            body = frag.substitute_global(body, g, rep)
        self.replaced[pm.fragment] = irtext.Header(h.prefix, h.name, h.params, suffix).render() \
            + "\n" + body

    # the kernel ----------------------------------------------------------------------------------
    def write_kernel(self, spec: FusedKernelSpec, members: list[_Member],
                     params: tuple[FusedParam, ...], block: Dim3, grid: Dim3,
                     static_smem: int) -> None:
        if static_smem:
            self.appended.append(f"{irtext.global_ref(spec.name + '.smem')} = internal "
                                 f"addrspace(3) global [{static_smem} x i8] undef, align 16")
        target = ""
        for pm in members:
            h = irtext.parse_header(self.view.functions[pm.fragment].text.split("\n", 1)[0])
            attrs = self.groups.get(h.attr_group, "") if h.attr_group is not None else ""
            t = re.findall(r'"target-(?:cpu|features)"="[^"]*"', attrs)
            if t:
                target = " ".join(t)
                break
        ntid = ",".join(map(str, block)) if block[1] * block[2] > 1 else str(block[0])
        kattrs = (f'convergent mustprogress norecurse nounwind "nvvm.maxntid"="{ntid}" '
                  f'{target} "uniform-work-group-size"="true"').replace("  ", " ")
        dbg, loc = self.subprogram(spec, members)
        ptext = []
        for p in params:
            noundef = all("noundef" in self.member_param(spec, mi, j) for mi, j in p.uses)
            ptext.append(f"{p.type}{' noundef' if noundef else ''} %{irtext.local_ref(p.name)}")
        if spec.arrangement == "grid":
            grid_code.write_grid(self, spec, members, params, block, grid, ptext, kattrs, target)
            return
        w = Writer(loc)
        out = [f"define dso_local ptx_kernel void {irtext.global_ref(spec.name)}"
               f"({', '.join(ptext)}) #{self.group(kattrs)}{dbg} {{", "entry:"]
        env: dict[str, str] = {}
        ranges = variable_ranges(block, grid, prod(grid))
        for var, sreg, dims in (("thread", "tid", block), ("block", "ctaid", grid)):
            linear, stride = Expr(0), 1
            for axis, n in zip("xyz", dims, strict=True):
                name = ("b" if var == "block" else "t") + axis
                env[name] = w.sreg(f"{sreg}.{axis}", n) if n > 1 else "0"
                if n > 1:
                    linear = linear + Expr.var(name).scale(stride)
                stride *= n
            env[var] = w.value(linear, env, ranges)
        for s in w.sregs:
            self.declare(f"llvm.nvvm.read.ptx.sreg.{s}",
                         f"declare i32 @llvm.nvvm.read.ptx.sreg.{s}()")
        out += w.flush()
        fparam = {(mi, j): p for p in params for mi, j in p.uses}
        n = len(members)
        if spec.arrangement == "vertical":
            out.append("  br label %m0")
            for pm in members:
                nxt = f"m{pm.index + 1}" if pm.index + 1 < n else "exit"
                out.append(f"m{pm.index}:")
                if pm.member.barrier_before and pm.index > 0:
                    self.declare(_SYNC, f"declare void @{_SYNC}(i32)")
                    out.append(f"  call void @{_SYNC}(i32 0){w.loc}")
                out += self.member_code(spec, pm, w, env, fparam, nxt)
        else:
            out += dispatch(members, env["block"], prod(grid))
            for pm in members:
                out.append(f"m{pm.index}:")
                w.scope()
                menv = dict(env)
                menv["block"] = w.emit(f"sub i32 {env['block']}, {pm.first_block}", "rel")
                if pm.member.repeat > 1:  # which repetition, and the block within it
                    nb = prod(pm.member.grid)
                    menv[_REP] = w.emit(f"udiv i32 {menv['block']}, {nb}", "rep")
                    menv["block"] = w.emit(f"urem i32 {menv['block']}, {nb}", "rel")
                out += w.flush()
                out += self.member_code(spec, pm, w, menv, fparam, "exit")
        out += ["exit:", "  ret void", "}"]
        self.appended.append("\n".join(out))

    def member_code(self, spec: FusedKernelSpec, pm: _Member, w: Writer, env: dict[str, str],
                    fparam: dict[tuple[int, int], FusedParam], nxt: str) -> list[str]:
        """The member's call(s), guarded; a multi-instance member calls its fragment once per
        instance, in order, each under its own guard (blocks m<i>, m<i>.i<k>)."""
        insts = ((pm.ids, pm.guard),) + pm.more
        out: list[str] = []
        for k, (ids, g) in enumerate(insts):
            last = k + 1 == len(insts)
            here = f"m{pm.index}" if k == 0 else f"m{pm.index}.i{k}"
            if k:
                out.append(f"{here}:")
            out += self.instance_code(spec, pm, w, env, fparam, nxt if last else
                                      f"m{pm.index}.i{k + 1}", ids, g, here)
        return out

    def instance_code(self, spec: FusedKernelSpec, pm: _Member, w: Writer, env: dict[str, str],
                      fparam: dict[tuple[int, int], FusedParam], nxt: str,
                      id_exprs: tuple[Expr, ...], g: Guard, here: str) -> list[str]:
        m = pm.member
        ids = [w.value(e, env, pm.ranges) for e in id_exprs]
        conds = []
        for c in g.block_checks + g.thread_checks:
            v = w.value(c.expr, env, pm.ranges)
            if c.lower and c.upper:
                conds.append(w.emit(f"icmp ult i32 {v}, {c.bound}", "ok"))
            elif c.upper:
                conds.append(w.emit(f"icmp slt i32 {v}, {c.bound}", "ok"))
            else:
                conds.append(w.emit(f"icmp sge i32 {v}, 0", "ok"))
        cond = conds[0] if conds else None
        for c in conds[1:]:
            cond = w.emit(f"and i1 {cond}, {c}", "ok")
        out = w.flush()
        args = []
        for j in range(len(self.view.functions[m.kernel].args)):
            p = fparam[(pm.index, j)]
            value = f"%{irtext.local_ref(p.name)}"
            if m.repeat > 1 and m.strides[j]:
                value = self.repeated(spec, pm, w, env[_REP], p.type, value, m.strides[j])
                out += w.flush()
            # a device loop's iteration k: the argument plus each level's iteration times
            # its stride (one loop: k itself)
            for div, trips, step in (spec.device_loop.steps(pm.index, j)
                                     if spec.device_loop else ()):
                k = env[IT_ENV]
                if div > 1:
                    k = w.emit(f"udiv i32 {k}, {div}", "lvl")
                if trips * div < spec.device_loop.trips:
                    k = w.emit(f"urem i32 {k}, {trips}", "lvl")
                value = self.repeated(spec, pm, w, k, p.type, value, step)
                out += w.flush()
            args.append(f"{p.type} {value}")
        dims = list(m.block) + list(m.grid)
        args += [f"i32 {v}" for v in ids[3:] + ids[:3]] + [f"i32 {d}" for d in dims]
        call = f"  call void {irtext.global_ref(pm.fragment)}({', '.join(args)}){w.loc}"
        if cond is None:
            return out + [call, f"  br label %{nxt}"]
        return out + [f"  br i1 {cond}, label %{here}.run, label %{nxt}",
                      f"{here}.run:", call, f"  br label %{nxt}"]

    def repeated(self, spec: FusedKernelSpec, pm: _Member, w: Writer, rep: str, ty: str,
                 value: str, stride: int) -> str:
        """A repeated member's argument in repetition `rep`: `value + rep * stride` (bytes
        past a pointer, or added to an integer)."""
        base = ty.split()[0] if ty.startswith("ptr") else ty
        if ty.startswith("ptr"):
            wide = w.emit(f"zext i32 {rep} to i64", "rep")
            off = w.emit(f"mul i64 {wide}, {stride}", "off")
            space = re.match(r"ptr( addrspace\(\d+\))?", ty).group(0)
            return w.emit(f"getelementptr i8, {space} {value}, i64 {off}", "arg")
        if re.fullmatch(r"i(\d+)", base):
            bits = int(base[1:])
            r = rep if bits == 32 else w.emit(
                f"{'zext' if bits > 32 else 'trunc'} i32 {rep} to {base}", "rep")
            off = w.emit(f"mul {base} {r}, {stride}", "off")
            return w.emit(f"add {base} {value}, {off}", "arg")
        raise self.fail(spec, f"repeats with a stride on a {ty} parameter; only pointers and "
                        "integers step", pm.index)

    def member_param(self, spec: FusedKernelSpec, mi: int, j: int) -> str:
        h = irtext.parse_header(self.view.functions[spec.members[mi].kernel].text
                                .split("\n", 1)[0])
        return h.params[j]

    def subprogram(self, spec: FusedKernelSpec, members: list[_Member],
                   name: str | None = None) -> tuple[str, str]:
        """(` !dbg !N` for the kernel's (or function `name`'s) header, `, !dbg !L` for its
        calls), or empty strings when no member has debug info."""
        name = name or spec.name
        for pm in members:
            h = irtext.parse_header(self.view.functions[pm.fragment].text.split("\n", 1)[0])
            sp = h.subprogram
            if sp is None or sp not in self.md:
                continue
            node = self.md[sp]
            file, unit = irtext.field(node, "file"), irtext.field(node, "unit")
            line = irtext.field(node, "line") or "0"
            if file is None or unit is None:
                continue
            empty = self.md_node("!{null}")
            ty = self.md_node(f"!DISubroutineType(types: !{empty})")
            fsp = self.md_node(
                f'distinct !DISubprogram(name: "{name}", linkageName: "{name}", '
                f"scope: {file}, file: {file}, line: {line}, type: !{ty}, scopeLine: {line}, "
                "flags: DIFlagArtificial | DIFlagPrototyped, "
                f"spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: {unit})")
            loc = self.md_node(f"!DILocation(line: {line}, column: 1, scope: !{fsp})")
            return f" !dbg !{fsp}", f", !dbg !{loc}"
        return "", ""


_SYNC = irtext.SYNC
_REP = "#rep"  # a repeated member's repetition index in its env
_BARRIER_DECLS = {"sync": "declare void @{}(i32, i32)", "popc": "declare i32 @{}(i32, i32, i1)",
                  "and": "declare i1 @{}(i32, i32, i1)", "or": "declare i1 @{}(i32, i32, i1)"}


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def _default_block(spec: FusedKernelSpec) -> Dim3:
    """The block of a kernel whose spec names none: the members' own block where a horizontal
    kernel's members all have the same one (each member then reads its thread ids as it did,
    where a linear block would make it divide them out of the linear id: 2 instructions a
    thread for a 2-D block), else (the largest member's threads, 1, 1)."""
    blocks = {m.block for m in spec.members}
    if spec.arrangement == "horizontal" and len(blocks) == 1 \
            and all(m.mapping.kind == "block" for m in spec.members):
        return next(iter(blocks))
    return (max(m.threads for m in spec.members), 1, 1)
