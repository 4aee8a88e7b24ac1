"""`sirius tune PROGRAM.cu -o DIR`: build fusion variants, estimate them with the cost model
for a GPU of the table, verify the fastest on the CPU executor, and write tune.json,
report.md, report.html and the chosen program (docs/tune.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sirius.cli.common import Reporter, clang_flags, print_table, program_args, program_argv
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


def _cmd_tune(args: argparse.Namespace) -> int:
    from sirius.tune.fanout import default_jobs
    from sirius.tune.gpus import gpu as find_gpu
    from sirius.tune.model import fmt_time
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
    g = find_gpu(args.gpu)
    arch, note = _arch(args, g)
    say = Reporter(args.quiet)
    if note:
        say(note)
    src = Source(tuple(args.files), arch, args.entry, tuple(clang_flags(args)),
                 not args.no_cache, args.seed, program_argv(args))
    result = tune(src, g, jobs=args.jobs or default_jobs(), use_ray=args.ray,
                  ray_address=args.ray_address, verify_all=args.verify_all, progress=say)
    if note:
        result.notes.insert(0, note)
    for p in write_outputs(result, out):
        say(f"wrote {p}")
    say.done()
    rows = []
    for v in [result.baseline] + result.variants:
        verdict = {True: "verified", False: "FAILED", None: "-"}[v.verified]
        rows.append([v.label + (" *" if v is result.chosen else ""),
                     str(len(v.result.counts)) if v.result.ok else "-",
                     fmt_time(v.seconds) if v.estimate else "build failed",
                     _largest(v.estimate) if v.estimate else "-",
                     "reference" if v.result.original else verdict])
    print_table(f"variants on {g.name} (estimates; * chosen)",
                ["variant", "launches run", "estimated", "largest term", "verification"],
                rows, left=("variant", "largest term", "verification"))
    if result.chosen is None:
        print("no variant could be built and verified (see the notes in report.md)")
        return 1
    sp = speedups(result)
    print(f"chosen: {result.chosen.label}: estimated {fmt_time(result.chosen.seconds)} vs "
          f"{fmt_time(result.baseline.seconds)} original ({sp['over_original']:.2f}x, estimate)"
          f"; report: {out / 'report.html'}")
    return 0


def _largest(est) -> str:
    """The term that takes most of the program's estimated time, with its share."""
    terms = est.terms()
    body = {t: terms[t] for t in ("dram", "compute", "issue")}
    top = max(body, key=body.get)
    if terms["launch"] >= est.seconds - terms["launch"]:
        top = "launch"
    share = terms[top] / est.seconds if est.seconds else 0.0
    return f"{top} ({share:.0%})"


def register(sub) -> None:
    sp = sub.add_parser("tune", help="build fusion variants, estimate them for a GPU, verify "
                                     "the fastest; write tune.json, report.md, report.html "
                                     "and chosen/")
    program_args(sp)
    sp.set_defaults(arch=None)  # default: the GPU's architecture
    sp.add_argument("-o", "--output", metavar="DIR", help="output directory")
    sp.add_argument("--gpu", default="H100 SXM",
                    help="GPU of the table to estimate for (default 'H100 SXM'; also V100, "
                         "A100, A100-40GB, H200, L4, B200)")
    sp.add_argument("--jobs", type=int, default=0,
                    help="local worker processes for variant builds (default: up to 4)")
    sp.add_argument("--ray", action="store_true",
                    help="build variants as Ray tasks (needs sirius[scale])")
    sp.add_argument("--ray-address", help="Ray cluster address (default: a local Ray)")
    sp.add_argument("--seed", type=int, default=7, help="input seed (default 7)")
    sp.add_argument("--verify-all", action="store_true",
                    help="verify every variant, not only until one passes")
    sp.set_defaults(func=_cmd_tune)
