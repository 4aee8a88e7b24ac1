"""`sirius fuse PROGRAM.cu -o OUT/` (docs/fusion.md); `fusion_args`, `fuse_from_args` and
`summary` are shared with `sirius verify`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sirius.cli.common import Reporter, clang_flags, program_args
from sirius.fusion.plan.planner import ARRANGEMENTS, Options


def progress(quiet: bool) -> Reporter:
    return Reporter(quiet)


def _options(args: argparse.Namespace) -> Options:
    return Options(arch=args.arch, arrangement=args.arrangement,
                   split_storage=not args.no_split_storage, wavefront=not args.no_wavefront)


def fuse_from_args(args: argparse.Namespace, say):
    from sirius.pipeline import fuse

    flags = clang_flags(args)
    return fuse([Path(f) for f in args.files], _options(args), entry=args.entry, flags=flags,
                use_cache=not args.no_cache, progress=say)


def summary(res) -> str:
    lines = [f"launches: {res.launches_before} -> {res.launches_after}"]
    for rec in res.fused:
        members = ", ".join(f"{n.sid} {n.launch.kernel}" for n in rec.nodes)
        lines.append(f"  {rec.name} ({rec.arrangement}): {members}")
    for u in res.undone:
        lines.append(f"  undone: {u}")
    return "\n".join(lines)


def _cmd_fuse(args: argparse.Namespace) -> int:
    from sirius.fusion.report import plan_json, write_outputs

    say = progress(args.quiet)
    res = fuse_from_args(args, say)
    if args.output is None and not args.json:
        print("error: give -o OUT/ (or --json)", file=sys.stderr)
        return 2
    if args.output is not None:
        for p in write_outputs(res, Path(args.output)):
            say(f"wrote {p}")
    say.done()
    if args.json:
        print(json.dumps(plan_json(res), indent=1))
    else:
        print(summary(res))
    return 0


def fusion_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--arrangement", choices=ARRANGEMENTS, default="auto",
                    help="vertical, horizontal, or auto (default): vertical along dependences, "
                         "horizontal across independent launches")
    sp.add_argument("--no-split-storage", action="store_true",
                    help="keep temporaries that share storage together (no false-dependence "
                         "splitting)")
    sp.add_argument("--no-wavefront", action="store_true",
                    help="do not skew host loop nests into wavefronts")


def register(sub) -> None:
    sp = sub.add_parser("fuse", help="fuse a program's launches; write fused.ll, fused.ptx, "
                                     "plan.json and report.md")
    program_args(sp)
    fusion_args(sp)
    sp.add_argument("-o", "--output", metavar="OUT", help="output directory")
    sp.add_argument("--json", action="store_true", help="print plan.json to stdout")
    sp.set_defaults(func=_cmd_fuse)
