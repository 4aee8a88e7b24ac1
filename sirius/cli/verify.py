"""`sirius verify PROGRAM.cu`: fuse, then run original and fused on the CPU executor and compare
(docs/verify.md). Exit status 0: they agree; 1: they differ (the fusion is wrong); 3: the
original program itself is order-dependent, and the fusion agrees on everything else."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sirius.cli.bench import gpu_device, verify_on_gpu
from sirius.cli.common import program_args, report_args
from sirius.cli.fuse import (
    Reference,
    default_orders,
    fuse_from_args,
    fusion_args,
    progress,
    summary,
)


def _cmd_verify(args: argparse.Namespace) -> int:
    from sirius.frontend.compile import check_inputs
    from sirius.verify.differential import verify_fused

    check_inputs([Path(f) for f in args.files])
    if args.jobs is None:
        args.jobs = env_jobs()
    device = gpu_device(args) if args.device == "gpu" else None  # a missing GPU: said first
    say = progress(args.quiet)
    orders = tuple(args.order) if args.order else default_orders(args.seed)
    ref = Reference(args.seed, args.jobs, len(orders), say=say) if device is None else None
    try:
        res = fuse_from_args(args, say, ref)
        print(summary(res), file=sys.stderr if args.json else sys.stdout)
        if device is not None:
            return verify_on_gpu(res, device, args, say)
        rep = verify_fused(res.original, res, seed=args.seed, orders=orders, progress=say,
                           exact=args.exact, jobs=args.jobs, fail_fast=args.fail_fast,
                           launch_progress=say.tick, head=ref.head if ref else None,
                           replay=not args.no_replay)
    finally:
        if ref is not None:
            ref.close()
    say.done()
    if args.json:
        print(json.dumps(rep.to_json(), indent=1))
    else:
        print(rep.render())
    return rep.exit_status


def env_jobs() -> int | None:
    """The worker processes when no -j is given: $SIRIUS_VERIFY_JOBS, else None (one per
    core). The test suite sets it to 1 in its pytest-xdist workers: there both cores already
    run a test, and a pool's fork server and workers (each importing sirius and compiling the
    modules again) cost more than the runs of a small program (`sirius verify` of
    kernels/matmul_bias_act.cu: 5.6 s with the pool, 3.0 s with -j 1)."""
    import os

    from sirius.diagnostics import SiriusError

    text = os.environ.get("SIRIUS_VERIFY_JOBS", "").strip()
    if not text:
        return None
    try:
        return _jobs(text)
    except argparse.ArgumentTypeError as e:
        raise SiriusError(f"SIRIUS_VERIFY_JOBS={text!r}: {e}") from None


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of worker processes (>= 1)")
    return n


def register(sub) -> None:
    vp = sub.add_parser("verify", help="fuse, then run original and fused on the CPU executor "
                                       "and compare every output (exit 1 on a mismatch, 3 when "
                                       "the original itself is order-dependent)")
    program_args(vp)
    fusion_args(vp)
    vp.add_argument("--seed", type=int, default=7, help="input seed (default 7)")
    vp.add_argument("--order", action="append", metavar="ORDER",
                    help="forward, reverse or random:S (repeatable; default: forward, reverse "
                         "and random:SEED)")
    vp.add_argument("--exact", action="store_true", help="demand bitwise equality")
    vp.add_argument("-j", "--jobs", type=_jobs, default=None, metavar="N",
                    help="run the original and the fused orders in N worker processes "
                         "(default: $SIRIUS_VERIFY_JOBS, else one per core; 1: one after "
                         "another in this process)")
    vp.add_argument("--fail-fast", action="store_true",
                    help="stop at the first fused run that differs or faults")
    vp.add_argument("--no-replay", action="store_true",
                    help="run every launch in every order (default: the fused runs after the "
                         "first order take the first order's result of a launch of a kernel "
                         "the fusion did not make, where its inputs are the same)")
    vp.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                    help="cpu (default), or gpu: original and fused on the GPU, each against "
                         "the CPU executor's original and the fused against the GPU original")
    report_args(vp, "the comparison")
    vp.set_defaults(func=_cmd_verify)
