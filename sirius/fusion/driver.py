"""The fusion stages of the pipeline (sirius/pipeline.py runs them; docs/fusion.md):

kernel summaries -> UAR -> false-dependence splitting (storage.py) -> wavefronts
of host loop nests (wavefront.py) -> planner (local + level fusion, planner.py) -> code
generation with undo (rounds.py: vertical clusters first, then horizontal kernels whose members
may be those clusters) -> PTX and ptxas resources for the target (sirius.backend); a fused kernel
that cannot be generated, spills, or exceeds a limit is undone (its launches run unfused) and
the module is built again. The result (result.py) carries everything `sirius fuse` writes and
`sirius verify` runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sirius.analysis.host.model import HostProgram
from sirius.analysis.irview import build_view
from sirius.analysis.kernel.access import KernelAnalyzer
from sirius.analysis.uar.build import UAR, build_uar
from sirius.fusion.plan.planner import Options, Planner, Region
from sirius.fusion.result import (  # noqa: F401 (FusedLaunchRecord: re-exported)
    FusedLaunchRecord,
    FuseResult,
    Original,
)
from sirius.fusion.rounds import Progress, generate_with_undo
from sirius.postopt import DEFAULT_PASSES, ModulePass


def _noop(_: str) -> None:
    pass


@dataclass(frozen=True)
class Analysed:
    """A program up to its UAR: what the fusion planner starts from."""

    original: Original
    view: object  # ModuleView of the device module
    analyzer: KernelAnalyzer  # kernel summaries, computed once per launch configuration
    uar: UAR
    seconds: float = 0.0  # the analysis's time (frontend included where pipeline.analyse ran)


def kernel_summaries_and_uar(original: Original) -> Analysed:
    """Kernel summaries (isl access relations) and the UAR over every launch, copy and sync."""
    view = build_view(original.program.device_module)
    analyzer = KernelAnalyzer(view, list(original.kernels))
    uar = build_uar(view, list(original.kernels), original.host, analyzer)
    return Analysed(original, view, analyzer, uar)


@dataclass(frozen=True)
class Plan:
    """The fusion plan: the host program after storage splitting and wavefront rewriting, its
    UAR, and the regions with their clusters and groups."""

    analysed: Analysed
    options: Options
    host: HostProgram
    uar: UAR
    regions: list[Region]
    storage: object | None
    wavefront: object | None
    seconds: dict[str, float]
    syncs: object | None = None  # plan.syncs.SyncCrossing
    pruned: object | None = None  # plan.prune.PruneResult
    prepare: object | None = None  # plan.prepare.PrepareResult (when parameters were given)


def plan_fusion(a: Analysed, options: Options, progress: Progress = _noop) -> Plan:
    """Storage splitting, wavefronts of host loop nests, then local and level fusion."""
    kernels = list(a.original.kernels)
    host, uar = a.original.host, a.uar
    secs: dict[str, float] = {}
    storage = wave = syncs = pruned = prepare = None
    if options.params:
        from sirius.fusion.plan.prepare import find_prepare

        t = time.perf_counter()
        prepare = find_prepare(host, uar, kernels, options.params, options.params_source)
        if prepare.host is not host:
            progress(f"prepare part: {len(prepare.launches)} launch(es) compute only from "
                     "the parameters")
            host = prepare.host
            uar = build_uar(a.view, kernels, host, a.analyzer)
        secs["prepare"] = time.perf_counter() - t
    if options.prune:
        from sirius.fusion.plan.prune import prune_launches

        t = time.perf_counter()
        pruned = prune_launches(host, uar, kernels)
        if pruned.host is not host:
            progress(f"launches: {len(pruned.pruned)} dead or repeated launch(es) removed")
            host = pruned.host
            uar = build_uar(a.view, kernels, host, a.analyzer)
        secs["prune"] = time.perf_counter() - t
    if options.cross_syncs:
        from sirius.fusion.plan.syncs import cross_idle_syncs

        syncs = cross_idle_syncs(host)
        if syncs.host is not host:
            progress(f"host syncs: {len(syncs.crossed)} idle sync(s) crossed")
            host = syncs.host
            uar = build_uar(a.view, kernels, host, a.analyzer)
    if options.split_storage:
        from sirius.fusion.plan.storage import split_storage

        t = time.perf_counter()
        storage = split_storage(host, uar)
        if storage.host is not host:
            progress(f"storage: {len(storage.splits)} buffer(s) split, "
                     f"+{storage.extra_bytes} B")
            host = storage.host
            uar = build_uar(a.view, kernels, host, a.analyzer)
        secs["storage"] = time.perf_counter() - t
    if options.wavefront or options.unroll:
        from sirius.fusion.plan.wavefront import wavefront_rewrite

        t = time.perf_counter()
        wave = wavefront_rewrite(host, uar, nests=options.wavefront, unroll=options.unroll,
                                 sequential=options.megakernel is not None)
        if wave.host is not host:
            progress(f"host loops: {len(wave.rewritten)} nest(s) skewed, "
                     f"{sum(u.rewritten for u in wave.unrolled)} loop(s) unrolled")
            host = wave.host
            uar = build_uar(a.view, kernels, host, a.analyzer)
        secs["wavefront"] = time.perf_counter() - t
    t = time.perf_counter()
    progress(f"planning ({options.arrangement} arrangement)")
    regions = Planner(host, uar, kernels, options).plan()
    secs["planning"] = time.perf_counter() - t
    return Plan(a, options, host, uar, regions, storage, wave, secs, syncs, pruned, prepare)


def generate(plan: Plan, paths: Sequence[Path], progress: Progress = _noop,
             passes: Sequence[ModulePass] | None = None,
             on_device_ir: Callable[[str, HostProgram], None] | None = None) -> FuseResult:
    """Fused kernels on LLVM IR, post-fusion passes (`passes`, default DEFAULT_PASSES; `()`:
    none), PTX and ptxas; a fused kernel that cannot be generated or breaks a resource limit is
    undone and the module built again. `on_device_ir` as for `generate_with_undo`."""
    original = plan.analysed.original
    result = FuseResult(tuple(paths), plan.options, original, plan.host, plan.uar, plan.host,
                        original.program.device_ir, plan.regions, [], [], plan.storage,
                        plan.wavefront, seconds=dict(plan.seconds), syncs=plan.syncs,
                        pruned=plan.pruned, prepare=plan.prepare,
                        passes=DEFAULT_PASSES if passes is None else tuple(passes))
    generate_with_undo(result, original.kernels, progress, on_device_ir)
    return result
