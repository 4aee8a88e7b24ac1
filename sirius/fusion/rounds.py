"""Code generation with undo (driver.generate runs it; docs/fusion.md): each round builds the
vertical clusters of the plan, with the horizontal kernels whose members are all original
launches (one module build), then the horizontal kernels with vertical members, then
(`--megakernel grid|counters`) one cooperative kernel per region; the post-fusion passes run
on the whole module, then PTX and ptxas for the target. A fused kernel that cannot be
generated, spills, or exceeds a limit is undone (its launches run unfused) and the module is
built again."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sirius.analysis.host.model import HostProgram, Launch, Loop
from sirius.analysis.kernel.facts import KernelInfo
from sirius.backend import compile_ir, violations
from sirius.backend.limits import coresident_blocks, coresident_grid
from sirius.fusion.codegen.emit import build, keep_launched
from sirius.fusion.fused_host import rewrite_host
from sirius.fusion.megakernel import (
    device_loop,
    loop_bodies,
    megakernel_chunks,
    megakernel_reasons,
    megakernel_spec,
    most_blocks,
)
from sirius.fusion.members import overlay_shared, param_maps, repeat_runs
from sirius.fusion.plan.planner import Region
from sirius.fusion.result import FusedLaunchRecord, FuseResult
from sirius.fusion.spec import (
    CodegenError,
    FusedKernel,
    FusedKernelSpec,
    FusedModule,
    Member,
)
from sirius.fusion.waits import WaitsNotProven
from sirius.postopt import PassContext, PassError, PassStep, run_pipeline
from sirius.postopt.host_constants import CLONE

Progress = Callable[[str], None]

# Clusters and groups are named by their position in the plan: (region, group, cluster) and
# (region, group). The planner's objects are not used as keys.
ClusterKey = tuple[int, int, int]
GroupKey = tuple[int, int]


@dataclass
class _State:
    disabled_clusters: set[ClusterKey] = field(default_factory=set)
    disabled_groups: set[GroupKey] = field(default_factory=set)
    disabled_megakernels: set[int] = field(default_factory=set)  # region indices
    # the grid a region's megakernels may have (region index -> blocks): the co-resident
    # blocks ptxas's registers and shared memory allow (one per SM until measured); a region
    # in mk_grid_fixed is sized for good (its grown kernel no longer fitted)
    mk_grid: dict[int, int] = field(default_factory=dict)
    mk_grid_fixed: set[int] = field(default_factory=set)
    # a horizontal kernel's launch per member (its first, for a repeated member), by name
    member_launches: dict[str, list[Launch]] = field(default_factory=dict)


def generate_with_undo(res: FuseResult, kernels: Sequence[KernelInfo], progress: Progress,
                       on_device_ir: Callable[[str, HostProgram], None] | None = None) -> None:
    """Generate the fused kernels of `res.regions` until ptxas accepts them all, undoing
    each that breaks a limit; fills in `res` (device IR, PTX, resources, records, host).
    `on_device_ir(text, host)` is called with each round's device IR and host program once
    the post-fusion passes are done, before PTX (the last call has the result's)."""
    names(res.regions)
    state = _State()
    infos = {k.mangled: k for k in kernels}
    t = time.perf_counter()
    for attempt in range(6):
        progress(f"generating fused kernels (round {attempt + 1})")
        built = _build_all(res, state, infos)
        res.megakernels = built.megakernels
        host = rewrite_host(res.analysed, res.regions, built.group_launches,
                            built.device_looped)
        text = res.original.program.device_ir
        steps: tuple[PassStep, ...] = ()
        if built.module_text is not None:
            # what the fused host program does not launch goes before the passes and PTX
            launched = {op.mangled for op in host.launches()}
            text, host, steps = _postopt(res, keep_launched(built.module_text, launched), host,
                                         progress)
        if on_device_ir is not None:
            on_device_ir(text, host)
        progress(f"PTX and ptxas for {res.options.arch}")
        ptx, report = compile_ir(text, res.options.arch)
        bad = []
        for rec in built.records + built.megakernels:
            r = report.kernels.get(rec.name)
            if r is None:
                continue
            rec.resources[res.options.arch] = r
            clones = [c for n, c in report.kernels.items() if n.startswith(rec.name + CLONE)]
            v = [x for c in (r, *clones)  # host-constants' clones share the kernel's limits
                 for x in violations(c, res.options.arch, block_threads=_threads(rec.kernel))]
            if v:
                bad.append((rec, "; ".join(dict.fromkeys(v))))
        if not bad:
            # grown in the early rounds only; shrunk whenever a grown kernel no longer fits
            # (one more round then; the for-else below refuses rather than keep a grid
            # that is not co-resident)
            if _size_megakernel_grids(res, state, built.megakernels, report,
                                      grow=attempt < 3):
                progress("megakernel grids sized to the co-resident blocks ptxas allows")
                continue
            break
        for name, why in dict((rec.name, why) for rec, why in bad).items():
            users = [n.label() for rec in built.records + built.megakernels if rec.name == name
                     for n in rec.nodes]
            res.undone.append(f"{name} ({', '.join(users)}): {why}")
            _disable_named(res, name, state)
    else:  # pragma: no cover - each round undoes at least one kernel or sizes a grid
        raise CodegenError("fused kernels kept breaking resource limits, or a megakernel's "
                           "grid kept changing its registers")
    res.device_ir = text
    res.ptx = ptx.text
    res.resources = dict(report.kernels)
    res.fused = built.records
    res.host = host
    res.postopt = steps
    res.seconds["codegen"] = time.perf_counter() - t


def _size_megakernel_grids(res: FuseResult, state: _State, megakernels, report,
                           grow: bool = True) -> bool:
    """Grow (`grow`) each megakernel's grid from one block per SM to the blocks ptxas's
    registers and shared memory let every SM hold (`limits.coresident_grid`), where a member
    needs more blocks than it has; shrink one whose regenerated code no longer fits. True when a
    region's grid changed (the kernels are generated again: the block-stride loops and the
    counters' waits depend on the grid)."""
    arch = res.options.arch
    sms = coresident_blocks(arch)
    caps: dict[int, int] = {}
    for rec in megakernels:
        k, ri = rec.kernel, rec.region
        r = report.kernels.get(rec.name)
        if k is None or r is None or ri in state.mk_grid_fixed:
            continue
        clones = [c for n, c in report.kernels.items() if n.startswith(rec.name + CLONE)]
        _, cap = min(coresident_grid(c, _threads(k), arch, k.smem) for c in (r, *clones))
        cap = max(cap, sms)  # not even one block per SM: `violations` undoes that kernel
        need = most_blocks(k)
        if k.grid[0] > cap:  # grown, and the new code holds fewer blocks per SM
            state.mk_grid_fixed.add(ri)
        elif not grow or ri in state.mk_grid or need <= k.grid[0] or cap <= k.grid[0]:
            continue
        caps[ri] = min(caps.get(ri, cap), cap)
    changed = False
    for ri, cap in caps.items():
        if state.mk_grid.get(ri) != cap:
            state.mk_grid[ri] = cap
            changed = True
    return changed


def _postopt(res: FuseResult, text: str, host: HostProgram, progress: Progress
             ) -> tuple[str, HostProgram, tuple[PassStep, ...]]:
    """The post-fusion passes on the whole fused module, with the fused host program and the
    UAR as their context; a pass may rewrite the host program too (kernel clones)."""
    if res.passes:
        progress("post-fusion passes: " + ",".join(p.name for p in res.passes))
    ctx = PassContext(arch=res.options.arch, host_program=host, uar=res.uar,
                      source="<fused module>")
    try:
        r = run_pipeline(text, res.passes, ctx)
    except PassError as e:
        raise CodegenError(f"fused module: {e.message}") from e
    return r.text, r.host_program or host, r.steps


def _threads(k: FusedKernel | None) -> int | None:
    if k is None:
        return None
    return k.block[0] * k.block[1] * k.block[2]


def _disable_named(res: FuseResult, name: str, state: _State) -> None:
    """Undo every cluster, group and megakernel that uses fused kernel `name`."""
    if name.startswith("sirius_g"):  # a megakernel: its region's launches stay as they are
        state.disabled_megakernels.update(
            rec.region for rec in res.megakernels if rec.name == name)
        return
    for ri, gi, g in _groups(res.regions):
        if g.name == name:
            state.disabled_groups.add((ri, gi))
        for ci, c in enumerate(g.clusters):
            if c.name == name:
                state.disabled_clusters.add((ri, gi, ci))


def _groups(regions: list[Region]):
    """(region index, group index, group) for every group of the plan, in order."""
    for ri, r in enumerate(regions):
        for gi, g in enumerate(r.groups):
            yield ri, gi, g


def _dedup(spec: FusedKernelSpec, seen: dict[str, str], specs: list[FusedKernelSpec]) -> str:
    """The name of the kernel that implements `spec`: an identical spec built before (the
    layers of a model fuse alike) or `spec` itself, appended to `specs`."""
    key = json.dumps({**spec.to_json(), "name": ""}, sort_keys=True)
    if key not in seen:
        seen[key] = spec.name
        specs.append(spec)
    return seen[key]


def names(regions: list[Region]) -> None:
    v = h = 0
    for r in regions:
        for g in r.groups:
            for c in g.clusters:
                if len(c.nodes) > 1:
                    c.name = f"sirius_v{v}"
                    v += 1
            if len(g.clusters) > 1:
                g.name = f"sirius_h{h}"
                h += 1


def _types(launch: Launch, infos: dict[str, KernelInfo], fused: dict[str, FusedKernel]
           ) -> list[str]:
    if launch.mangled in fused:
        return [p.type for p in fused[launch.mangled].params]
    return [p.ir_type for p in infos[launch.mangled].params]


def _build_specs(specs: list[FusedKernelSpec], ir: str
                 ) -> tuple[FusedModule | None, list[tuple[FusedKernelSpec, str]]]:
    """Build every spec; a spec the generator refuses is dropped (with its reason)."""
    if not specs:
        return None, []
    specs, named_bad = list(specs), []
    while specs:
        try:  # the post-fusion passes run once, on the whole module (_postopt)
            return build(ir, specs, passes=()), named_bad
        except CodegenError as e:
            # a message that names one spec is that spec's refusal: the others are tried
            # without it (one build instead of one per spec); otherwise each alone, below
            named = [s for s in specs if re.search(rf"(?<![\w$.]){re.escape(s.name)}(?![\w$.])",
                                                   str(e))]
            if len(named) != 1:
                break
            named_bad.append((named[0], str(e)))
            specs.remove(named[0])
    if not specs:
        return None, named_bad
    good, bad = [], named_bad
    for s in specs:
        try:
            build(ir, [s], opt_level=0)
            good.append(s)
        except CodegenError as e:
            bad.append((s, str(e)))
    return (build(ir, good, passes=()) if good else None), bad


@dataclass
class _Built:
    """One round of code generation: the fused module, the launches that replace each group
    (by its position), and a record per fused launch."""

    module_text: str | None
    group_launches: dict[GroupKey, list[Launch]]
    records: list[FusedLaunchRecord]
    megakernels: list[FusedLaunchRecord] = field(default_factory=list)
    # the launches of megakernels whose host loop runs inside them: each replaces its loop
    device_looped: frozenset[int] = frozenset()  # id() of the host loops run on the device


def _build_all(res: FuseResult, state: _State, infos: dict[str, KernelInfo]) -> _Built:
    """Round 1: vertical clusters, and the horizontal kernels whose members are all launches
    of the original program (they need no vertical kernel: one module build less); round 2:
    the other horizontal kernels, over clusters."""
    seen: dict[str, str] = {}  # spec without its name -> the kernel built for it
    early: list[FusedKernelSpec] = []
    for ri, gi, g in _groups(res.regions):
        if len(g.clusters) >= 2 and (ri, gi) not in state.disabled_groups and \
                all(len(c.nodes) == 1 for c in g.clusters):
            spec, _ = _horizontal_spec(g, range(len(g.clusters)),
                                       [[c.nodes[0].launch] for c in g.clusters], infos, {})
            g.name = _dedup(spec, seen, early)
    fm1, cluster_launches, fused1, records = _vertical_round(res, state, infos, seen, early)
    ir1 = fm1.text if fm1 is not None else res.original.program.device_ir
    fm2, group_launches, records2, parts = _horizontal_round(res, state, infos, seen, ir1,
                                                             cluster_launches, fused1, fm1)
    text = (fm2 or fm1).text if (fm2 or fm1) else None
    if res.options.megakernel not in ("grid", "counters"):
        return _Built(text, group_launches, records + records2)
    fused = {k.name: k for fm in (fm1, fm2) if fm is not None for k in fm.kernels}
    fm3, group_launches, mks, looped = _megakernel_round(res, state, infos, text or ir1, parts,
                                                         fused)
    return _Built(fm3.text if fm3 is not None else text, group_launches, records + records2,
                  mks, looped)


def _vertical_round(res: FuseResult, state: _State, infos: dict[str, KernelInfo],
                    seen: dict[str, str], extra: Sequence[FusedKernelSpec] = ()):
    """Generate every vertical cluster of more than one launch, and the specs `extra` in the
    same module; returns the module, the launches each cluster becomes, the vertical kernels
    by name, and their records."""
    specs: list[FusedKernelSpec] = []
    for ri, gi, g in _groups(res.regions):
        for ci, c in enumerate(g.clusters):
            if len(c.nodes) > 1 and (ri, gi, ci) not in state.disabled_clusters:
                ms = param_maps([(m, n.launch, _types(n.launch, infos, {}))
                                 for m, n in zip(c.members, c.nodes, strict=True)])
                share = None
                if res.options.smem == "overlay":
                    ms, share = overlay_shared(ms, c.nodes)
                spec = FusedKernelSpec(c.name, "vertical", tuple(ms), block=c.block,
                                       share_smem=share)
                c.name = _dedup(spec, seen, specs)
    fm, bad = _build_specs([*specs, *extra], res.original.program.device_ir)
    for s, why in bad:
        _disable_named(res, s.name, state)
        res.undone.append(f"{s.name}: {why}")
    launches: dict[ClusterKey, list[Launch]] = {}
    fused: dict[str, FusedKernel] = {}
    records: list[FusedLaunchRecord] = []
    for ri, gi, g in _groups(res.regions):
        for ci, c in enumerate(g.clusters):
            key = (ri, gi, ci)
            if fm is not None and len(c.nodes) > 1 and key not in state.disabled_clusters:
                k = fm.kernel(c.name)
                fused[c.name] = k
                launches[key] = [k.launch([n.launch for n in c.nodes])]
                rec = FusedLaunchRecord(c.name, "vertical", g.level, ri, list(c.nodes),
                                        list(c.reasons), k)
                rec.owner = c
                records.append(rec)
            else:
                launches[key] = [n.launch for n in c.nodes]
    return fm, launches, fused, records


def _horizontal_spec(g, cis: Sequence[int], cluster_launches: Sequence[list[Launch]],
                     infos: dict[str, KernelInfo], fused1: dict[str, FusedKernel]
                     ) -> tuple[FusedKernelSpec, list[Launch]]:
    """The horizontal kernel of group `g`'s clusters `cis` (each one launch:
    `cluster_launches[ci]`), and each member's (first) launch."""
    ms = []
    for ci in cis:
        launch = cluster_launches[ci][0]
        if launch.mangled in fused1:
            k = fused1[launch.mangled]
            m = Member(k.name, k.grid, k.block, k.smem)
        else:
            m = g.clusters[ci].members[0]
        ms.append((m, launch, _types(launch, infos, fused1)))
    ms = repeat_runs(ms)
    return (FusedKernelSpec(g.name, "horizontal", tuple(param_maps(ms))),
            [launch for _, launch, _ in ms])


def _horizontal_round(res: FuseResult, state: _State, infos: dict[str, KernelInfo],
                      seen: dict[str, str], ir: str,
                      cluster_launches: dict[ClusterKey, list[Launch]],
                      fused1: dict[str, FusedKernel], fm1: FusedModule | None):
    """Generate a horizontal kernel for every group of two or more clusters that are one launch
    each (those round 1 built, in `fm1`, are not built again); returns the module, the
    launches each group becomes, and the records."""
    specs: list[FusedKernelSpec] = []
    members: dict[GroupKey, list[int]] = {}  # group -> the cluster indices it fuses
    firsts: dict[GroupKey, list[Launch]] = {}  # group -> each member's (first) launch
    for ri, gi, g in _groups(res.regions):
        if len(g.clusters) < 2 or (ri, gi) in state.disabled_groups:
            continue
        cis = [ci for ci in range(len(g.clusters)) if len(cluster_launches[(ri, gi, ci)]) == 1]
        if len(cis) < 2:
            continue
        spec, firsts[(ri, gi)] = _horizontal_spec(
            g, cis, [cluster_launches[(ri, gi, ci)] for ci in range(len(g.clusters))], infos,
            fused1)
        g.name = _dedup(spec, seen, specs)
        members[(ri, gi)] = cis
    fm, bad = _build_specs(specs, ir)
    for s, why in bad:
        _disable_named(res, s.name, state)
        res.undone.append(f"{s.name}: {why}")
    built = {k.name: k for m in (fm1, fm) if m is not None for k in m.kernels}
    launches: dict[GroupKey, list[Launch]] = {}
    records: list[FusedLaunchRecord] = []
    # each group's launches by the part of it they run: a cluster (its index) or the
    # horizontal kernel ("h"); the parts of a group are independent of each other
    parts: dict[GroupKey, list[tuple[int | str, Launch]]] = {}
    for ri, gi, g in _groups(res.regions):
        per_cluster = [cluster_launches[(ri, gi, ci)] for ci in range(len(g.clusters))]
        cis = members.get((ri, gi))
        if cis is None or (ri, gi) in state.disabled_groups or g.name not in built:
            parts[(ri, gi)] = [(ci, x) for ci, seq in enumerate(per_cluster) for x in seq]
            launches[(ri, gi)] = [x for _, x in parts[(ri, gi)]]
            continue
        k = built[g.name]
        state.member_launches[k.name] = firsts[(ri, gi)]
        parts[(ri, gi)] = [(ci, x) for ci, seq in enumerate(per_cluster) if ci not in cis
                           for x in seq] + [("h", k.launch(firsts[(ri, gi)]))]
        launches[(ri, gi)] = [x for _, x in parts[(ri, gi)]]
        cs = [g.clusters[ci] for ci in cis]
        reasons = [f"{c.name or c.nodes[0].label()}: independent of the others in "
                   f"level {g.level}" for c in cs]
        arrangement = "mixed" if any(len(c.nodes) > 1 for c in cs) else "horizontal"
        rec = FusedLaunchRecord(g.name, arrangement, g.level, ri,
                                [n for c in cs for n in c.nodes], reasons, k)
        rec.owner = g
        records.append(rec)
    return fm, launches, records, parts


def _megakernel_round(res: FuseResult, state: _State, infos: dict[str, KernelInfo], ir: str,
                      parts: dict[GroupKey, list[tuple[int | str, Launch]]],
                      fused: dict[str, FusedKernel]):
    """`--megakernel grid`: every region of two or more launches (after rounds 1 and 2)
    becomes one cooperative kernel. Its segments hold independent launches (parts of one
    group); a grid-wide barrier separates the segments, so every dependence between two of
    its launches, GLOBAL ones included, is ordered as the kernel boundary ordered it."""
    specs: list[FusedKernelSpec] = []
    chosen: dict[int, tuple[list[Launch], str]] = {}
    across: dict[str, Callable] = {}  # counters: the waits across a device loop's iterations
    by_launch = {id(n.launch): n for r in res.regions for n in r.nodes}
    sms = coresident_blocks(res.options.arch)
    loops = loop_bodies(res.analysed.ops, res.regions)

    def shapeless(x: Launch) -> bool:
        """A launch whose grid, block or shared memory the host computes (it changes with an
        enclosing loop): no member, a megakernel's members have fixed shapes."""
        return x.mangled not in fused and by_launch[id(x)].smem < 0

    for ri, region in enumerate(res.regions):
        seq = [(gi, tag, launch) for gi in range(len(region.groups))
               for tag, launch in parts[(ri, gi)]]
        # one launch is a megakernel only to take its host loop inside (else it is undone
        # below): the whole body of a host loop
        solo = len(seq) == 1 and ri in loops
        if (len(seq) < 2 and not solo) or ri in state.disabled_megakernels:
            continue
        chunks = []
        for x in (x for _, _, x in seq if shapeless(x)):
            note = (f"{by_launch[id(x)].sid} {x.kernel}: not a megakernel member: its grid, "
                    "block or shared memory is computed by the host (it changes with a host "
                    "loop), and a megakernel's members have fixed shapes")
            if note not in region.notes:
                region.notes.append(note)
        for chunk in megakernel_chunks(region, seq, fused, shapeless):
            if len(chunk) < 2 and not (solo and not shapeless(chunk[0][2])):
                chunks.append(([x for _, _, x in chunk], None))
                continue
            name = f"sirius_g{len(specs)}"
            try:
                spec, members, across[name] = megakernel_spec(
                    name, region, chunk, fused, by_launch, state.member_launches,
                    state.mk_grid.get(ri, sms), res.options.megakernel, res.uar,
                    lambda x: _types(x, infos, fused))
            except WaitsNotProven as e:  # never emitted: its launches stay as they were
                res.undone.append(f"{name}: not built: {e}")
                chunks.append(([x for _, _, x in chunk], None))
                continue
            specs.append(spec)
            chunks.append((members, spec.name))
        chosen[ri] = chunks
    fm, bad = _build_specs(specs, ir)
    for s, why in bad:
        res.undone.append(f"{s.name}: {why}")
        state.disabled_megakernels.update(ri for ri, cs in chosen.items()
                                          if any(n == s.name for _, n in cs))
    launches = {key: [x for _, x in ps] for key, ps in parts.items()}
    records: list[FusedLaunchRecord] = []
    if fm is None:
        return None, launches, records, frozenset()
    fm, looped, loop_notes = _device_loops(res, state, chosen, specs, fm, bad, ir, across,
                                           loops)
    built = set() if fm is None else {k.name for k in fm.kernels}
    for ri, chunks in chosen.items():  # why a lone launch's loop stayed on the host
        for phase_launches, name in chunks:
            for note in loop_notes.get(name, []) if name not in built else ():
                line = f"{phase_launches[0].kernel}: {note}"
                if line not in res.regions[ri].notes:
                    res.regions[ri].notes.append(line)
    if fm is None:
        return None, launches, records, frozenset()
    for ri, chunks in chosen.items():
        if ri in state.disabled_megakernels:
            continue
        region = res.regions[ri]
        for gi in range(len(region.groups)):
            launches[(ri, gi)] = []
        for phase_launches, name in chunks:
            if name is None or name not in built:  # (a lone launch left as it was)
                launches[(ri, 0)] += phase_launches
                continue
            k = fm.kernel(name)
            launches[(ri, 0)].append(looped[name][0] if name in looped
                                     else k.launch(phase_launches))
            records.append(_megakernel_record(res, ri, k, phase_launches, sms, len(chunks)))
            records[-1].reasons += loop_notes.get(name, [])
    return fm, launches, records, frozenset(id(lp) for _, lp in looped.values())


def _device_loops(res: FuseResult, state: _State, chosen: dict, specs: list[FusedKernelSpec],
                  fm: FusedModule, bad: list, ir: str, across: dict[str, Callable],
                  loops: dict[int, tuple[Loop, ...]]
                  ) -> tuple[FusedModule, dict[str, tuple[Launch, Loop]], dict[str, list[str]]]:
    """Megakernels that are the whole body of a host loop (nest) (`loops`, `loop_bodies`)
    take the loop inside (fusion/megakernel.py, `device_loop`): the module rebuilt with those
    specs, each such megakernel's one launch and the host loop it replaces, by name, and
    report lines by name."""
    got: dict[str, tuple] = {}
    notes: dict[str, list[str]] = {}
    # a megakernel of one launch that did not take its loop inside is dropped: the launch
    # stays as it was
    solo = {s.name for s in specs if len(s.members) == 1}
    for ri, chunks in chosen.items():
        if ri in state.disabled_megakernels or ri not in loops:
            continue
        nest = loops[ri]
        if len(chunks) != 1 or chunks[0][1] is None:
            notes.update({n: [f"its host loop ({_at(nest[-1])}) stays on the host: the loop "
                              "body is cut into parts"] for _, n in chunks if n is not None})
            continue
        launches, name = chunks[0]
        notes[name] = []
        for start in range(len(nest)):  # the whole nest, else fewer of its outer loops
            sub = nest[start:]
            dl = device_loop(sub, fm.kernel(name), launches)
            if isinstance(dl, str):
                notes[name].append(f"its host loop ({_at(sub[0])}) stays on the host: {dl}")
                continue
            try:
                lagged = across[name](tuple(x.var for x in sub))
            except WaitsNotProven as e:
                notes[name].append(f"its host loop ({_at(sub[0])}) stays on the host: {e}")
                continue
            got[name] = (*dl, lagged, sub[0])
            how = "a grid barrier between two" if res.options.megakernel == "grid" else \
                (f"{len(lagged)} wait(s) on the iteration before in place of a grid barrier "
                 "between two")
            what = f"its host loop ({_at(sub[0])})" if len(sub) == 1 else \
                f"its host loop nest ({', '.join(_at(x) for x in sub)})"
            notes[name].append(f"{what} runs inside it: {dl[0].trips} iterations, {how}, one "
                               "launch in place of the loop")
            break
    drop = solo - got.keys()
    if not got and not drop:
        return fm, {}, notes
    fm2, bad2 = _build_specs([replace(s, device_loop=got[s.name][0],
                                      waits=None if s.waits is None else
                                      s.waits + got[s.name][2])
                              if s.name in got else s for s in specs if s.name not in drop],
                             ir)
    if fm2 is None or {s.name for s, _ in bad2} != {s.name for s, _ in bad} - drop:
        why = "; ".join(w for s, w in bad2 if s.name in got) or "it did not build"
        for name in got:
            notes[name] = [f"its host loop stays on the host: the device loop failed ({why})"]
        if not drop:
            return fm, {}, notes
        fm2, _ = _build_specs([s for s in specs if s.name not in solo], ir)
        return fm2, {}, notes
    return fm2, {name: (launch, lp) for name, (_, launch, _, lp) in got.items()}, notes


def _at(loop: Loop) -> str:
    return f"`{loop.var}` at {loop.loc or '?'}"


def _megakernel_record(res: FuseResult, ri: int, k: FusedKernel, phase_launches: list,
                       sms: int, chunks: int) -> FusedLaunchRecord:
    """The record of megakernel `k`, one of `chunks` of region `ri`."""
    rec = FusedLaunchRecord(k.name, "grid", 0, ri, list(res.regions[ri].nodes),
                            megakernel_reasons(k, phase_launches, res.options.arch, sms,
                                               chunks), k)
    rec.owner = ri
    return rec
