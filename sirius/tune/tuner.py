"""`tune()`: build the variants, estimate them, choose per region, verify, and report.

1. Whole-program variants (variants.py) and the original program (the baseline) are built and
   measured, fanned out (fanout.py: Ray tasks by default when Ray is installed, else a local
   process pool).
2. Every variant is estimated with the cost model on the chosen GPU (model.py, gpus.py).
3. Per storage setting, each region takes the choice whose launches are estimated fastest; if
   the choices differ between regions the mixed variant is built and estimated too.
4. With a GPU (`device`), every built variant is rebuilt in this process (verification reuses
   the rebuild) and timed on it with the original, in one bench (measure.py; on Ray, as a
   task asking for one GPU, else in this process); a measured time
   replaces the estimate as the order of the candidates. The estimates stay, labelled, next
   to the measurements.
5. Candidates (every variant but the original) are verified in order of measured time, else
   estimated time, on the CPU executor against the original (sirius.verify), each as a task
   of the same fan-out (verifying.py); the first that verifies is chosen. A variant that
   fails verification is never chosen; with `verify_all` every variant is checked (all at
   once).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sirius.diagnostics import SiriusError
from sirius.fusion.megakernel import MEGAKERNEL_LAUNCHES
from sirius.tune import fanout, variants
from sirius.tune.gpus import Gpu
from sirius.tune.measure import MeasureConfig, Measured, MeasureInfo
from sirius.tune.model import Assumptions, ProgramEstimate, estimate_program
from sirius.tune.variants import Request, Source, VariantResult
from sirius.tune.verifying import (
    Verdict,
    VerifyRequest,
    check,
    died_verify,
    fused_files,
    verdict_text,
    verify_variant,
)

Progress = Callable[[str], None]


@dataclass
class Variant:
    """A built variant with its estimate and verification verdict (None: not verified)."""

    result: VariantResult
    estimate: ProgramEstimate | None
    verified: bool | None = None
    verify_note: str = ""
    region_seconds: dict[int, float] = field(default_factory=dict)
    measured: Measured | None = None
    measure_note: str = ""

    @property
    def label(self) -> str:
        return self.result.label

    @property
    def seconds(self) -> float:
        """The estimated time (infinite when the variant was not built)."""
        return self.estimate.seconds if self.estimate is not None else math.inf

    @property
    def rank(self) -> tuple[int, float]:
        """The order candidates are verified in: measured ones by their median, then the
        others by their estimate."""
        if self.measured is not None:
            return (0, self.measured.median_s)
        return (1, self.seconds)


@dataclass
class TuneResult:
    source: Source
    gpu: Gpu
    assumptions: Assumptions
    baseline: Variant
    variants: list[Variant]
    chosen: Variant | None
    chosen_files: dict | None           # the chosen variant's fused.ll, fused.ptx, ...
    region_choices: dict[bool, list[str]]  # storage setting -> per-region choice
    notes: list[str]
    ran_on: str
    seconds: dict[str, float]
    uar: object | None = None  # the UAR the chosen variant was planned on (for the picture)
    measurement: MeasureInfo = field(default_factory=lambda: MeasureInfo(False, "not asked"))
    calibration: object | None = None  # calibrate.Calibration of --calibrate
    fanout: dict = field(default_factory=dict)  # Fanout.describe(): backend, why not Ray

    @property
    def chosen_by(self) -> str:
        """"measured time" or "estimate": what ordered the chosen variant first."""
        if self.chosen is not None and self.chosen.measured is not None:
            return "measured time"
        return "estimate"

    def default(self) -> Variant | None:
        """The variant `sirius fuse` builds with its defaults (auto, storage split)."""
        return next((v for v in self.variants if is_default(v.result)), None)


def is_default(r: VariantResult) -> bool:
    """The variant `sirius fuse` builds with its defaults: auto, storage split, default passes
    and shared-memory layout, no megakernel."""
    return r.choices == "auto" and r.split_storage and r.plain


def estimate_variant(r: VariantResult, gpu: Gpu, a: Assumptions) -> Variant:
    """A built variant with its estimate (none when the build failed) and per-region times."""
    if not r.ok:
        return Variant(r, None)
    est = estimate_program(list(r.counts), gpu, a)
    per_region: dict[int, float] = {}
    for c, e in zip(r.counts, est.launches, strict=True):
        per_region[c.region] = per_region.get(c.region, 0.0) + e.seconds
    return Variant(r, est, region_seconds=per_region)


def tune(src: Source, gpu: Gpu, *, assumptions: Assumptions | None = None,
         jobs: int | None = None, use_ray: bool | None = None, ray_address: str | None = None,
         verify_all: bool = False,
         progress: Progress = lambda _: None, device=None,
         measure_config: MeasureConfig | None = None, measure_why: str = "not asked",
         calibration=None, megakernel_launches: int | None = None) -> TuneResult:
    """Explore, estimate, measure (with a GPU `device`), verify and choose (module docstring);
    `measure_why` says why measurement is on or off, `calibration` is reported as given
    (`gpu` and `assumptions` already carry its constants); the megakernel variants are built
    only for programs of at most `megakernel_launches` launches (None: MEGAKERNEL_LAUNCHES, what
    one megakernel covers; 0: never). The work fans out on Ray with `use_ray` True; with
    None (not said) on Ray when it is installed and starts, unless `jobs` was given; else on a
    local pool of `jobs` workers (None: fanout.default_jobs(); 1: in this process)."""
    mode = fanout.ray_mode(use_ray, jobs)
    with fanout.Fanout(jobs or fanout.default_jobs(), mode, ray_address, progress) as fan:
        return _tune(src, gpu, fan, assumptions or Assumptions(), verify_all, progress,
                     device, measure_config, measure_why, calibration, megakernel_launches)


def _tune(src: Source, gpu: Gpu, fan: fanout.Fanout, assumptions: Assumptions,
          verify_all: bool, progress: Progress, device, measure_config, measure_why: str,
          calibration, megakernel_launches: int | None) -> TuneResult:
    secs: dict[str, float] = {}
    notes: list[str] = []
    t = time.perf_counter()
    progress(f"analysing {', '.join(src.files)} for {src.arch}")
    splits = [True, False] if variants.storage_changes(src) else [True]
    if len(splits) == 1:
        notes.append("storage splitting changes nothing in this program: one storage setting")
    n_regions = len(variants.plan_for(src, True, "auto").regions)
    secs["analysis"] = time.perf_counter() - t

    if megakernel_launches is None:
        megakernel_launches = MEGAKERNEL_LAUNCHES
    launches = variants.program_launches(src)
    with_mk = 0 < launches <= megakernel_launches
    if not with_mk:
        notes.append(
            f"megakernel variants not built: the program runs {launches} launches, more than "
            f"--megakernel-launches {megakernel_launches}" if megakernel_launches else
            "megakernel variants not built (--megakernel-launches 0)")
        if megakernel_launches:
            notes[-1] += (" (past it a megakernel is cut into parts anyway, and building them "
                          "cost paper lstm_large, 4090 launches, 16 of 29 minutes to end in the "
                          "executor's size limit: BENCHMARKS.md)")
    t = time.perf_counter()
    reqs = variants.whole_program_requests(src, splits, with_mk)
    progress(f"building {len(reqs)} variants ({n_regions} region(s); "
             f"{fan.start()})" + (f"; not on Ray: {fan.why}" if fan.why else ""))
    if fan.why:
        notes.append(f"not on Ray: {fan.why}; ran on a local {fan.backend}")
    results = fan.builds(reqs)
    built = [estimate_variant(r, gpu, assumptions) for r in results]
    baseline, whole = built[0], built[1:]
    if not baseline.result.ok:
        raise SiriusError(f"the original program could not be measured: "
                          f"{baseline.result.error}")

    # per-region choice, then the mixed variant
    choices: dict[bool, list[str]] = {}
    mixed: list[Request] = []
    for split in splits:
        opts = [v for v in whole if v.result.split_storage == split and v.estimate is not None
                and v.result.plain]
        if not opts:
            continue
        best = []
        for r in range(n_regions):
            cands = [(v.region_seconds.get(r, 0.0), variants.CHOICES.index(v.result.choices),
                      v.result.choices) for v in opts]
            best.append(min(cands)[2])
        choices[split] = best
        if len(set(best)) > 1:
            tag = "" if split else " (no storage split)"
            base = next(q for q in reqs if not q.original and q.split_storage == split)
            mixed.append(variants.with_choices(base, best, f"per-region{tag}"))
        else:
            notes.append(f"storage split {'on' if split else 'off'}: every region prefers "
                         f"'{best[0]}' (the per-region variant is that whole-program variant)")
    # the trade-off passes on/off: the default variant without each one that changed it
    default = next((v for v in whole if v.result.ok and is_default(v.result)), None)
    if default is not None:
        base = next(q for q in reqs if q.label == default.label)
        mixed += variants.pass_requests(base, default.result.changed_passes)
        off = [p for p in variants.TRADE_OFF_PASSES if p not in default.result.changed_passes]
        if off:
            notes.append(f"post-fusion passes that changed nothing in '{default.label}', so "
                         f"not explored off: {', '.join(off)}")
    # shared memory overlaid, for each arrangement whose plan has a vertical kernel of two
    # or more launches that use it
    for q in reqs:
        if not q.original and q.megakernel is None and q.split_storage \
                and q.choices in ("auto", "vertical") \
                and variants.overlays_shared(variants.plan_for(src, True, q.choices)):
            mixed.append(replace(q, label=f"{q.label}, shared memory overlaid", smem="overlay"))
    if mixed:
        more = fan.builds(mixed)
        whole += [estimate_variant(r, gpu, assumptions) for r in more]
    for v in whole:
        if not v.result.ok:
            notes.append(f"variant {v.label} could not be built: "
                         f"{v.result.error.splitlines()[0]}")
        elif v.result.region_nodes and v.result.regions != n_regions:
            raise SiriusError(f"variant {v.label} planned {v.result.regions} regions, "
                              f"expected {n_regions} (planner not deterministic?)")
    secs["variants"] = time.perf_counter() - t

    rebuilt: dict[str, tuple] = {}  # label -> (FuseResult, note) of the rebuild here
    info = MeasureInfo(False, measure_why)
    if device is not None:
        t = time.perf_counter()
        info = _measure(src, baseline, whole, device, measure_config or MeasureConfig(), gpu,
                        assumptions, rebuilt, notes, measure_why, progress, fan)
        secs["measure"] = time.perf_counter() - t

    # verify in order of measured, else estimated time; a candidate re-estimated on its
    # rebuild (below) may fall behind the next one, so go on while one could still be faster
    t = time.perf_counter()
    chosen = chosen_files = None
    cands = sorted((v for v in whole if v.estimate is not None), key=lambda v: v.rank)
    ahead: dict[str, Verdict] = {}  # --verify-all: every candidate verified at once
    if verify_all and cands:
        progress(f"verifying {len(cands)} variant(s) ({fan.backend})")
        qs = [_verify_request(src, v, rebuilt) for v in cands]
        ahead = {d.label: d for d in fan.map(verify_variant, qs, verdict_text, died_verify)}
    for v in cands:
        if chosen is not None and not verify_all and v.rank >= chosen.rank:
            break
        what = (f"measured {v.measured.median_s * 1e6:.3g} us" if v.measured
                else f"estimated {v.seconds * 1e6:.3g} us")
        if v.label not in ahead:
            progress(f"verifying {v.label} ({what}; {fan.backend})")
        ok, note, files = _verify(src, v, gpu, assumptions, rebuilt, fan, ahead.get(v.label))
        v.verified, v.verify_note = ok, note
        if ok and (chosen is None or v.rank < chosen.rank):
            chosen, chosen_files = v, files
        elif not ok:
            notes.append(f"variant {v.label} failed verification and is not chosen: {note}")
        if "re-measured" in note:
            notes.append(f"variant {v.label}: {note}")
    secs["verify"] = time.perf_counter() - t
    uar = variants.plan_for(src, chosen.result.split_storage if chosen else True, "auto").uar
    return TuneResult(src, gpu, assumptions, baseline, whole, chosen, chosen_files, choices,
                      notes, fan.backend, secs, uar, info, calibration, fan.describe())


def _request(src: Source, v: Variant) -> Request:
    return Request(src, v.label, v.result.split_storage, v.result.choices,
                   megakernel=v.result.megakernel, without=v.result.without,
                   smem=v.result.smem)


def _remeasured(old: float, v: Variant) -> str:
    return (f"; the rebuilt fused module differed from the worker's (code generation not "
            f"deterministic across processes): re-measured, estimate {old * 1e6:.3g} -> "
            f"{v.seconds * 1e6:.3g} us")


def _rebuild(src: Source, v: Variant, gpu: Gpu, a: Assumptions, rebuilt: dict):
    """`v` rebuilt in this process: (FuseResult, note), kept in `rebuilt`. Code generation
    should rebuild the module the worker estimated; when it does not (seen on deepspeech2 and
    bert_layer: the fused module differs between processes), the rebuilt module is counted
    and estimated again and `v` takes its result, so what is measured, verified, reported and
    written is one program. SiriusError when the rebuild fails."""
    if v.label in rebuilt:
        return rebuilt[v.label]
    req = _request(src, v)
    again, res = variants.build(req, measure=False)
    remeasured = ""
    if again.ir_sha != v.result.ir_sha:
        again, res = variants.build(req)
        old = v.seconds
        fresh = estimate_variant(again, gpu, a)
        v.result, v.estimate, v.region_seconds = again, fresh.estimate, fresh.region_seconds
        remeasured = _remeasured(old, v)
    rebuilt[v.label] = (res, remeasured)
    return rebuilt[v.label]


def _measure(src: Source, baseline: Variant, whole: list[Variant], device, config, gpu: Gpu,
             a: Assumptions, rebuilt: dict, notes: list[str], why: str,
             progress: Progress, fan: fanout.Fanout | None = None) -> MeasureInfo:
    """Time the original and every built variant on `device` (measure.py), one bench for all;
    variants that are one program (same device IR and host program) are timed once. On Ray
    the bench is a task asking for one GPU (`Fanout.on_gpu`); without Ray, when the cluster
    has no GPU or the task fails, it runs in this process on `device`."""
    from sirius.runtime.gpu.bench import BenchProgram
    from sirius.runtime.gpu.driver import GpuError
    from sirius.tune.measure import measure_on_a_gpu, measure_programs

    s = variants.session(src)
    o = s.original
    sides: dict[str, BenchProgram] = {}
    side_of: dict[str, str] = {}   # variant label -> the side that times its program
    keys: dict[tuple, str] = {}
    for v in [baseline] + whole:
        if v.estimate is None:
            continue
        if v.result.original:  # its device IR only: a Program holds llvmlite modules, which
            # cannot be pickled into a Ray task
            host, program = o.host, _DeviceIR(o.program.device_ir, tuple(o.program.files))
        else:
            try:
                res, _ = _rebuild(src, v, gpu, a, rebuilt)
            except SiriusError as e:
                v.measure_note = f"not measured: the rebuild failed: {e.message}"
                continue
            host, program = res.host, _DeviceIR(res.device_ir, tuple(res.files),
                                                tuple(res.cooperative_kernels))
        key = (v.result.ir_sha, repr(host))
        if key not in keys:
            keys[key] = v.label
            sides[v.label] = BenchProgram(host, program, tuple(o.kernels), dict(s.dtypes))
        side_of[v.label] = keys[key]
    name = device.info.name
    ran, here = (None, "") if fan is None else fan.on_gpu(measure_on_a_gpu, sides, config,
                                                           src.seed)
    where = "a Ray task with one GPU" if ran is not None else "this process"
    if here:
        notes.append(f"measurement: {here}")
    progress(f"measuring {len(sides)} program(s) on {name} ({where})")
    try:
        got, method, bench_notes = ran if ran is not None else measure_programs(
            sides, device, config, src.seed, progress)
    except GpuError as e:
        notes.append(f"GPU measurement failed, the choice uses the estimates: {e.message}")
        return MeasureInfo(False, f"{why}; the measurement failed: {e.message}",
                           device.info.to_json(), "", config, where)
    notes += [f"measurement: {n}" for n in bench_notes]
    for v in [baseline] + whole:
        if v.label in side_of:
            v.measured = got[side_of[v.label]]
            if side_of[v.label] != v.label:
                v.measure_note = f"the same program as {side_of[v.label]}, timed once"
    return MeasureInfo(True, why, device.info.to_json(), method, config, where)


@dataclass(frozen=True)
class _DeviceIR:
    """What GpuDevice.load_module needs of a program: its device IR and the kernels to launch
    cooperatively (a megakernel's); picklable, for the measurement as a Ray task."""

    device_ir: str
    files: tuple
    cooperative_kernels: tuple = ()


def _verify_request(src: Source, v: Variant, rebuilt: dict) -> VerifyRequest:
    """The task verifying `v`: its module as estimated; one that was timed here (`rebuilt`)
    is not counted again elsewhere."""
    return VerifyRequest(_request(src, v), v.result.ir_sha, remeasure=v.label not in rebuilt)


def _verify(src: Source, v: Variant, gpu: Gpu, a: Assumptions, rebuilt: dict,
            fan: fanout.Fanout, verdict: Verdict | None = None):
    """Verify `v` as a task of `fan` (verifying.py; `verdict`: its result when already run):
    (ok, note, the files of the module verified or None). A rebuild the task counted again
    replaces `v`'s result and estimate; one that differs from the module timed here is
    verified here instead (`_verify_here`)."""
    d = verdict or fan.map(verify_variant, [_verify_request(src, v, rebuilt)], verdict_text,
                           died_verify)[0]
    if d.ok is None:
        ok, note, files = _verify_here(src, v, gpu, a, rebuilt)
        return ok, note + "; verified in the main process (the task's rebuild differed from " \
            "the module measured here)", files
    note = d.note
    if d.result is not None:
        old = v.seconds
        fresh = estimate_variant(d.result, gpu, a)
        v.result, v.estimate, v.region_seconds = d.result, fresh.estimate, fresh.region_seconds
        note += _remeasured(old, v)
    return d.ok, note, d.files


def _verify_here(src: Source, v: Variant, gpu: Gpu, a: Assumptions, rebuilt: dict):
    """Rebuild `v` in this process (or take its rebuild from `rebuilt`) and verify it against
    the original on the CPU executor: (ok, note, files)."""
    try:
        res, remeasured = _rebuild(src, v, gpu, a, rebuilt)
    except SiriusError as e:
        return False, f"rebuild failed: {e.message}", None
    ok, note = check(res, src.seed)
    return ok, note + remeasured, fused_files(res) if ok else None
