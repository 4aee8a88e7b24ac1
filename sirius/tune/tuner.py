"""`tune()`: build the variants, estimate them, choose per region, verify, and report.

1. Whole-program variants (variants.py) and the original program (the baseline) are built and
   measured, fanned out (fanout.py).
2. Every variant is estimated with the cost model on the chosen GPU (model.py, gpus.py).
3. Per storage setting, each region takes the choice whose launches are estimated fastest; if
   the choices differ between regions the mixed variant is built and estimated too.
4. Candidates (every variant but the original) are verified in order of estimated time, on the
   CPU executor against the original (sirius.verify); the first that verifies is chosen. A
   variant that fails verification is never chosen; with `verify_all` every variant is checked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sirius.diagnostics import SiriusError
from sirius.tune import fanout, variants
from sirius.tune.gpus import Gpu
from sirius.tune.model import Assumptions, ProgramEstimate, estimate_program
from sirius.tune.variants import Request, Source, VariantResult

Progress = Callable[[str], None]


@dataclass
class Variant:
    """A built variant with its estimate and verification verdict (None: not verified)."""

    result: VariantResult
    estimate: ProgramEstimate | None
    verified: bool | None = None
    verify_note: str = ""
    region_seconds: dict[int, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.result.label

    @property
    def seconds(self) -> float:
        return self.estimate.seconds if self.estimate is not None else math.inf


@dataclass
class TuneResult:
    source: Source
    gpu: Gpu
    assumptions: Assumptions
    baseline: Variant
    variants: list[Variant]
    chosen: Variant | None
    chosen_fuse: object | None          # the FuseResult of the chosen variant
    region_choices: dict[bool, list[str]]  # storage setting -> per-region choice
    notes: list[str]
    ran_on: str
    seconds: dict[str, float]
    uar: object | None = None  # the UAR the chosen variant was planned on (for the picture)

    def default(self) -> Variant | None:
        """The variant `sirius fuse` builds with its defaults (auto, storage split)."""
        return next((v for v in self.variants if v.result.choices == "auto"
                     and v.result.split_storage), None)


def estimate_variant(r: VariantResult, gpu: Gpu, a: Assumptions) -> Variant:
    """A built variant with its estimate (none when the build failed) and per-region times."""
    if not r.ok:
        return Variant(r, None)
    est = estimate_program(list(r.counts), gpu, a)
    per_region: dict[int, float] = {}
    for c, e in zip(r.counts, est.launches, strict=True):
        per_region[c.region] = per_region.get(c.region, 0.0) + e.seconds
    return Variant(r, est, region_seconds=per_region)


def tune(src: Source, gpu: Gpu, *, assumptions: Assumptions | None = None, jobs: int = 1,
         use_ray: bool = False, ray_address: str | None = None, verify_all: bool = False,
         progress: Progress = lambda _: None) -> TuneResult:
    """Explore, estimate, verify and choose (module docstring)."""
    assumptions = assumptions or Assumptions()
    secs: dict[str, float] = {}
    notes: list[str] = []
    t = time.perf_counter()
    progress(f"analysing {', '.join(src.files)} for {src.arch}")
    splits = [True, False] if variants.storage_changes(src) else [True]
    if len(splits) == 1:
        notes.append("storage splitting changes nothing in this program: one storage setting")
    n_regions = len(variants.plan_for(src, True, "auto").regions)
    secs["analysis"] = time.perf_counter() - t

    t = time.perf_counter()
    reqs = variants.whole_program_requests(src, splits)
    progress(f"building {len(reqs)} variants ({n_regions} region(s); "
             f"{'Ray' if use_ray else f'{jobs} job(s)'})")
    results, ran_on = fanout.run_requests(reqs, jobs=jobs, use_ray=use_ray,
                                          ray_address=ray_address, progress=progress)
    built = [estimate_variant(r, gpu, assumptions) for r in results]
    baseline, whole = built[0], built[1:]
    if not baseline.result.ok:
        raise SiriusError(f"the original program could not be measured: "
                          f"{baseline.result.error}")

    # per-region choice, then the mixed variant
    choices: dict[bool, list[str]] = {}
    mixed: list[Request] = []
    for split in splits:
        opts = [v for v in whole if v.result.split_storage == split and v.estimate is not None]
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
    if mixed:
        more, _ = fanout.run_requests(mixed, jobs=jobs, use_ray=use_ray,
                                      ray_address=ray_address, progress=progress)
        whole += [estimate_variant(r, gpu, assumptions) for r in more]
    for v in whole:
        if not v.result.ok:
            notes.append(f"variant {v.label} could not be built: "
                         f"{v.result.error.splitlines()[0]}")
        elif v.result.region_nodes and v.result.regions != n_regions:
            raise SiriusError(f"variant {v.label} planned {v.result.regions} regions, "
                              f"expected {n_regions} (planner not deterministic?)")
    secs["variants"] = time.perf_counter() - t

    # verify in order of estimated time; a candidate re-estimated on its rebuild (below) may
    # fall behind the next one, so go on while a candidate could still be faster
    t = time.perf_counter()
    chosen = chosen_fuse = None
    for v in sorted((v for v in whole if v.estimate is not None), key=lambda v: v.seconds):
        if chosen is not None and not verify_all and v.seconds >= chosen.seconds:
            break
        progress(f"verifying {v.label} (estimated {v.seconds * 1e6:.3g} us)")
        ok, note, res = _verify(src, v, gpu, assumptions)
        v.verified, v.verify_note = ok, note
        if ok and (chosen is None or v.seconds < chosen.seconds):
            chosen, chosen_fuse = v, res
        elif not ok:
            notes.append(f"variant {v.label} failed verification and is not chosen: {note}")
        if "re-measured" in note:
            notes.append(f"variant {v.label}: {note}")
    secs["verify"] = time.perf_counter() - t
    uar = variants.plan_for(src, chosen.result.split_storage if chosen else True, "auto").uar
    return TuneResult(src, gpu, assumptions, baseline, whole, chosen, chosen_fuse, choices,
                      notes, ran_on, secs, uar)


def _verify(src: Source, v: Variant, gpu: Gpu, a: Assumptions):
    """Rebuild `v` in this process and verify it against the original on the CPU executor:
    (ok, note, FuseResult). Code generation should rebuild the module the worker estimated;
    when it does not (seen on deepspeech2 and bert_layer: the fused module differs between
    processes), the rebuilt module is measured and estimated again and `v` takes its result,
    so what is verified, reported and written is one program."""
    from sirius.verify.differential import ORDERS, verify_fused

    req = Request(src, v.label, v.result.split_storage, v.result.choices)
    try:
        again, res = variants.build(req, measure=False)
        remeasured = ""
        if again.ir_sha != v.result.ir_sha:
            again, res = variants.build(req)
            old = v.seconds
            fresh = estimate_variant(again, gpu, a)
            v.result, v.estimate, v.region_seconds = again, fresh.estimate, fresh.region_seconds
            remeasured = (f"; the rebuilt fused module differed from the worker's (code "
                          f"generation not deterministic across processes): re-measured, "
                          f"estimate {old * 1e6:.3g} -> {v.seconds * 1e6:.3g} us")
    except SiriusError as e:
        return False, f"rebuild failed: {e.message}", None
    report = verify_fused(res.original, res, seed=src.seed, orders=ORDERS)
    if report.ok:
        return True, f"ok ({', '.join(ORDERS)} orders, seed {src.seed}){remeasured}", res
    bad = report.failed()
    what = "; ".join(f"{r.order} {r.buffer}: {r.error or f'{r.mismatches} mismatches'}"
                     for r in bad[:3]) or "; ".join(m for _, m in report.faults[:2])
    return False, f"NOT OK: {what}{remeasured}", res
