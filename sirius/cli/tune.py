"""`sirius tune PROGRAM.cu -o DIR`: build fusion variants, estimate them with the cost model
for a GPU of the table, time them on this machine's GPU when there is one (`--measure`),
verify the fastest on the CPU executor, and write tune.json, report.md, report.html, the
chosen program and, when measured, runs.json for `--calibrate` (docs/tune.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sirius.cli.common import Reporter, clang_flags, print_table, program_args, program_argv
from sirius.cli.fuse import params_arg
from sirius.diagnostics import SiriusError


def _arch(args: argparse.Namespace, gpu) -> tuple[str, str | None]:
    """The architecture to assemble for, and a note when it is not the GPU's own."""
    from sirius.backend.limits import LIMITS

    if args.arch:
        return args.arch, None
    if gpu.arch in LIMITS:
        return gpu.arch, None
    return "sm_90", (f"{gpu.name} is {gpu.arch}, which sirius/backend/limits.py does not know: "
                     "planned and assembled for sm_90 (ptxas registers and limits of sm_90)")


def _device(mode: str):
    """(GpuDevice or None, why measurement is on or off). `on` without a usable GPU is an
    error (exit 2); `auto` says why it is off."""
    if mode == "off":
        return None, "--measure off"
    from sirius.runtime.gpu import GpuDevice, GpuError

    try:
        device = GpuDevice(time_launches=False)
    except GpuError as e:
        if mode == "on":
            raise SiriusError(f"--measure on: no GPU can be used here: {e.message}") from e
        return None, f"no GPU can be used here ({e.message})"
    return device, f"--measure {mode}: {device.info.name} ({device.info.arch})"


def _choose_gpu(args: argparse.Namespace, runs, device):
    """The table entry to estimate for: --gpu, else the one RUNS.json was costed with, else
    the measured GPU's, else H100 SXM; and notes."""
    from sirius.tune.gpus import DEFAULT_GPU, for_device
    from sirius.tune.gpus import gpu as find_gpu

    notes = []
    g = find_gpu(args.gpu) if args.gpu else None
    if runs is not None and runs.gpu is not None:
        if g is not None and g.name != runs.gpu:
            raise SiriusError(f"--calibrate {runs.path}: measured against {runs.gpu}'s table "
                              f"entry, but --gpu is {g.name}: calibrate with measurements of "
                              "the GPU you estimate for")
        g = g or find_gpu(runs.gpu)
    if device is not None:
        match = for_device(device.info.name)
        if g is None and match is not None:
            g = match
        elif match is None or match.name != (g or find_gpu(DEFAULT_GPU)).name:
            est = (g or find_gpu(DEFAULT_GPU)).name
            notes.append(f"the estimates are for the table's {est}, the measurements of "
                         f"{device.info.name}: the model's errors compare the two")
    return g or find_gpu(DEFAULT_GPU), notes


def _cmd_tune(args: argparse.Namespace) -> int:
    from sirius.tune.calibrate import load_runs
    from sirius.tune.measure import MeasureConfig
    from sirius.tune.model import Assumptions, fmt_time
    from sirius.tune.report import speedups, write_outputs
    from sirius.tune.tuner import tune
    from sirius.tune.variants import Source

    if args.output is None:
        print("error: give -o DIR", file=sys.stderr)
        return 2
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise SiriusError(f"-o {out}: exists and is not a directory")
    for f in args.files:
        if not Path(f).is_file():
            raise SiriusError(f"{f}: no such file")
    if args.runs < 1 or args.warmup < 0 or args.input_sets < 1:
        raise SiriusError("--runs and --input-sets must be at least 1, --warmup at least 0")
    if args.megakernel_launches is not None and args.megakernel_launches < 0:
        raise SiriusError("--megakernel-launches must be at least 0")
    runs = load_runs(args.calibrate) if args.calibrate else None  # checked before compiling
    device, why = _device(args.measure)
    g, gpu_notes = _choose_gpu(args, runs, device)
    a = Assumptions()
    cal = None
    if runs is not None:
        from sirius.tune.calibrate import fit

        cal = fit(runs, g, a)
        g, a = cal.apply(g, a)
    arch, note = _arch(args, g)
    say = Reporter(args.quiet)
    for n in ([note] if note else []) + gpu_notes:
        say(n)
    if cal is not None:
        say(f"calibrated on {len(cal.residuals)} measurement(s) of {args.calibrate}: launch "
            f"{cal.before.launch_us:.3g} -> {cal.after.launch_us:.3g} us, DRAM "
            f"{cal.before.dram_gbps:.4g} -> {cal.after.dram_gbps:.4g} GB/s, issue-rate factor "
            f"{cal.before.issue_rate_factor:.3g} -> {cal.after.issue_rate_factor:.3g}, grid "
            f"barrier {cal.before.grid_sync_us:.3g} -> {cal.after.grid_sync_us:.3g} us, wait "
            f"{cal.before.wait_us:.3g} -> {cal.after.wait_us:.3g} us")
    src = Source(tuple(args.files), arch, args.entry, tuple(clang_flags(args)),
                 not args.no_cache, args.seed, program_argv(args), params_arg(args))
    config = MeasureConfig(args.runs, args.warmup, args.input_sets, not args.no_flush)
    if args.ray and args.no_ray:
        raise SiriusError("--ray and --no-ray: give one of them")
    if args.jobs is not None and args.jobs < 1:
        raise SiriusError("--jobs must be at least 1")
    use_ray = True if args.ray or (args.ray_address and not args.no_ray) \
        else False if args.no_ray else None
    result = tune(src, g, assumptions=a, jobs=args.jobs, use_ray=use_ray,
                  ray_address=args.ray_address, verify_all=args.verify_all, progress=say,
                  device=device, measure_config=config, measure_why=why, calibration=cal,
                  megakernel_launches=args.megakernel_launches)
    result.notes[:0] = ([note] if note else []) + gpu_notes
    for p in write_outputs(result, out):
        say(f"wrote {p}")
    say.done()
    measured = result.measurement.on
    rows = []
    for v in [result.baseline] + result.variants:
        verdict = {True: "verified", False: "FAILED", None: "-"}[v.verified]
        rows.append([v.label + (" *" if v is result.chosen else ""),
                     str(len(v.result.counts)) if v.result.ok else "-",
                     fmt_time(v.seconds) if v.estimate else "build failed"]
                    + ([fmt_time(v.measured.median_s) if v.measured else "-"] if measured
                       else [])
                    + [_largest(v.estimate) if v.estimate else "-",
                       "reference" if v.result.original else verdict])
    head = ["variant", "launches run", "estimated"] + (["measured"] if measured else []) \
        + ["largest term", "verification"]
    what = f"measured on {result.measurement.device['name']}, median; estimates for {g.name}" \
        if measured else f"estimates for {g.name}; not measured: {result.measurement.why}"
    print_table(f"variants ({what}; * chosen)", head, rows,
                left=("variant", "largest term", "verification"))
    if result.chosen is None:
        print("no variant could be built and verified (see the notes in report.md)")
        return 1
    sp = speedups(result)
    c, b = result.chosen, result.baseline
    line = (f"chosen: {c.label} (by {result.chosen_by}): estimated {fmt_time(c.seconds)} vs "
            f"{fmt_time(b.seconds)} original ({sp['over_original']:.2f}x, estimate)")
    if "measured_over_original" in sp:
        line += (f"; measured {fmt_time(c.measured.median_s)} vs "
                 f"{fmt_time(b.measured.median_s)} ({sp['measured_over_original']:.2f}x)")
    print(f"{line}; report: {out / 'report.html'}")
    return 0


def _largest(est) -> str:
    """The term that takes most of the program's estimated time, with its share."""
    terms = est.terms()
    body = {t: terms[t] for t in ("dram", "compute", "issue", "sync")}
    top = max(body, key=body.get)
    if terms["launch"] >= est.seconds - terms["launch"]:
        top = "launch"
    share = terms[top] / est.seconds if est.seconds else 0.0
    return f"{top} ({share:.0%})"


def register(sub) -> None:
    sp = sub.add_parser("tune", help="build fusion variants, estimate them for a GPU, verify "
                                     "the fastest; write tune.json, report.md, report.html "
                                     "and chosen/")
    program_args(sp, arch_default=None,
                 arch_help="GPU architecture (default: the --gpu's own, e.g. sm_90 for the "
                           "H100 SXM)")
    sp.add_argument("-o", "--output", metavar="DIR", help="output directory")
    sp.add_argument("--gpu", default=None,
                    help="GPU of the table to estimate for (default: the one --calibrate's "
                         "RUNS.json names, else the measured GPU's entry, else 'H100 SXM'; "
                         "also V100, A100, A100-40GB, H200, L4, B200)")
    sp.add_argument("--measure", choices=("auto", "on", "off"), default="auto",
                    help="time the variants on this machine's GPU (auto: when one can be "
                         "used; on: fail without one); writes DIR/runs.json")
    sp.add_argument("--runs", type=int, default=50,
                    help="timed runs per variant when measuring (default 50)")
    sp.add_argument("--warmup", type=int, default=5,
                    help="untimed runs first when measuring (default 5)")
    sp.add_argument("--input-sets", type=int, default=4, metavar="N",
                    help="input sets rotated between runs when measuring (default 4)")
    sp.add_argument("--no-flush", action="store_true",
                    help="do not flush L2 between measured runs")
    sp.add_argument("--calibrate", metavar="RUNS.json",
                    help="fit the model's launch overhead, DRAM bandwidth and issue rate to "
                         "these GPU measurements (schema sirius-runs/1, docs/tune.md; "
                         "`sirius tune --measure on` writes one) and estimate with them")
    sp.add_argument("--jobs", type=int, default=None,
                    help="build and verify variants on N local worker processes (1: in this "
                         "process), not on Ray (default: Ray when installed, else up to 4 "
                         "local workers)")
    sp.add_argument("--ray", action="store_true",
                    help="build, verify and measure as Ray tasks, and fail if Ray cannot "
                         "start (default: Ray when it is installed and starts, else the local "
                         "process pool; needs sirius[scale])")
    sp.add_argument("--no-ray", action="store_true",
                    help="do not use Ray even when it is installed: the local process pool")
    sp.add_argument("--ray-address", help="Ray cluster address (default: a local Ray)")
    sp.add_argument("--seed", type=int, default=7, help="input seed (default 7)")
    sp.add_argument("--params", metavar="NAME,...",
                    help="the model's parameter buffers: launches that compute only from them "
                         "form the one-time prepare part (as `sirius fuse --params`; default: a "
                         "`sirius import-tvm` program's NAME.json)")
    sp.add_argument("--megakernel-launches", type=int, default=None, metavar="N",
                    help="build the megakernel variants only for programs of at most N "
                         "launches (default: the launches one megakernel covers, "
                         "fusion.megakernel.MEGAKERNEL_LAUNCHES; 0: never)")
    sp.add_argument("--verify-all", action="store_true",
                    help="verify every variant, not only until one passes")
    sp.set_defaults(func=_cmd_tune)
