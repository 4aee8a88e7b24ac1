"""`sirius compile PROGRAM.cu`: compile to LLVM IR through the IR cache and time it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sirius.cli.common import clang_flags, program_args, report_args
from sirius.frontend import compile_program


def _cmd_compile_stats(args: argparse.Namespace) -> int:
    program = compile_program([Path(f) for f in args.files], arch=args.arch,
                              extra_flags=clang_flags(args), use_cache=not args.no_cache)
    if args.json:
        print(json.dumps({"files": [str(f) for f in program.files], "arch": args.arch,
                          "cache_hit": program.cache_hit,
                          "seconds": round(program.compile_seconds, 3)}))
    else:
        print(f"cache {'hit' if program.cache_hit else 'miss'}: {program.compile_seconds:.3f} s")
    return 0




def register(sub) -> None:
    cc = sub.add_parser("compile", help="compile to LLVM IR (through the cache) and time it")
    program_args(cc)
    report_args(cc, "the cache outcome and time")
    cc.set_defaults(func=_cmd_compile_stats)
