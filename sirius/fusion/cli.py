"""`sirius fuse PROGRAM.cu -o OUT/` and `sirius verify PROGRAM.cu` (docs/fusion.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sirius.fusion.planner import ARRANGEMENTS, Options


def _progress(quiet: bool):
    start = time.perf_counter()

    def say(msg: str) -> None:
        if not quiet:
            print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    return say


def _options(args: argparse.Namespace) -> Options:
    return Options(arch=args.arch, arrangement=args.arrangement,
                   split_storage=not args.no_split_storage, wavefront=not args.no_wavefront)


def _fuse(args: argparse.Namespace, say):
    from sirius.fusion.driver import fuse

    flags = [f"-I{d}" for d in args.include] + [f"-D{d}" for d in args.define]
    return fuse([Path(f) for f in args.files], _options(args), entry=args.entry, flags=flags,
                use_cache=not args.no_cache, progress=say)


def _summary(res) -> str:
    lines = [f"launches: {res.launches_before} -> {res.launches_after}"]
    for rec in res.fused:
        members = ", ".join(f"{n.sid} {n.launch.kernel}" for n in rec.nodes)
        lines.append(f"  {rec.name} ({rec.arrangement}): {members}")
    for u in res.undone:
        lines.append(f"  undone: {u}")
    return "\n".join(lines)


def _cmd_fuse(args: argparse.Namespace) -> int:
    from sirius.fusion.report import plan_json, write_outputs

    say = _progress(args.quiet)
    res = _fuse(args, say)
    if args.output is None and not args.json:
        print("error: give -o OUT/ (or --json)", file=sys.stderr)
        return 2
    if args.output is not None:
        for p in write_outputs(res, Path(args.output)):
            say(f"wrote {p}")
    if args.json:
        print(json.dumps(plan_json(res), indent=1))
    else:
        print(_summary(res))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from sirius.fusion.verify import verify_fused

    say = _progress(args.quiet)
    res = _fuse(args, say)
    print(_summary(res))
    orders = tuple(args.order) if args.order else ("forward", "reverse", f"random:{args.seed}")
    rep = verify_fused(res.original, res, seed=args.seed, orders=orders, progress=say,
                       exact=args.exact)
    if args.json:
        print(json.dumps(rep.to_json(), indent=1))
    else:
        print(rep.render())
    return 0 if rep.ok else 1


def _fusion_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--arrangement", choices=ARRANGEMENTS, default="auto",
                    help="vertical, horizontal, or auto (default): vertical along dependences, "
                         "horizontal across independent launches")
    sp.add_argument("--no-split-storage", action="store_true",
                    help="keep temporaries that share storage together (no false-dependence "
                         "splitting)")
    sp.add_argument("--no-wavefront", action="store_true",
                    help="do not skew host loop nests into wavefronts")
    sp.add_argument("--entry", default="main", help="host entry function (default main)")
    sp.add_argument("-I", dest="include", action="append", default=[], metavar="DIR")
    sp.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def register(sub, common) -> None:
    sp = sub.add_parser("fuse", help="fuse a program's launches; write fused.ll, fused.ptx, "
                                     "plan.json and report.md")
    common(sp)
    _fusion_args(sp)
    sp.add_argument("-o", "--output", metavar="OUT", help="output directory")
    sp.add_argument("--json", action="store_true", help="print plan.json to stdout")
    sp.set_defaults(func=_cmd_fuse)

    vp = sub.add_parser("verify", help="fuse, then run original and fused on the CPU executor "
                                       "and compare every output (exit 1 on a mismatch)")
    common(vp)
    _fusion_args(vp)
    vp.add_argument("--seed", type=int, default=7, help="input seed (default 7)")
    vp.add_argument("--order", action="append", metavar="ORDER",
                    help="forward, reverse or random:S (repeatable; default: forward, reverse "
                         "and random:SEED)")
    vp.add_argument("--exact", action="store_true", help="demand bitwise equality")
    vp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    vp.set_defaults(func=_cmd_verify)
