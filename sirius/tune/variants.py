"""The variants `sirius tune` builds and how it explores them.

A variant is a whole fused program. It is described by a `Request`: storage splitting on or
off, and one *choice* per planner region (a region is a maximal run of consecutive launches in
one host body, sirius/fusion/plan/planner.py): `vertical`, `horizontal` or `auto` (the
planner's arrangements, planned for that region) or `unfused` (every launch of the region
stays its own kernel).

The space is explored per region, never as a cross product over the program:

1. *Whole-program variants*: for each storage setting (both only when splitting changes the
   program), every region gets the same choice: 4 variants per setting. Each is built (code
   generation, post-fusion passes, ptxas) and run on the CPU executor for exact counts.
2. *Per-region choice*: the cost model is a sum over launches, and a fused launch belongs to
   exactly one region, so each region's time under each choice is read off the four runs above
   (the estimated time of the launches the region became). Each region independently takes its
   fastest choice: regions x 4 estimates, not 4^regions builds.
3. *The mixed variant*: the per-region choices are built as one program (one more build per
   storage setting, only when the choices differ between regions), so what the combination
   really becomes (kernels shared between regions, fused kernels undone for breaking a ptxas
   limit) is built, counted and estimated like every other variant.

So a program with R regions costs 4 or 5 builds per storage setting, whatever R is. The
arrangements of one region are the planner's (the mixed vertical-in-horizontal arrangement is
what `auto` plans). The two megakernel variants (`--megakernel grid` and `counters`, over the `auto`
plan) are two more whole-program variants, estimated per segment (model.py); they are not
mixed per region. Built over the tuner's shared plan, they do not unroll host loops into the
megakernel as `sirius fuse --megakernel` does (each loop body is one megakernel).

Two more axes give whole-program variants over the default plan, built with the mixed
variants, not mixed per region:

4. *Post-fusion passes on/off*: every trade-off pass (TRADE_OFF_PASSES: passes that can raise
   register pressure, or shared memory per block: `contract-shared`) that changed the default
   variant's module gives the default plan built
   without it (a pass that changed nothing gives none). The passes run once over the whole
   fused module.
5. *Shared memory overlaid*: where the plan of `auto` or `vertical` has a vertical kernel of
   two or more launches that use shared memory, that variant with their shared memory laid
   over each other
   (`Options.smem = "overlay"`: a block barrier between them, less shared memory per block).

`build_variant(request)` is what runs in a worker (a local process, a Ray task, or this
process): it compiles and analyses the program once per process (cached), plans, builds and
measures, and returns a picklable `VariantResult`.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from sirius.diagnostics import SiriusError
from sirius.tune.model import LaunchCounts

CHOICES = ("auto", "vertical", "horizontal", "unfused")  # ties go to the first
MEGAKERNELS = ("grid", "counters")
# post-fusion passes that trade registers for work (BENCHMARKS.md, "Post-fusion: the whole
# corpus": host-constants and alias-facts let LLVM keep more values live, loop-fuse keeps the
# merged loops' values live together, licm keeps hoisted values live across its loops): each is
# an on/off axis where it changed the program
TRADE_OFF_PASSES = ("host-constants", "alias-facts", "loop-fuse", "contract-shared", "licm")


@dataclass(frozen=True)
class Source:
    """The program and how to compile it (picklable: a worker rebuilds everything from it)."""

    files: tuple[str, ...]
    arch: str
    entry: str = "main"
    flags: tuple[str, ...] = ()
    use_cache: bool = True
    seed: int = 7
    argv: tuple[str, ...] | None = None  # the program's arguments (--args)
    params: tuple[str, ...] | None = None  # --params (None: the import-tvm sidecar's)


@dataclass(frozen=True)
class Request:
    """One variant: `choices` has one entry per region, or is one of CHOICES for every region;
    `original` is the unplanned program (the baseline)."""

    source: Source
    label: str
    split_storage: bool = True
    choices: tuple[str, ...] | str = "auto"
    original: bool = False
    megakernel: str | None = None  # grid | counters: a whole-program megakernel variant
    without: tuple[str, ...] = ()  # post-fusion passes left out of the default list
    smem: str = "concat"  # vertical kernels' shared memory: concat | overlay (Options.smem)

    def choice(self, region: int) -> str:
        return self.choices if isinstance(self.choices, str) else self.choices[region]


@dataclass(frozen=True)
class VariantResult:
    label: str
    split_storage: bool
    choices: tuple[str, ...] | str
    original: bool
    counts: tuple[LaunchCounts, ...] = ()
    regions: int = 0
    region_nodes: tuple[tuple[str, ...], ...] = ()  # statement ids per region (a consistency key)
    launches_before: int = 0
    launches_after: int = 0
    fused: tuple[dict, ...] = ()                    # name, arrangement, members
    undone: tuple[str, ...] = ()
    ir_sha: str = ""
    seconds: float = 0.0
    error: str = ""
    megakernel: str | None = None  # grid | counters: a megakernel variant
    without: tuple[str, ...] = ()  # post-fusion passes left out (Request.without)
    changed_passes: tuple[str, ...] = ()  # the trade-off passes that changed its module
    smem: str = "concat"  # Request.smem

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def plain(self) -> bool:
        """A variant of the per-region axes only (arrangement, storage): no megakernel, the
        default passes and shared-memory layout. Only plain variants are mixed per region."""
        return self.megakernel is None and not self.without and self.smem == "concat"

    def choices_list(self) -> list[str]:
        if isinstance(self.choices, str):
            return [self.choices] * self.regions
        return list(self.choices)


# one analysis per process -------------------------------------------------------------------------
@dataclass
class _Session:
    original: object                  # fusion.driver.Original
    analysed: object                  # fusion.driver.Analysed
    dtypes: dict
    plans: dict = field(default_factory=dict)   # (split, arrangement) -> Plan


_SESSIONS: dict[Source, _Session] = {}


def session(src: Source) -> _Session:
    """Compile, extract and analyse `src` once per process."""
    s = _SESSIONS.get(src)
    if s is None:
        from sirius.analysis.program import analyse
        from sirius.fusion.driver import Original, kernel_summaries_and_uar
        from sirius.tune.counts import input_dtypes

        program, kernels, host = analyse([Path(f) for f in src.files], src.entry, src.arch,
                                         list(src.flags), src.use_cache, src.argv)
        original = Original(program, tuple(kernels), host)
        s = _Session(original, kernel_summaries_and_uar(original), input_dtypes(original))
        _SESSIONS[src] = s
    return s


def plan_for(src: Source, split: bool, arrangement: str):
    """The fusion plan of one storage setting and arrangement. Every arrangement of a setting
    plans the same host program (storage splitting and wavefronts done once), so the regions
    of different arrangements line up and can be mixed."""
    from sirius.fusion.driver import Plan, plan_fusion
    from sirius.fusion.plan.planner import Options, Planner

    s = session(src)
    key = (split, arrangement)
    if key not in s.plans:
        base_key = (split, "auto")
        if base_key not in s.plans:
            from sirius.fusion.plan.prepare import params_for

            params, source = params_for(src.files, src.params)
            s.plans[base_key] = plan_fusion(s.analysed, Options(
                src.arch, "auto", split, params=params, params_source=source))
        base = s.plans[base_key]
        if arrangement != "auto":
            opts = Options(src.arch, arrangement, split)
            regions = Planner(base.host, base.uar, list(s.original.kernels), opts).plan()
            s.plans[key] = Plan(base.analysed, opts, base.host, base.uar, regions, base.storage,
                                base.wavefront, dict(base.seconds), base.syncs, base.pruned,
                                base.prepare)
    return s.plans[key]


def storage_changes(src: Source) -> bool:
    """Whether false-dependence storage splitting changes the program at all."""
    p = plan_for(src, True, "auto")
    return p.storage is not None and p.host is not session(src).original.host


def _fresh(region, unfused: bool = False):
    """A copy of a planned region whose mutable parts code generation may rename; `unfused`
    puts every cluster in a group of its own (with the horizontal plan's single-launch
    clusters: every launch its own kernel)."""
    from sirius.fusion.plan.planner import Cluster, Group, Region

    def cl(c) -> Cluster:
        return Cluster(list(c.nodes), list(c.members), c.block, list(c.reasons), "")

    if unfused:
        groups = [Group([cl(c)], g.level) for g in region.groups for c in g.clusters]
    else:
        groups = [Group([cl(c) for c in g.clusters], g.level) for g in region.groups]
    return Region(region.body_key, list(region.nodes), groups, list(region.notes))


def mixed_plan(req: Request):
    """The plan of `req`: region r planned with its choice."""
    from sirius.fusion.driver import Plan
    from sirius.fusion.plan.planner import Options

    base = plan_for(req.source, req.split_storage, "auto")
    regions = []
    for r in range(len(base.regions)):
        c = req.choice(r)
        if c not in CHOICES:
            raise SiriusError(f"unknown variant choice {c!r} (known: {', '.join(CHOICES)})")
        arr = "horizontal" if c == "unfused" else c
        regions.append(_fresh(plan_for(req.source, req.split_storage, arr).regions[r],
                              unfused=c == "unfused"))
    label = req.choices if isinstance(req.choices, str) else "per-region"
    opts = Options(req.source.arch, label, req.split_storage, megakernel=req.megakernel,
                   smem=req.smem)
    return Plan(base.analysed, opts, base.host, base.uar, regions, base.storage,
                base.wavefront, dict(base.seconds), base.syncs, base.pruned, base.prepare)


def build(req: Request, measure: bool = True):
    """Build `req` in this process: (VariantResult, FuseResult or None for the original);
    `measure=False` skips the executor runs (the result then has no counts)."""
    from sirius.fusion.driver import generate
    from sirius.fusion.result import original_resources
    from sirius.tune import counts as C

    t0 = time.perf_counter()
    src = req.source
    s = session(src)
    o = s.original
    if req.original:
        # the original as written, its prepare launches marked (the same launches in the same
        # order: the interpreter runs it as the original); no planning needed for that
        from sirius.fusion.plan.prepare import find_prepare, params_for

        params, source = params_for(src.files, src.params)
        host = find_prepare(o.host, s.analysed.uar, o.kernels, params, source).host \
            if params else o.host
        counts = C.measure(host, o.program.device_ir, src.files, o.kernels,
                           original_resources(o.program.device_ir, src.arch),
                           seed=src.seed, dtypes=s.dtypes, regions=False)
        from sirius.analysis.host.model import launch_count

        n = launch_count(o.host.ops)
        return VariantResult(req.label, False, "original", True, tuple(counts),
                             launches_before=n, launches_after=n,
                             ir_sha=_sha(o.program.device_ir),
                             seconds=time.perf_counter() - t0), None
    plan = mixed_plan(req)
    res = generate(plan, [Path(f) for f in src.files], passes=passes_without(req.without))
    counts = C.measure(res.host, res.device_ir, src.files, o.kernels, res.resources,
                       seed=src.seed, dtypes=s.dtypes,
                       segment_work=C.megakernel_segment_work(res.megakernels),
                       iterations=C.megakernel_iterations(res.megakernels)
                       ) if measure else []
    fused = tuple({"name": r.name, "arrangement": r.arrangement, "region": r.region,
                   "members": [f"{n.sid} {n.launch.kernel}" for n in r.nodes]}
                  for r in res.fused)
    choices = req.choices if isinstance(req.choices, str) else tuple(req.choices)
    fused += tuple({"name": r.name, "arrangement": f"megakernel {req.megakernel}",
                    "region": r.region, "members": [f"{n.sid} {n.launch.kernel}"
                                                    for n in r.nodes]}
                   for r in res.megakernels)
    vr = VariantResult(req.label, req.split_storage, choices, False, tuple(counts),
                       len(plan.regions),
                       tuple(tuple(n.sid for n in r.nodes) for r in plan.regions),
                       res.launches_before, res.launches_after, fused, tuple(res.undone),
                       _sha(res.device_ir), time.perf_counter() - t0, megakernel=req.megakernel,
                       without=req.without, changed_passes=changed_trade_offs(res.postopt),
                       smem=req.smem)
    return vr, res


def passes_without(names: tuple[str, ...]):
    """The default post-fusion list less the passes `names` (None: the default list)."""
    from sirius.postopt import DEFAULT_PASSES

    if not names:
        return None
    return tuple(p for p in DEFAULT_PASSES if p.name not in names)


def changed_trade_offs(steps) -> tuple[str, ...]:
    """The trade-off passes (TRADE_OFF_PASSES) that changed the module, in pipeline order."""
    out: list[str] = []
    for st in steps:
        name = st.pass_text.split("{", 1)[0]
        if st.changed and name in TRADE_OFF_PASSES and name not in out:
            out.append(name)
    return tuple(out)


def overlays_shared(plan) -> bool:
    """Whether `--smem overlay` changes `plan`: a vertical cluster with two or more launches
    that use shared memory (members.overlay_shared)."""
    return any(len(c.nodes) > 1 and sum(bool(n.smem or n.static_smem) for n in c.nodes) > 1
               for r in plan.regions for g in r.groups for c in g.clusters)


def pass_requests(default: Request, changed: tuple[str, ...]) -> list[Request]:
    """One more whole-program variant per trade-off pass that changed the default variant's
    module: the default plan without that pass (a pass that changed nothing is not a choice)."""
    return [replace(default, label=f"{default.label} without {name}", without=(name,))
            for name in changed]


def build_variant(req: Request) -> VariantResult:
    """Worker entry point: build and measure one variant; an error becomes `.error`."""
    try:
        return build(req)[0]
    except SiriusError as e:
        msg = e.message
    except Exception as e:  # noqa: BLE001 - a bug must not take the other variants down
        msg = f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
    choices = req.choices if isinstance(req.choices, str) else tuple(req.choices)
    return VariantResult(req.label, req.split_storage, choices, req.original, error=msg,
                         megakernel=req.megakernel, without=req.without, smem=req.smem)


def whole_program_requests(src: Source, splits: list[bool],
                           megakernels: bool = True) -> list[Request]:
    out = [Request(src, "original", False, "original", original=True)]
    for split in splits:
        tag = "" if split else " (no storage split)"
        out += [Request(src, f"{c}{tag}", split, c) for c in CHOICES]
    # the megakernels, over the default plan (they are whole-program variants: a region's
    # megakernel time is not mixed with other regions' choices)
    if megakernels:
        out += [Request(src, f"megakernel {m}", True, "auto", megakernel=m)
                for m in MEGAKERNELS]
    return out


def program_launches(src: Source) -> int:
    """The launches the original program runs (host loops counted by their trip counts)."""
    from sirius.analysis.host.model import launch_count

    return launch_count(session(src).original.host.ops)


def with_choices(req: Request, choices: list[str], label: str) -> Request:
    return replace(req, label=label, choices=tuple(choices), original=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
