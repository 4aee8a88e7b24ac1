"""What `sirius fuse` writes: plan.json (the fused host program in the `inspect --json` schema,
plus every fused kernel with the original statement instances it covers) and report.md."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sirius._version import __version__
from sirius.analysis.host.model import Copy, Launch, Loop
from sirius.analysis.uar.build import UAR
from sirius.analysis.uar.widths import Width
from sirius.fusion.driver import FusedLaunchRecord, FuseResult
from sirius.fusion.plan.planner import describe, same_iteration

# plan.json --------------------------------------------------------------------------------------
# plan.json's schema, versioned: docs/fusion.md#planjson describes version 1. A change that
# removes or renames a key, or changes a value's meaning, bumps the number.
PLAN_SCHEMA = "sirius-plan/1"


# What plan.json and report.md say when no check ran (the Python API's `write`).
NOT_VERIFIED = {"ran": False, "reason": "not verified: written without a check (run "
                "`sirius verify` on the program)"}


def plan_json(res: FuseResult, verification: dict | None = None) -> dict:
    """The plan document; `verification` says which check ran and what it found
    (`VerifyReport.brief()`) or why none ran (`{"ran": False, "reason": ...}`)."""
    from sirius.analysis.kernel.facts import kernel_to_json

    return {
        "schema": PLAN_SCHEMA,
        "sirius": __version__,
        "files": [str(p) for p in res.files],
        "arch": res.options.arch,
        "arrangement": res.options.arrangement,
        "kernels": [kernel_to_json(k) for k in res.original.kernels],
        "host": res.host.to_json(),
        "launches": {"before": res.launches_before, "after": res.launches_after},
        "argv": list(res.original.host.argv) if res.original.host.argv is not None else None,
        "fused_kernels": [_fused_json(res, rec) for rec in res.fused],
        "megakernel": res.options.megakernel,
        "megakernels": [_megakernel_json(res, rec) for rec in res.megakernels],
        "storage": _storage_json(res),
        "wavefront": _wave_json(res),
        "unrolled": [u.to_json() for u in res.wavefront.unrolled] if res.wavefront else [],
        "pruned": [p.to_json() for p in res.pruned.pruned] if res.pruned else [],
        "prepare": res.prepare.to_json() if res.prepare is not None else None,
        "syncs": res.syncs.to_json() if res.syncs is not None else None,
        "not_fused": not_fused(res),
        "undone": list(res.undone),
        "postopt": {"pipeline": ",".join(str(p) for p in res.passes),
                    "passes": [st.to_json() for st in res.postopt]},
        "verification": verification or NOT_VERIFIED,
    }


def _covers(res: FuseResult, node) -> dict:
    st = res.uar.statement(node.sid)
    out = {"statement": node.sid, "kernel": node.launch.kernel,
           "instances": str(st.domain), "loc": str(st.loc) if st.loc else None}
    prov = _provenance(res, node.launch)
    if prov:
        out["original"] = prov
    return out


def _provenance(res: FuseResult, launch: Launch) -> str | None:
    """For a launch made by the wavefront rewrite: the original instances it stands for."""
    return None if res.wavefront is None else res.wavefront.provenance(launch)


def _fused_json(res: FuseResult, rec: FusedLaunchRecord) -> dict:
    k = rec.kernel
    d = k.to_json() if k is not None else {"name": rec.name}
    d["arrangement"] = rec.arrangement
    d["level"] = rec.level
    d["covers"] = [_covers(res, n) for n in rec.nodes]
    d["reasons"] = list(rec.reasons)
    d["ptxas"] = {a: r.to_json() for a, r in rec.resources.items()}
    return d


def _megakernel_json(res: FuseResult, rec: FusedLaunchRecord) -> dict:
    d = _fused_json(res, rec)
    k = rec.kernel
    d["cooperative"] = True
    d["segments"] = [[k.spec.members[i].kernel for i in seg] for seg in k.spec.segments()] \
        if k is not None else []
    waits = k.spec.waits if k is not None else None
    d["grid_barriers"] = max(0, len(d["segments"]) - 1) if waits is None else 0
    if waits is not None:  # counters: which blocks of a segment wait for which earlier ones
        d["waits"] = [w.to_json() for w in waits]
    return d


def megakernels_md(res: FuseResult) -> list[str]:
    if not res.options.megakernel:
        return []
    lines = [f"## Megakernels ({res.options.megakernel})", ""]
    if not res.megakernels:
        return lines + ["None: no run of two or more launches (or every one was undone).", ""]
    for rec in res.megakernels:
        k = rec.kernel
        lines += [f"### {rec.name} (cooperative launch, grid {k.grid}, block {k.block})", "",
                  f"- replaces {len(rec.nodes)} launches of the original program: "
                  + ", ".join(n.label() for n in rec.nodes)]
        lines += [f"- {why}" for why in rec.reasons]
        waits = k.spec.waits or ()
        for w in waits[:20]:
            lines.append(f"- segment {w.segment}, blocks {w.blocks[0]}..{w.blocks[1]}: wait for "
                         f"blocks {w.producers[0]}..{w.producers[1]} of segment {w.after}")
        if len(waits) > 20:
            lines.append(f"- ... and {len(waits) - 20} more waits (plan.json lists them all)")
        for arch, r in rec.resources.items():
            lines.append(f"- ptxas {arch}: {r.registers} registers, {r.smem} B shared, "
                         f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads")
        lines.append("")
    return lines


def _storage_json(res: FuseResult) -> dict | None:
    s = res.storage
    if s is None:
        return None
    return {"extra_bytes": s.extra_bytes, "notes": list(s.notes)}


def _wave_json(res: FuseResult) -> list:
    w = res.wavefront
    if w is None:
        return []
    return [n.to_json() for n in w.nests]


# why launches stayed apart ----------------------------------------------------------------------
def prepare_md(res: FuseResult) -> list[str]:
    """The "Prepare part" section: the parameters, the launches that run once, and the notes."""
    p = res.prepare
    if p is None or not (p.params or p.notes):
        return []
    lines = ["## Prepare part (one-time) and per-inference part", "",
             f"Parameters ({p.source}): {', '.join(p.params) or 'none'}.", ""]
    if p.launches:
        n = sum(1 for op in res.host.launches() if op.prepare)
        lines += [f"{len(p.launches)} launch(es) compute only from the parameters and run "
                  f"once, before any inference ({n} launch(es) of the fused program); "
                  "everything else runs per inference:", ""]
        lines += [f"- {x.statement} {x.kernel}{f' ({x.loc})' if x.loc else ''}: {x.reason()}"
                  for x in p.launches]
    else:
        lines.append("No launch computes only from the parameters: every launch runs per "
                     "inference.")
    lines += [f"- note: {n}" for n in p.notes] + [""]
    return lines


def not_fused(res: FuseResult) -> list[str]:
    """Region notes (a launch not merged into a predecessor's cluster, and why) and host loops
    whose iterations stay separate launches, with the GLOBAL dependences that order them."""
    out = []
    for r in res.regions:
        out += r.notes
    if res.syncs is not None:
        out += [f"launches on either side of the {k}" for k in res.syncs.kept]
    prep = res.prepare.launches if res.prepare is not None else ()
    out += [f"{p.statement} {p.kernel}: in the one-time prepare part (it computes only from "
            "the parameters); prepare launches are not fused with per-inference ones"
            for p in prep]
    out += loop_notes(res.uar)
    return out + alone_notes(res, out)


def alone_notes(res: FuseResult, notes: list[str]) -> list[str]:
    """A reason for every launch that stays a kernel of its own and that no note names (by
    statement, or by a host loop around it): the program's only launch, or the GLOBAL
    dependences that tie it to the launches next to it (a wavefront's first and last stages)."""
    uar = res.uar
    inside = {n.sid for rec in res.fused for n in rec.nodes}
    text = " ".join(notes)
    launches = [st for st in uar.statements if st.kind == "launch"]
    out = []
    for st in launches:
        if st.id in inside or re.search(rf"(?<!\w){re.escape(str(st.id))}(?!\w)", text) \
                or any(f"loop {lp.var} " in text for lp in st.loops):
            continue
        name = f"{st.id} {st.label}"
        if len(launches) == 1:
            loops = ", ".join(f"{lp.var}" for lp in st.loops)
            why = _unroll_reason(res, st.loops[-1]) if st.loops else None
            out.append(f"{name}: the program's only launch" + (
                f" (in host loop {loops}: launches of different iterations are not fused "
                f"with each other{f'; the loop was not unrolled: {why}' if why else ''})"
                if loops else ""))
            continue
        ties = sorted({describe(d) for d in uar.dependences
                       if d.width == Width.GLOBAL and d.kind != "CTRL" and st.id in (d.src, d.dst)
                       and d.src != d.dst
                       and uar.statement(d.dst if d.src == st.id else d.src).kind == "launch"})
        around = _host_ops_around(uar, st)
        out.append(f"{name}: " + (
            f"GLOBAL dependences with the launches it could join: {'; '.join(ties)}" if ties
            else f"fusion merges only launches with no host operation between them, and the "
                 f"{' and the '.join(around)} next to it "
                 f"{'keeps its place' if len(around) == 1 else 'keep their places'}"
            if around else
            "no fused kernel took it, and no dependence forbids one (the planner kept it "
            "apart; please report the program)"))
    return out


def _unroll_reason(res: FuseResult, lp) -> str | None:
    """Why the host loop `lp` was not unrolled (wavefront.py), if it was considered."""
    for u in res.wavefront.unrolled if res.wavefront is not None else ():
        if u.var == lp.var and u.loc == lp.loc and u.reason:
            return u.reason
    return None


def _host_ops_around(uar: UAR, st) -> list[str]:
    """The host operations (copies, memsets, allocations, frees, syncs) right before and after
    a launch in its host body, as `copy H2D at prog.cu:26`."""
    body = st.loops[-1].body if st.loops else uar.program.ops
    i = st.position[-1]
    out = []
    for j in (i - 1, i + 1):
        op = body[j] if 0 <= j < len(body) else None
        if op is None or isinstance(op, Launch | Loop):
            continue
        what = f"copy {op.kind}" if isinstance(op, Copy) else type(op).__name__.lower()
        at = f" at {Path(op.loc.file).name}:{op.loc.line}" if op.loc else ""
        out.append(what + at)
    return out


def loop_notes(uar: UAR) -> list[str]:
    out = []
    loops = {id(lp): lp for st in uar.statements if st.kind == "launch" for lp in st.loops}
    for lp in loops.values():
        sids = [st.id for st in uar.statements if st.kind == "launch"
                and any(x is lp for x in st.loops)]
        carried = []
        inside = set(sids)
        for dep in uar.dependences:
            if dep.src in inside and dep.dst in inside and dep.kind != "CTRL":
                a, b = uar.statement(dep.src), uar.statement(dep.dst)
                crosses = same_iteration(dep, uar) is None or a.position >= b.position
                if dep.src == dep.dst or crosses:
                    carried.append(dep)
        if not carried:
            continue
        where = f" ({lp.loc})" if lp.loc else ""
        deps = "; ".join(sorted({describe(d) for d in carried if d.width == Width.GLOBAL})
                         or sorted({describe(d) for d in carried}))
        out.append(f"loop {lp.var}{where}: the launches of one iteration and those of later "
                   f"iterations stay separate kernels; dependences across iterations: {deps}")
    return out


# report.md --------------------------------------------------------------------------------------
def report_md(res: FuseResult, verification: dict | None = None) -> str:
    names = ", ".join(str(p) for p in res.files)
    lines = [f"# sirius fuse: {names}", "",
             f"- target: {res.options.arch}; arrangement: {res.options.arrangement}",
             f"- launches: {res.launches_before} before, {res.launches_after} after "
             "(dynamic count; constant host loops unrolled in the count)",
             f"- fused kernels: {len(res.fused)}"
             + (f"; megakernels ({res.options.megakernel}): {len(res.megakernels)}"
                if res.options.megakernel else ""),
             *argv_lines(res),
             f"- post-fusion passes: {postopt_line(res)}",
             *(f"  - {st.pass_text.split('{')[0]}: {n}" for st in res.postopt
               for n in st.notes),
             f"- verification: {verification_line(verification or NOT_VERIFIED)}", ""]
    plain = {k.mangled: k.name for k in res.original.kernels}
    lines += counters_md((verification or NOT_VERIFIED).get("counters"))
    lines += _before_after(res, plain)
    lines += ["## Fused kernels", ""]
    if not res.fused:
        lines += ["None.", ""]
    by_name: dict[str, list] = {}
    for rec in res.fused:  # identical specs share one kernel (model layers): one section each
        by_name.setdefault(rec.name, []).append(rec)
    for name, recs in by_name.items():
        rec, k = recs[0], recs[0].kernel
        uses = f"; used by {len(recs)} launches" if len(recs) > 1 else ""
        lines.append(f"### {name} ({rec.arrangement}, level {rec.level}{uses})")
        lines.append("")
        if k is not None:
            lines.append(f"grid {k.grid}, block {k.block}, dynamic smem {k.smem} B, "
                         f"static smem {k.static_smem} B")
        lines.append("")
        lines.append("| member | kernel | launch | instances |")
        lines.append("|---|---|---|---|")
        for r in recs:
            for n in r.nodes:
                c = _covers(res, n)
                inst = c["instances"] + (f" = {c['original']}" if "original" in c else "")
                lines.append(f"| {n.sid} | {n.launch.kernel} | {c['loc']} | `{inst}` |")
        lines.append("")
        for why in rec.reasons:
            lines.append(f"- {why}")
        for arch, r in rec.resources.items():
            lines.append(f"- ptxas {arch}: {r.registers} registers, {r.smem} B shared, "
                         f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads")
        lines.append("")
    lines += megakernels_md(res)
    s = _storage_json(res)
    lines += ["## Storage split (false dependences)", ""]
    if s and s["notes"]:
        lines += [f"- {n}" for n in s["notes"]] + [f"- extra device memory: {s['extra_bytes']} B"]
    else:
        lines.append("Nothing split.")
    lines.append("")
    lines += ["## Host loops (wavefronts, unrolling)", ""]
    w = res.wavefront
    loops = (*w.nests, *w.unrolled) if w is not None else ()
    lines += [f"- {n}" for n in loops] if loops else ["No host loop considered."]
    lines.append("")
    lines += syncs_md(res)
    pruned = res.pruned.pruned if res.pruned is not None else ()
    if pruned:
        lines += ["## Launches removed (dead or repeated)", ""] + [f"- {p}" for p in pruned]
        lines.append("")
    lines += prepare_md(res)
    lines += ["## Not fused, and why", ""]
    nf = not_fused(res)
    lines += [f"- {x}" for x in nf] if nf else ["Every region is one kernel."]
    lines.append("")
    if res.undone:
        lines += ["## Fused kernels undone", ""] + [f"- {x}" for x in res.undone] + [""]
    lines += ["## ptxas resources of every kernel", "",
              f"| kernel | registers | shared B | spills B ({res.options.arch}) |",
              "|---|---|---|---|"]
    used = {op.mangled for op in res.host.launches()}
    for name, r in sorted(res.resources.items()):
        if name in used:
            lines.append(f"| {plain.get(name, name)} | {r.registers} | {r.smem} | "
                         f"{r.spill_stores + r.spill_loads} |")
    lines.append("")
    return "\n".join(lines)


def argv_lines(res: FuseResult) -> list[str]:
    argv = res.original.host.argv
    if argv is None:
        return []
    return [f"- program arguments (--args): {shlex.join(argv)!r}; argc = {len(argv) + 1}, "
            "and the program is specialised to them (sizes and branches that depend on them "
            "are constants here)"]


def syncs_md(res: FuseResult) -> list[str]:
    lines = ["## Host synchronisations", ""]
    s = res.syncs
    if s is None:
        return lines + ["Not crossed (--keep-syncs): every sync between launches ends a run.", ""]
    if not s.crossed and not s.kept:
        return lines + ["No sync between launches.", ""]
    lines += [f"- {c}" for c in s.crossed] + [f"- {k}" for k in s.kept]
    lines += ["- timers read between launches (clock(), gettimeofday, std::chrono, "
              "cudaEventElapsedTime) are not observations: they do not keep a sync", ""]
    return lines


def postopt_line(res: FuseResult) -> str:
    if not res.passes:
        return "none (--no-postopt)"
    if not res.postopt:
        return ",".join(str(p) for p in res.passes) + " (not run: nothing fused)"
    return ", ".join(f"{st.pass_text} ({st.seconds:.2f} s{'' if st.changed else ', no change'})"
                     for st in res.postopt)


def counters_md(c: dict | None) -> list[str]:
    """The executor's counts summed over the verification's runs (original: the reference
    run; fused: its first run), with fused / original."""
    out = ["## Executor counts (CPU executor, whole run)", ""]
    if not c or not c.get("original") or not c.get("fused"):
        return out + ["Not measured: no verification ran (or every fused run faulted).", ""]
    out += ["| counter | original | fused | fused / original |", "|---|---|---|---|"]
    for k, o in c["original"].items():
        r = (c.get("ratio") or {}).get(k)
        out.append(f"| {k} | {o} | {c['fused'][k]} | {'-' if r is None else f'{r:.3f}'} |")
    return out + [""]


def _before_after(res: FuseResult, plain: dict[str, str]) -> list[str]:
    """Per fused kernel: the launches it replaces, and ptxas registers and shared memory of its
    members (the largest) against its own."""
    arch = res.options.arch
    out = ["## Before and after, per fused kernel", "",
           f"| fused kernel | replaces | launches | registers ({arch}) | shared B |",
           "|---|---|---|---|---|"]
    seen: set[str] = set()
    launched = {op.mangled for op in res.host.launches()}
    before = res.original_resources() if res.fused else {}
    for rec in res.fused:
        if rec.name in seen:
            continue
        seen.add(rec.name)
        uses = sum(len(r.nodes) for r in res.fused if r.name == rec.name)
        n_rec = sum(1 for r in res.fused if r.name == rec.name)
        members = [before.get(n.launch.mangled) for n in rec.nodes]
        mine = rec.resources.get(arch)
        regs = smem = "?"
        if mine is None and rec.name not in launched:
            regs = smem = "not launched: runs inside another fused kernel"
        elif mine is not None and all(members):
            regs = f"{max(m.registers for m in members)} -> {mine.registers}"
            smem = f"{max(m.smem for m in members)} -> {mine.smem}"
        kernels = ", ".join(dict.fromkeys(plain.get(n.launch.mangled, n.launch.kernel)
                                          for n in rec.nodes))
        out.append(f"| {rec.name} | {kernels} | {uses} -> {n_rec} | {regs} | {smem} |")
    if not seen:
        out.append("| (none) | | | | |")
    return out + [""]


def verification_line(v: dict) -> str:
    """One line for report.md: which check ran and its result, or why none ran."""
    if not v.get("ran"):
        return v.get("reason", "not verified")
    how = (f"CPU executor, seed {v['seed']}: original run in "
           f"{' and '.join(v['original_orders'])} order, fused in {', '.join(v['orders'])} "
           f"order with bounds {'checked' if v['check_bounds'] else 'not checked'}; "
           f"compared: {', '.join(v['compared'])}: ")
    if v["status"] == "ok":
        return how + "OK"
    if v["status"] == "original-order-dependent":
        return how + ("INCONCLUSIVE for " + ", ".join(v["order_dependent"]) + ": the original "
                      "program itself gives different results under different orders (a race "
                      "or colliding writes); every other compared buffer agrees")
    return how + "NOT OK: " + "; ".join(v["failed"] + v["faults"])


def write_outputs(res: FuseResult, out: Path, verification: dict | None = None) -> list[Path]:
    """Write fused.ll, fused.ptx, plan.json and report.md into `out` (created)."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    files = {"fused.ll": res.device_ir, "fused.ptx": res.ptx,
             "plan.json": json.dumps(plan_json(res, verification), indent=1) + "\n",
             "report.md": report_md(res, verification)}
    paths = []
    for name, text in files.items():
        p = out / name
        p.write_text(text)
        paths.append(p)
    return paths
